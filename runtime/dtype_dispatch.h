// Calls a generic callable with the C++ element type of a DType, so eval rules can be written
// once as templates over the element types (float, double, the 16-bit floats, the fixed-width
// integers, bool, std::complex<float> and std::complex<double>).
#pragma once

#include <complex>
#include <cstdint>
#include <type_traits>

#include "refjit/ir/dtype.h"
#include "refjit/ir/half_float.h"

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
    case DType::i8: return f(ElemTag<int8_t>{});
    case DType::i16: return f(ElemTag<int16_t>{});
    case DType::u8: return f(ElemTag<uint8_t>{});
    case DType::u16: return f(ElemTag<uint16_t>{});
    case DType::u32: return f(ElemTag<uint32_t>{});
    case DType::u64: return f(ElemTag<uint64_t>{});
    case DType::f16: return f(ElemTag<Float16>{});
    case DType::bf16: return f(ElemTag<BFloat16>{});
    case DType::c64: return f(ElemTag<std::complex<float>>{});
    case DType::c128: return f(ElemTag<std::complex<double>>{});
    case DType::bool_: break;
  }
  return f(ElemTag<bool>{});
}

template <class T>
inline constexpr bool kIsHalfFloat = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
template <class T>
inline constexpr bool kIsFloat =
    std::is_same_v<T, float> || std::is_same_v<T, double> || kIsHalfFloat<T>;
template <class T>
inline constexpr bool kIsBool = std::is_same_v<T, bool>;
template <class T>
inline constexpr bool kIsInt = std::is_integral_v<T> && !kIsBool<T>;
template <class T>
inline constexpr bool kIsNumber = kIsFloat<T> || kIsInt<T>;
template <class T>
inline constexpr bool kIsComplex =
    std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>;
// What autodiff differentiates: real floats and complex numbers.
template <class T>
inline constexpr bool kIsInexact = kIsFloat<T> || kIsComplex<T>;

}  // namespace refjit
