// The 16-bit float formats: conversions checked exhaustively against independent references.
#include "refjit/ir/half_float.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "refjit/ir/literal.h"

namespace refjit {
namespace {

// The nearest of two neighbouring 16-bit values to x, ties to the one with an even last bit:
// rounding as the definition states it, with the exact difference computed in double.
template <class H>
uint16_t nearest_of(double x, uint16_t lo_bits, uint16_t hi_bits) {
  double lo = static_cast<float>(H::from_bits(lo_bits));
  double hi = static_cast<float>(H::from_bits(hi_bits));
  double dlo = std::fabs(x - lo), dhi = std::fabs(x - hi);
  if (dlo < dhi) return lo_bits;
  if (dhi < dlo) return hi_bits;
  return (lo_bits & 1u) ? hi_bits : lo_bits;
}

TEST(HalfFloat, EveryFloat16ReadsBackToItself) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    Float16 h = Float16::from_bits(static_cast<uint16_t>(b));
    float f = h;
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(static_cast<float>(Float16(f)))) << b;
      continue;
    }
    EXPECT_EQ(Float16(f).bits, b) << "bits " << b << " = " << f;
  }
}

TEST(HalfFloat, EveryBFloat16ReadsBackToItself) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    BFloat16 h = BFloat16::from_bits(static_cast<uint16_t>(b));
    float f = h;
    EXPECT_EQ(std::bit_cast<uint32_t>(f), b << 16);
    if (!std::isnan(f)) EXPECT_EQ(BFloat16(f).bits, b) << b;
  }
}

TEST(HalfFloat, Float16KnownValues) {
  EXPECT_EQ(Float16(1.0f).bits, 0x3c00u);
  EXPECT_EQ(Float16(-2.0f).bits, 0xc000u);
  EXPECT_EQ(Float16(65504.0f).bits, 0x7bffu);          // the largest finite
  EXPECT_EQ(Float16(65519.0f).bits, 0x7bffu);          // below the halfway point
  EXPECT_EQ(Float16(65520.0f).bits, 0x7c00u);          // ties to even: infinity
  EXPECT_EQ(Float16(std::ldexp(1.0f, -24)).bits, 1u);  // the smallest subnormal
  EXPECT_EQ(Float16(std::ldexp(1.0f, -25)).bits, 0u);  // half of it: ties to even, 0
  EXPECT_EQ(Float16(std::ldexp(3.0f, -26)).bits, 1u);  // 0.75 of it: rounds up
  EXPECT_EQ(Float16(std::ldexp(3.0f, -25)).bits, 2u);  // 1.5 of it: ties to even, 2
  EXPECT_EQ(Float16(-0.0f).bits, 0x8000u);
  EXPECT_EQ(Float16(1e-9f).bits, 0u);
  EXPECT_EQ(Float16(std::numeric_limits<float>::infinity()).bits, 0x7c00u);
  EXPECT_EQ(static_cast<float>(std::numeric_limits<Float16>::max()), 65504.0f);
  EXPECT_EQ(static_cast<float>(std::numeric_limits<Float16>::epsilon()), std::ldexp(1.0f, -10));
  EXPECT_EQ(static_cast<float>(std::numeric_limits<BFloat16>::epsilon()), std::ldexp(1.0f, -7));
}

// Random floats over the whole range, and every float halfway between two 16-bit values
// near a sample of exponents, against the definition of round-to-nearest-even.
TEST(HalfFloat, RoundsToNearestEven) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any_bits;
  for (int k = 0; k < 200000; ++k) {
    float x = std::bit_cast<float>(any_bits(rng));
    if (std::isnan(x)) continue;
    // float16: the neighbours below and above |x| (infinity beyond the largest finite).
    {
      uint16_t t = Float16(x).bits;
      float back = Float16::from_bits(t);
      if (std::isinf(back) && !std::isinf(x)) {
        EXPECT_GE(std::fabs(x), 65520.0f) << x;
      } else if (!std::isinf(x)) {
        uint16_t other = static_cast<uint16_t>(std::fabs(back) < std::fabs(x) ? t + 1 : t - 1);
        if ((t & 0x7fffu) == 0) other = t | 1u;  // zero's neighbour is the smallest subnormal
        uint16_t lo = std::min<uint16_t>(t & 0x7fffu, other & 0x7fffu);
        uint16_t hi = std::max<uint16_t>(t & 0x7fffu, other & 0x7fffu);
        if (hi <= 0x7bffu) EXPECT_EQ(t & 0x7fffu, (nearest_of<Float16>(std::fabs(x), lo, hi))) << x;
      }
    }
    // bfloat16: truncation and the next value up are the two candidates.
    {
      uint16_t lo = static_cast<uint16_t>((std::bit_cast<uint32_t>(x) >> 16) & 0x7fffu);
      uint16_t got = BFloat16(x).bits & 0x7fffu;
      if (lo < 0x7f7fu) EXPECT_EQ(got, (nearest_of<BFloat16>(std::fabs(x), lo, lo + 1))) << x;
    }
  }
}

TEST(HalfFloat, LiteralsRoundAndPrintShortest) {
  EXPECT_EQ(Literal::of(DType::f16, 0.1).f, static_cast<double>(Float16(0.1f)));
  EXPECT_EQ(Literal::of(DType::f16, 0.1).value_text(), "0.1");
  EXPECT_EQ(Literal::of(DType::f16, 1e5).value_text(), "inf");
  EXPECT_EQ(Literal::of(DType::f16, -6712.3).value_text(), "-6712.0");
  EXPECT_EQ(Literal::of(DType::bf16, 8.56).value_text(), "8.56");
  EXPECT_EQ(Literal::of(DType::bf16, 8.56).f, 8.5625);
  EXPECT_EQ(Literal::of(DType::f16, 3e-7).value_text(), "3e-07");
  EXPECT_EQ(Literal::of(DType::f16, 2.0).str(), "2.0:f16[]");
}

}  // namespace
}  // namespace refjit
