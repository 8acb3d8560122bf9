// Calls a generic callable with the C++ element type of a DType, so eval rules can be written
// once as templates over float/double/int32_t/int64_t/bool.
#pragma once

#include <cstdint>
#include <type_traits>

#include "refjit/ir/dtype.h"

namespace refjit {

template <class T>
struct ElemTag {
  using type = T;
};

template <class F>
decltype(auto) visit_dtype(DType d, F&& f) {
  switch (d) {
    case DType::f32: return f(ElemTag<float>{});
    case DType::f64: return f(ElemTag<double>{});
    case DType::i32: return f(ElemTag<int32_t>{});
    case DType::i64: return f(ElemTag<int64_t>{});
    case DType::bool_: break;
  }
  return f(ElemTag<bool>{});
}

template <class T>
inline constexpr bool kIsFloat = std::is_same_v<T, float> || std::is_same_v<T, double>;
template <class T>
inline constexpr bool kIsInt = std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;
template <class T>
inline constexpr bool kIsNumber = kIsFloat<T> || kIsInt<T>;
template <class T>
inline constexpr bool kIsBool = std::is_same_v<T, bool>;

template <class T>
constexpr DType dtype_for() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  if constexpr (std::is_same_v<T, double>) return DType::f64;
  if constexpr (std::is_same_v<T, int32_t>) return DType::i32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::i64;
  return DType::bool_;
}

}  // namespace refjit
