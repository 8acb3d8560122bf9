// Implementation details of refjit/value.h that its templates need. Not part of the API: names here
// may change at any time.
#pragma once

#include <memory>
#include <type_traits>

#include "refjit/ir/dtype.h"

namespace refjit {

namespace detail {
// The shared state behind a Value or a Ref (compiler/node.h).
struct Node;
using NodePtr = std::shared_ptr<const Node>;
// The dtype a C++ scalar type maps to: float -> f32, double -> f64, bool -> bool,
// integers of up to 32 bits -> i32, wider -> i64.
template <class T>
constexpr DType dtype_of_scalar() {
  if constexpr (std::is_same_v<T, bool>)
    return DType::bool_;
  else if constexpr (std::is_same_v<T, float>)
    return DType::f32;
  else if constexpr (std::is_floating_point_v<T>)
    return DType::f64;
  else if constexpr (sizeof(T) <= 4)
    return DType::i32;
  else
    return DType::i64;
}
}  // namespace detail

}  // namespace refjit
