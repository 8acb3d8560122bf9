#include "python/src/arrays.h"

#include <fmt/format.h>

#include <cstdint>
#include <vector>

namespace nb = nanobind;

namespace refjit::python {

namespace {

using Code = nb::dlpack::dtype_code;

nb::dlpack::dtype dlpack_of(DType d) {
  auto make = [](Code c, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(c), static_cast<uint8_t>(bits), 1};
  };
  switch (d) {
    case DType::f32: return make(Code::Float, 32);
    case DType::f64: return make(Code::Float, 64);
    case DType::f16: return make(Code::Float, 16);
    case DType::bf16: return make(Code::Bfloat, 16);
    case DType::i8: return make(Code::Int, 8);
    case DType::i16: return make(Code::Int, 16);
    case DType::i32: return make(Code::Int, 32);
    case DType::i64: return make(Code::Int, 64);
    case DType::u8: return make(Code::UInt, 8);
    case DType::u16: return make(Code::UInt, 16);
    case DType::u32: return make(Code::UInt, 32);
    case DType::u64: return make(Code::UInt, 64);
    case DType::bool_: return make(Code::Bool, 8);
    case DType::c64: return make(Code::Complex, 64);
    case DType::c128: return make(Code::Complex, 128);
  }
  return make(Code::Float, 32);
}

template <class A>
Array borrow_any(const A& a, const std::string& what) {
  const DType d = dtype_of(a.dtype(), what);
  Shape shape;
  for (size_t k = 0; k < a.ndim(); ++k) shape.push_back(static_cast<int64_t>(a.shape(k)));
  ArrayType t{d, std::move(shape)};
  const auto address = reinterpret_cast<std::uintptr_t>(a.data());
  if (t.num_elements() > 0 && address % static_cast<std::uintptr_t>(byte_size(d)) != 0)
    return Array(t, a.data());  // compiled code assumes element alignment: copy
  // Keep the ndarray (and so the Python object behind it) alive with the storage.
  auto* keep = new A(a);
  auto* data = static_cast<std::byte*>(const_cast<void*>(static_cast<const void*>(a.data())));
  std::shared_ptr<std::byte[]> storage(data, [keep](std::byte*) {
    nb::gil_scoped_acquire gil;
    delete keep;
  });
  return Array(std::move(t), std::move(storage));
}

}  // namespace

DType dtype_of(const nb::dlpack::dtype& d, const std::string& what) {
  const auto code = static_cast<Code>(d.code);
  if (d.lanes == 1) {
    if (code == Code::Float && d.bits == 32) return DType::f32;
    if (code == Code::Float && d.bits == 64) return DType::f64;
    if (code == Code::Float && d.bits == 16) return DType::f16;
    if (code == Code::Bfloat && d.bits == 16) return DType::bf16;
    if (code == Code::Bool && d.bits == 8) return DType::bool_;
    if (code == Code::Complex && d.bits == 64) return DType::c64;
    if (code == Code::Complex && d.bits == 128) return DType::c128;
    if (code == Code::Int || code == Code::UInt) {
      const bool u = code == Code::UInt;
      switch (d.bits) {
        case 8: return u ? DType::u8 : DType::i8;
        case 16: return u ? DType::u16 : DType::i16;
        case 32: return u ? DType::u32 : DType::i32;
        case 64: return u ? DType::u64 : DType::i64;
        default: break;
      }
    }
  }
  throw nb::type_error(
      fmt::format("{} has an element type refjit does not support (DLPack code {}, {} bits); "
                  "refjit computes in float16/32/64, bfloat16, complex64/128, signed and unsigned "
                  "integers and bool",
                  what, static_cast<int>(d.code), static_cast<int>(d.bits))
          .c_str());
}

ArrayType array_type_of(const InArray& a, const std::string& what) {
  Shape shape;
  for (size_t k = 0; k < a.ndim(); ++k) shape.push_back(static_cast<int64_t>(a.shape(k)));
  return ArrayType{dtype_of(a.dtype(), what), std::move(shape)};
}

Array borrow(const InArray& a, const std::string& what) { return borrow_any(a, what); }

Array borrow_writable(const InOutArray& a, const std::string& what) { return borrow_any(a, what); }

nb::object to_numpy(Array a) {
  const ArrayType& t = a.type();
  std::vector<size_t> shape(t.shape.begin(), t.shape.end());
  auto* held = new Array(std::move(a));
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<Array*>(p); });
  // The Array is this result's only holder, so NumPy may write it (a mutable result).
  // NumPy has no bfloat16 of its own: such results are its uint16 bits viewed as ml_dtypes'
  // bfloat16 (the type jax.numpy.bfloat16 is).
  const bool bf16 = t.dtype == DType::bf16;
  nb::ndarray<nb::numpy> out(held->mutable_data(), shape.size(), shape.data(), owner, nullptr,
                             dlpack_of(bf16 ? DType::u16 : t.dtype), nb::device::cpu::value);
  if (bf16) return out.cast().attr("view")(nb::module_::import_("ml_dtypes").attr("bfloat16"));
  return out.cast();
}

nb::object to_result(Array a) {
  // Looked up once and kept for the process: a static nb::object would be released after the
  // interpreter has gone.
  static const nb::handle result_type =
      nb::object(nb::module_::import_("refjit._array").attr("Array")).release();
  return to_numpy(std::move(a)).attr("view")(result_type);  // (an ndarray type: the class)
}

}  // namespace refjit::python
