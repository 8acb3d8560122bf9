// Static types of IR values: arrays (f32[3,4]) and refs to arrays (Ref{f32[3,4]}).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "refjit/ir/dtype.h"

namespace refjit {

using Shape = std::vector<int64_t>;

int64_t num_elements(const Shape& shape);
// "3,4" (no brackets); "" for a scalar.
std::string shape_text(const Shape& shape);

struct ArrayType {
  DType dtype = DType::f32;
  Shape shape;

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t num_elements() const { return refjit::num_elements(shape); }
  int64_t byte_size() const { return num_elements() * refjit::byte_size(dtype); }
  bool is_scalar() const { return shape.empty(); }
  bool operator==(const ArrayType&) const = default;

  std::string str() const;       // f32[3,4]
  std::string long_str() const;  // float32[3,4], for error messages
};

// A value's type: an array, or a ref (mutable buffer) holding an array.
struct Type {
  ArrayType array;
  bool is_ref = false;

  Type() = default;
  Type(ArrayType a) : array(std::move(a)) {}  // NOLINT: arrays convert implicitly
  static Type ref(ArrayType inner) {
    Type t(std::move(inner));
    t.is_ref = true;
    return t;
  }

  DType dtype() const { return array.dtype; }
  const Shape& shape() const { return array.shape; }
  bool operator==(const Type&) const = default;

  std::string str() const;       // f32[3] or Ref{f32[3]}
  std::string long_str() const;  // float32[3] or Ref{float32[3]}
};

}  // namespace refjit
