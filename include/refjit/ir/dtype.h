// Element types of refjit arrays.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace refjit {

enum class DType : uint8_t {
  f32,
  f64,
  i32,
  i64,
  bool_,
  i8,
  i16,
  u8,
  u16,
  u32,
  u64,
  f16,
  bf16,
  c64,   // complex64: two f32, real part first (std::complex<float>)
  c128,  // complex128: two f64
};

inline constexpr DType kAllDTypes[] = {
    DType::f32, DType::f64, DType::i32, DType::i64, DType::bool_, DType::i8,  DType::i16, DType::u8,
    DType::u16, DType::u32, DType::u64, DType::f16, DType::bf16,  DType::c64, DType::c128};

// Short name used in jaxpr text: "f32", "i32", "u8", "bool".
std::string_view short_name(DType d);
// Long name used in params and error messages: "float32", "int32", "uint8", "bool".
std::string_view long_name(DType d);
// Accepts either spelling ("f32" or "float32"); nullopt if unknown.
std::optional<DType> parse_dtype(std::string_view name);

// The dtype a C++ scalar type gives a Value (as a Python scalar does in JAX): float -> f32,
// double -> f64, bool -> bool, integers of up to 32 bits -> i32, wider ones -> i64.
template <class T>
constexpr DType scalar_dtype() {
  static_assert(std::is_arithmetic_v<T>, "scalar_dtype: not a C++ arithmetic type");
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

constexpr int64_t byte_size(DType d) {
  switch (d) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::bool_: return 1;
    case DType::i8: return 1;
    case DType::i16: return 2;
    case DType::u8: return 1;
    case DType::u16: return 2;
    case DType::u32: return 4;
    case DType::u64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::c64: return 8;
    case DType::c128: return 16;
  }
  return 0;
}
constexpr int bit_width(DType d) {
  return d == DType::bool_ ? 1 : static_cast<int>(byte_size(d) * 8);
}
// The real floats (not complex).
constexpr bool is_float(DType d) {
  return d == DType::f32 || d == DType::f64 || d == DType::f16 || d == DType::bf16;
}
constexpr bool is_complex(DType d) { return d == DType::c64 || d == DType::c128; }
// What autodiff differentiates: the real floats and the complex dtypes.
constexpr bool is_inexact(DType d) { return is_float(d) || is_complex(d); }
// The dtype of a complex dtype's parts (c64 -> f32); a real dtype is its own.
constexpr DType real_dtype(DType d) {
  return d == DType::c64 ? DType::f32 : d == DType::c128 ? DType::f64 : d;
}
// The complex dtype with parts of float dtype d (f32 -> c64, f64 -> c128; 16-bit floats
// -> c64, as JAX's); a complex dtype is its own.
constexpr DType complex_dtype(DType d) {
  return d == DType::f64 || d == DType::c128 ? DType::c128 : DType::c64;
}
// The 16-bit floats, which native code computes in f32 (rounding each result back).
constexpr bool is_half_float(DType d) { return d == DType::f16 || d == DType::bf16; }
constexpr bool is_unsigned(DType d) {
  return d == DType::u8 || d == DType::u16 || d == DType::u32 || d == DType::u64;
}
// Any integer dtype, signed or unsigned (not bool).
constexpr bool is_int(DType d) { return !is_inexact(d) && d != DType::bool_; }
constexpr bool is_signed_int(DType d) { return is_int(d) && !is_unsigned(d); }
constexpr bool is_bool(DType d) { return d == DType::bool_; }

}  // namespace refjit
