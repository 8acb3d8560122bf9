// The 16-bit float formats JAX prints as f16 (IEEE binary16) and bf16 (bfloat16), as element
// types of refjit arrays. They store 16 bits; arithmetic converts to float and the result
// rounds back (to nearest, ties to even) when it is stored, so each operation rounds once to
// the 16-bit format, as XLA's CPU backend computes them.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace refjit {

// The bit conversions (round to nearest, ties to even) and the storage type of the two formats.

constexpr uint16_t float_to_f16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // infinity, or NaN (kept quiet)
    return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: infinity
  if (abs < 0x38800000u) {
    // Below 2^-14, the smallest normal binary16: a multiple of 2^-24. Scaling by 2^24 is exact,
    // so one rounding to an integer (ties to even) gives the subnormal's bits.
    float scaled = std::bit_cast<float>(abs) * 16777216.0f;
    auto whole = static_cast<uint32_t>(scaled);
    float rest = scaled - static_cast<float>(whole);
    if (rest > 0.5f || (rest == 0.5f && (whole & 1u))) ++whole;
    return static_cast<uint16_t>(sign | whole);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits.
  const uint32_t rebased = abs - (112u << 23);
  const uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

constexpr float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    float v = static_cast<float>(mantissa) / 16777216.0f;
    return sign ? -v : v;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

constexpr uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

constexpr float bf16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

// One 16-bit float type per format, given its two conversions.
template <uint16_t (*ToBits)(float), float (*FromBits)(uint16_t)>
struct HalfFloat {
  uint16_t bits = 0;

  constexpr HalfFloat() = default;
  constexpr HalfFloat(float f) : bits(ToBits(f)) {}  // NOLINT: converts like a float does
  constexpr HalfFloat(double d) : HalfFloat(static_cast<float>(d)) {}  // NOLINT
  template <class I>
  requires std::is_integral_v<I>
  constexpr HalfFloat(I i) : HalfFloat(static_cast<float>(i)) {}  // NOLINT
  constexpr operator float() const { return FromBits(bits); }     // NOLINT

  static constexpr HalfFloat from_bits(uint16_t b) {
    HalfFloat h;
    h.bits = b;
    return h;
  }

  constexpr HalfFloat& operator+=(float o) { return *this = HalfFloat(float(*this) + o); }
  constexpr HalfFloat& operator-=(float o) { return *this = HalfFloat(float(*this) - o); }
  constexpr HalfFloat& operator*=(float o) { return *this = HalfFloat(float(*this) * o); }
  constexpr HalfFloat& operator/=(float o) { return *this = HalfFloat(float(*this) / o); }
};

using Float16 = HalfFloat<float_to_f16_bits, f16_bits_to_float>;
using BFloat16 = HalfFloat<float_to_bf16_bits, bf16_bits_to_float>;

}  // namespace refjit

// numeric_limits for the two formats, so generic code (a max-reduction's -inf, epsilon in a
// message) reads them as it reads float's.
namespace std {
template <uint16_t (*T)(float), float (*F)(uint16_t)>
class numeric_limits<refjit::HalfFloat<T, F>> {
  using H = refjit::HalfFloat<T, F>;
  static constexpr bool is_f16 = T == refjit::float_to_f16_bits;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = is_f16 ? 11 : 8;
  static constexpr H infinity() { return H::from_bits(is_f16 ? 0x7c00u : 0x7f80u); }
  static constexpr H quiet_NaN() { return H::from_bits(is_f16 ? 0x7e00u : 0x7fc0u); }
  static constexpr H max() { return H::from_bits(is_f16 ? 0x7bffu : 0x7f7fu); }
  static constexpr H lowest() { return H::from_bits(is_f16 ? 0xfbffu : 0xff7fu); }
  static constexpr H min() { return H::from_bits(is_f16 ? 0x0400u : 0x0080u); }
  static constexpr H epsilon() { return H::from_bits(is_f16 ? 0x1400u : 0x3c00u); }
};
}  // namespace std
