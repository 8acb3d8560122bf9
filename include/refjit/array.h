// Host arrays: a dtype, a static shape and contiguous row-major data.
//
// Array has value semantics: copies share storage until one of them is written through
// mutable_data(), which copies first if the storage is shared (copy on write).
// RefBuffer is the storage behind a ref: shared, mutable, updated in place.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "refjit/ir/half_float.h"
#include "refjit/ir/type.h"

namespace refjit {

class Array {
 public:
  Array();                                  // f32[] holding 0
  explicit Array(ArrayType type);           // zero-filled
  Array(ArrayType type, const void* data);  // copies type.byte_size() bytes
  // Adopts `storage` (at least type.byte_size() bytes, aligned for the dtype) without copying:
  // how memory owned elsewhere, e.g. a NumPy array's, is used in place. The deleter of
  // `storage` releases it once no Array shares it.
  Array(ArrayType type, std::shared_ptr<std::byte[]> storage);

  // Storage whose contents are unspecified, for a caller that writes every element before
  // anything reads one (compiled code's outputs): skips the zero fill.
  static Array uninitialized(ArrayType type);

  template <class T>
  static Array from_vector(const std::vector<T>& values, Shape shape);
  template <class T>
  static Array scalar(T value) {
    return from_vector<T>(std::vector<T>{value}, {});
  }
  // A scalar or filled array of dtype d, converted from v as convert_element_type does.
  static Array full(ArrayType type, double v);

  const ArrayType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  int rank() const { return type_.rank(); }
  int64_t size() const { return type_.num_elements(); }
  int64_t byte_size() const { return type_.byte_size(); }

  const std::byte* data() const { return data_; }
  // Unshares the storage first if another Array shares it.
  std::byte* mutable_data();
  // Whether no other Array shares this one's storage (mutable_data() would not copy).
  bool unique() const { return storage_.use_count() <= 1; }

  template <class T>
  std::span<const T> values() const {
    check_dtype_of<T>();
    return {reinterpret_cast<const T*>(data_), static_cast<size_t>(size())};
  }
  template <class T>
  std::span<T> mutable_values() {
    check_dtype_of<T>();
    return {reinterpret_cast<T*>(mutable_data()), static_cast<size_t>(size())};
  }
  // Element i (row-major flat index), converted to double (a complex element's real part),
  // complex or int64.
  double as_double(int64_t i) const;
  std::complex<double> as_complex(int64_t i) const;
  int64_t as_int(int64_t i) const;
  // Writes element i from a double or a complex number, converting as convert_element_type
  // does (a real dtype keeps the real part).
  void set_from_double(int64_t i, double v);
  void set_from_complex(int64_t i, std::complex<double> v);

  // A deep copy that shares nothing.
  Array clone() const;
  // Same data, another shape with the same element count.
  Array reshaped(Shape shape) const;
  // Same data read as another dtype of the same width (u16 bits as bf16).
  Array bitcast(DType to) const;

  // Exact equality of dtype, shape and bits-as-values (NaN == NaN).
  bool operator==(const Array& other) const;

  // The CLI's value syntax: `[[1.0, 2.0], [3.0, 4.0]]`, shortest round-trip floats.
  std::string str() const;

 private:
  template <class T>
  void check_dtype_of() const;

  ArrayType type_;
  std::shared_ptr<std::byte[]> storage_;
  std::byte* data_ = nullptr;
};

// The storage behind a host ref: one mutable array that every holder sees.
class RefBuffer {
 public:
  explicit RefBuffer(Array initial, RefKind kind = RefKind::plain)
      : value_(initial.clone()), kind_(kind) {}
  // A ref whose updates go to `storage`'s memory itself (no copy while nothing else shares
  // it): a caller's buffer, e.g. a NumPy array, used as a gradient accumulator.
  static std::shared_ptr<RefBuffer> over(Array storage) {
    auto r = std::make_shared<RefBuffer>(Array());
    r->value_ = std::move(storage);
    return r;
  }
  const Array& value() const { return value_; }
  Array& value() { return value_; }
  const ArrayType& type() const { return value_.type(); }
  RefKind kind() const { return kind_; }
  bool frozen() const { return frozen_; }
  void mark_frozen() { frozen_ = true; }

 private:
  Array value_;
  RefKind kind_ = RefKind::plain;
  bool frozen_ = false;
};
using RefBufferPtr = std::shared_ptr<RefBuffer>;

}  // namespace refjit
