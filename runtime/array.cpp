#include "refjit/array.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "refjit/ir/error.h"
#include "refjit/ir/literal.h"
#include "runtime/block_cache.h"
#include "runtime/dtype_dispatch.h"

namespace refjit {

namespace {

template <class T>
constexpr DType dtype_of() {
  DType d = DType::bool_;
  for (DType c : kAllDTypes)
    visit_dtype(c, [&](auto tag) {
      if constexpr (std::is_same_v<typename decltype(tag)::type, T>) d = c;
    });
  return d;
}

// 64-byte aligned storage, so compiled code can use aligned vector loads (large blocks
// recycled: runtime/block_cache.h); zero-filled unless `zeroed` is false.
std::shared_ptr<std::byte[]> allocate(int64_t bytes, bool zeroed = true) {
  const size_t n = static_cast<size_t>(bytes > 0 ? bytes : 0);
  std::shared_ptr<std::byte[]> storage = allocate_block(n);
  if (zeroed) std::memset(storage.get(), 0, n == 0 ? 64 : (n + 63) / 64 * 64);
  return storage;
}

}  // namespace

Array::Array() : Array(ArrayType{DType::f32, {}}) {}

Array::Array(ArrayType type) : type_(std::move(type)) {
  for (int64_t d : type_.shape)
    if (d < 0) throw TypeError("negative dimension in array type " + type_.str());
  storage_ = allocate(type_.byte_size());
  data_ = storage_.get();
}

Array Array::uninitialized(ArrayType type) {
  for (int64_t d : type.shape)
    if (d < 0) throw TypeError("negative dimension in array type " + type.str());
  auto storage = allocate(type.byte_size(), /*zeroed=*/false);
  return Array(std::move(type), std::move(storage));
}

Array::Array(ArrayType type, const void* data) : Array(std::move(type)) {
  if (byte_size() > 0) std::memcpy(data_, data, static_cast<size_t>(byte_size()));
}

Array::Array(ArrayType type, std::shared_ptr<std::byte[]> storage)
    : type_(std::move(type)), storage_(std::move(storage)) {
  for (int64_t d : type_.shape)
    if (d < 0) throw TypeError("negative dimension in array type " + type_.str());
  data_ = storage_.get();
}

template <class T>
Array Array::from_vector(const std::vector<T>& values, Shape shape) {
  ArrayType t{dtype_of<T>(), std::move(shape)};
  if (static_cast<int64_t>(values.size()) != t.num_elements())
    throw TypeError(fmt::format("{} values given for an array of type {} ({} elements)",
                                values.size(), t.str(), t.num_elements()));
  Array a(t);
  if constexpr (std::is_same_v<T, bool>) {
    for (size_t i = 0; i < values.size(); ++i)
      a.data_[i] = std::byte{values[i] ? uint8_t{1} : uint8_t{0}};
  } else {
    if (!values.empty()) std::memcpy(a.data_, values.data(), values.size() * sizeof(T));
  }
  return a;
}
template Array Array::from_vector<float>(const std::vector<float>&, Shape);
template Array Array::from_vector<double>(const std::vector<double>&, Shape);
template Array Array::from_vector<int32_t>(const std::vector<int32_t>&, Shape);
template Array Array::from_vector<int64_t>(const std::vector<int64_t>&, Shape);
template Array Array::from_vector<bool>(const std::vector<bool>&, Shape);
template Array Array::from_vector<int8_t>(const std::vector<int8_t>&, Shape);
template Array Array::from_vector<int16_t>(const std::vector<int16_t>&, Shape);
template Array Array::from_vector<uint8_t>(const std::vector<uint8_t>&, Shape);
template Array Array::from_vector<uint16_t>(const std::vector<uint16_t>&, Shape);
template Array Array::from_vector<uint32_t>(const std::vector<uint32_t>&, Shape);
template Array Array::from_vector<uint64_t>(const std::vector<uint64_t>&, Shape);
template Array Array::from_vector<Float16>(const std::vector<Float16>&, Shape);
template Array Array::from_vector<BFloat16>(const std::vector<BFloat16>&, Shape);
template Array Array::from_vector<std::complex<float>>(const std::vector<std::complex<float>>&,
                                                       Shape);
template Array Array::from_vector<std::complex<double>>(const std::vector<std::complex<double>>&,
                                                        Shape);

Array Array::full(ArrayType type, double v) {
  Array a(std::move(type));
  for (int64_t i = 0; i < a.size(); ++i) a.set_from_double(i, v);
  return a;
}

std::byte* Array::mutable_data() {
  if (storage_.use_count() > 1) {
    auto fresh = allocate(byte_size());
    if (byte_size() > 0) std::memcpy(fresh.get(), data_, static_cast<size_t>(byte_size()));
    storage_ = std::move(fresh);
    data_ = storage_.get();
  }
  return data_;
}

template <class T>
void Array::check_dtype_of() const {
  if (dtype_of<T>() != type_.dtype)
    throw TypeError(fmt::format("array of dtype {} accessed as {}", long_name(type_.dtype),
                                long_name(dtype_of<T>())));
}
template void Array::check_dtype_of<float>() const;
template void Array::check_dtype_of<double>() const;
template void Array::check_dtype_of<int32_t>() const;
template void Array::check_dtype_of<int64_t>() const;
template void Array::check_dtype_of<bool>() const;
template void Array::check_dtype_of<int8_t>() const;
template void Array::check_dtype_of<int16_t>() const;
template void Array::check_dtype_of<uint8_t>() const;
template void Array::check_dtype_of<uint16_t>() const;
template void Array::check_dtype_of<uint32_t>() const;
template void Array::check_dtype_of<uint64_t>() const;
template void Array::check_dtype_of<Float16>() const;
template void Array::check_dtype_of<BFloat16>() const;
template void Array::check_dtype_of<std::complex<float>>() const;
template void Array::check_dtype_of<std::complex<double>>() const;

double Array::as_double(int64_t i) const { return as_complex(i).real(); }

std::complex<double> Array::as_complex(int64_t i) const {
  return visit_dtype(type_.dtype, [&](auto tag) -> std::complex<double> {
    using T = typename decltype(tag)::type;
    if constexpr (kIsBool<T>)
      return data_[i] != std::byte{0} ? 1.0 : 0.0;
    else if constexpr (kIsComplex<T>)
      return std::complex<double>(reinterpret_cast<const T*>(data_)[i]);
    else
      return static_cast<double>(reinterpret_cast<const T*>(data_)[i]);
  });
}

int64_t Array::as_int(int64_t i) const {
  return visit_dtype(type_.dtype, [&](auto tag) -> int64_t {
    using T = typename decltype(tag)::type;
    if constexpr (kIsBool<T>)
      return data_[i] != std::byte{0} ? 1 : 0;
    else if constexpr (kIsInt<T>)
      return static_cast<int64_t>(reinterpret_cast<const T*>(data_)[i]);  // uint64: bits
    else
      return Literal::of(DType::i64, as_double(i)).i;
  });
}

void Array::set_from_double(int64_t i, double v) { set_from_complex(i, v); }

void Array::set_from_complex(int64_t i, std::complex<double> v) {
  std::byte* p = mutable_data();
  // A complex value written to a real dtype keeps its real part (convert_element_type).
  Literal l = is_complex(type_.dtype) ? Literal::of_complex(type_.dtype, v.real(), v.imag())
                                      : Literal::of(type_.dtype, v.real());
  visit_dtype(type_.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsBool<T>)
      p[i] = std::byte{static_cast<uint8_t>(l.i)};
    else if constexpr (kIsInt<T>)
      reinterpret_cast<T*>(p)[i] = static_cast<T>(l.i);
    else if constexpr (kIsComplex<T>)
      reinterpret_cast<T*>(p)[i] =
          T(static_cast<typename T::value_type>(l.f), static_cast<typename T::value_type>(l.im));
    else
      reinterpret_cast<T*>(p)[i] = static_cast<T>(l.f);
  });
}

Array Array::clone() const { return Array(type_, data_); }

Array Array::reshaped(Shape shape) const {
  ArrayType t{type_.dtype, std::move(shape)};
  if (t.num_elements() != size())
    throw TypeError(fmt::format("cannot reshape {} to {}", type_.str(), t.str()));
  Array a = *this;
  a.type_ = std::move(t);
  return a;
}

Array Array::bitcast(DType to) const {
  if (refjit::byte_size(to) != refjit::byte_size(type_.dtype) || to == DType::bool_ ||
      dtype() == DType::bool_)
    throw TypeError(
        fmt::format("cannot read {} as {}: the widths differ", type_.str(), short_name(to)));
  Array a = *this;
  a.type_.dtype = to;
  return a;
}

bool Array::operator==(const Array& o) const {
  if (type_ != o.type_) return false;
  auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  for (int64_t i = 0; i < size(); ++i) {
    if (is_inexact(dtype())) {
      std::complex<double> a = as_complex(i), b = o.as_complex(i);
      if (!same(a.real(), b.real()) || !same(a.imag(), b.imag())) return false;
    } else if (as_int(i) != o.as_int(i)) {
      return false;
    }
  }
  return true;
}

namespace {

std::string element_text(const Array& a, int64_t i) {
  switch (a.dtype()) {
    case DType::bool_: return a.as_int(i) ? "true" : "false";
    case DType::u64: return fmt::format("{}", static_cast<uint64_t>(a.as_int(i)));
    default:
      if (is_complex(a.dtype())) {
        std::complex<double> z = a.as_complex(i);
        return complex_text(a.dtype(), z.real(), z.imag());
      }
      if (is_float(a.dtype())) return float_text(a.dtype(), a.as_double(i));
      return fmt::format("{}", a.as_int(i));
  }
}

void append_text(const Array& a, int dim, int64_t& flat, std::string& out) {
  if (dim == a.rank()) {
    out += element_text(a, flat++);
    return;
  }
  out += '[';
  for (int64_t k = 0; k < a.shape()[dim]; ++k) {
    if (k) out += ", ";
    append_text(a, dim + 1, flat, out);
  }
  out += ']';
}

}  // namespace

std::string Array::str() const {
  std::string out;
  int64_t flat = 0;
  append_text(*this, 0, flat, out);
  return out;
}

}  // namespace refjit
