#include <cmath>
#include <limits>

#include "eval_test_util.h"

namespace refjit {
namespace {

using namespace refjit::test;

constexpr float kNaNf = std::numeric_limits<float>::quiet_NaN();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

Array unary(Prim p, const Array& x, Params params = {}) { return eval1(p, {x}, params, x.type()); }
Array binary(Prim p, const Array& x, const Array& y, DType out_dtype) {
  const Shape& s = x.rank() == 0 ? y.shape() : x.shape();
  return eval1(p, {x, y}, {}, at(out_dtype, s));
}

TEST(Unary, F32TranscendentalsAreComputedInSinglePrecision) {
  std::vector<float> xs = {0.5f, 1.0f, 2.25f, 3.0f};
  Array x = vec<float>(xs);
  auto check = [&](Prim p, float (*f)(float)) {
    std::vector<float> got = values<float>(unary(p, x));
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(got[i], f(xs[i])) << prim_name(p) << i;
  };
  check(Prim::exp, [](float v) { return std::exp(v); });
  check(Prim::log, [](float v) { return std::log(v); });
  check(Prim::log1p, [](float v) { return std::log1p(v); });
  check(Prim::expm1, [](float v) { return std::expm1(v); });
  check(Prim::sin, [](float v) { return std::sin(v); });
  check(Prim::cos, [](float v) { return std::cos(v); });
  check(Prim::tan, [](float v) { return std::tan(v); });
  check(Prim::tanh, [](float v) { return std::tanh(v); });
  check(Prim::sqrt, [](float v) { return std::sqrt(v); });
  check(Prim::logistic, [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
  check(Prim::rsqrt, [](float v) { return 1.0f / std::sqrt(v); });
}

TEST(Unary, F64TranscendentalsMatchKnownValues) {
  Array x = vec<double>({0.0, 1.0, 4.0});
  EXPECT_EQ(values<double>(unary(Prim::exp, x)),
            (std::vector<double>{1.0, std::exp(1.0), std::exp(4.0)}));
  EXPECT_NEAR(values<double>(unary(Prim::sin, x))[1], 0.8414709848078965, 1e-15);
  EXPECT_EQ(values<double>(unary(Prim::sqrt, x)), (std::vector<double>{0.0, 1.0, 2.0}));
  EXPECT_EQ(values<double>(unary(Prim::logistic, x))[0], 0.5);
  EXPECT_EQ(values<double>(unary(Prim::rsqrt, x))[2], 0.5);
  EXPECT_NEAR(values<double>(unary(Prim::log1p, x))[1], 0.6931471805599453, 1e-15);
}

TEST(Unary, ScaledBesselFunctionsMatchKnownValues) {
  // Values of exp(-|x|) I0(x) and exp(-|x|) I1(x) from JAX 0.10.2 in f64 (XLA's Cephes
  // expansions): across the switch from the power series to the asymptotic expansion at 25.
  Array x = vec<double>({0.0, 0.5, 1.0, -2.0, 10.0, 24.0, 26.0, 100.0});
  const std::vector<double> i0e{1.0,
                                0.6450352704491501,
                                0.46575960759364043,
                                0.308508322553671,
                                0.1278333371634286,
                                0.08186828833403062,
                                0.07862365204001373,
                                0.03994437929909669};
  const std::vector<double> i1e{0.0,
                                0.15642080318487173,
                                0.2079104153497085,
                                -0.2152692892489377,
                                0.12126268138445552,
                                0.08014413927653474,
                                0.07709652456966624,
                                0.039744153025130256};
  const std::vector<double> got0 = values<double>(unary(Prim::bessel_i0e, x));
  const std::vector<double> got1 = values<double>(unary(Prim::bessel_i1e, x));
  for (size_t i = 0; i < i0e.size(); ++i) {
    EXPECT_NEAR(got0[i], i0e[i], 4e-16 * i0e[i]) << i;
    EXPECT_NEAR(got1[i], i1e[i], 4e-16 * std::abs(i1e[i])) << i;
  }
  EXPECT_TRUE(std::isnan(values<double>(unary(Prim::bessel_i0e, vec<double>({NAN})))[0]));
}

TEST(Unary, TranscendentalOfIntIsAnError) {
  EXPECT_THROW(unary(Prim::exp, vec<int32_t>({1})), Error);
  EXPECT_THROW(unary(Prim::floor, vec<int64_t>({1})), Error);
}

TEST(Unary, NegAndAbsWrapAtIntMin) {
  Array x = vec<int32_t>({kI32Min, -3, 0, 7});
  EXPECT_EQ(values<int32_t>(unary(Prim::neg, x)), (std::vector<int32_t>{kI32Min, 3, 0, -7}));
  EXPECT_EQ(values<int32_t>(unary(Prim::abs, x)), (std::vector<int32_t>{kI32Min, 3, 0, 7}));
  EXPECT_EQ(values<int64_t>(unary(Prim::abs, vec<int64_t>({kI64Min, -5}))),
            (std::vector<int64_t>{kI64Min, 5}));
  EXPECT_EQ(values<float>(unary(Prim::neg, vec<float>({1.5f, -0.0f}))),
            (std::vector<float>{-1.5f, 0.0f}));
  EXPECT_EQ(values<double>(unary(Prim::abs, vec<double>({-2.5}))), (std::vector<double>{2.5}));
}

TEST(Unary, SignOfIntsAndFloatsIncludingNaN) {
  EXPECT_EQ(values<int64_t>(unary(Prim::sign, vec<int64_t>({-9, 0, 4}))),
            (std::vector<int64_t>{-1, 0, 1}));
  std::vector<float> s = values<float>(unary(Prim::sign, vec<float>({-2.5f, 0.0f, 3.0f, kNaNf})));
  EXPECT_EQ(s[0], -1.0f);
  EXPECT_EQ(s[1], 0.0f);
  EXPECT_EQ(s[2], 1.0f);
  EXPECT_TRUE(std::isnan(s[3]));
}

TEST(Unary, FloorCeil) {
  Array x = vec<float>({-1.5f, 1.5f, 2.0f});
  EXPECT_EQ(values<float>(unary(Prim::floor, x)), (std::vector<float>{-2.0f, 1.0f, 2.0f}));
  EXPECT_EQ(values<float>(unary(Prim::ceil, x)), (std::vector<float>{-1.0f, 2.0f, 2.0f}));
}

TEST(Unary, RoundHalfAwayFromZeroByDefaultAndHalfToEvenOnRequest) {
  Array x = vec<double>({0.5, 1.5, 2.5, -2.5, -0.5, 2.4});
  EXPECT_EQ(values<double>(unary(Prim::round, x)),
            (std::vector<double>{1.0, 2.0, 3.0, -3.0, -1.0, 2.0}));
  EXPECT_EQ(values<double>(unary(Prim::round, x, {{"rounding_method", int64_t{1}}})),
            (std::vector<double>{0.0, 2.0, 2.0, -2.0, -0.0, 2.0}));
}

TEST(Unary, NotIsLogicalForBoolAndBitwiseForInt) {
  EXPECT_EQ(values<bool>(unary(Prim::not_, vec<bool>({true, false}))),
            (std::vector<bool>{false, true}));
  EXPECT_EQ(values<int32_t>(unary(Prim::not_, vec<int32_t>({0, 5, -1}))),
            (std::vector<int32_t>{-1, -6, 0}));
  EXPECT_THROW(unary(Prim::not_, vec<float>({1.0f})), Error);
}

TEST(Unary, IntegerPowByRepeatedMultiplication) {
  auto ipow = [](const Array& x, int64_t y) { return unary(Prim::integer_pow, x, {{"y", y}}); };
  EXPECT_EQ(values<int32_t>(ipow(vec<int32_t>({2, -3, 0}), 3)), (std::vector<int32_t>{8, -27, 0}));
  EXPECT_EQ(values<int32_t>(ipow(vec<int32_t>({7}), 0)), (std::vector<int32_t>{1}));
  // 2**40 wraps to 0 in int32.
  EXPECT_EQ(values<int32_t>(ipow(vec<int32_t>({2}), 40)), (std::vector<int32_t>{0}));
  EXPECT_EQ(values<float>(ipow(vec<float>({2.0f, 0.5f}), -2)), (std::vector<float>{0.25f, 4.0f}));
  EXPECT_EQ(values<double>(ipow(vec<double>({1.5}), 5)), (std::vector<double>{7.59375}));
  EXPECT_THROW(ipow(vec<int32_t>({2}), -1), Error);
}

TEST(Unary, StopGradientAndCopyAreIdentityForEveryDtype) {
  EXPECT_EQ(unary(Prim::copy, vec<bool>({true, false})), vec<bool>({true, false}));
  EXPECT_EQ(unary(Prim::stop_gradient, vec<int64_t>({4, -4})), vec<int64_t>({4, -4}));
  EXPECT_EQ(unary(Prim::copy, vec<double>({1.25})), vec<double>({1.25}));
}

Array convert(const Array& x, DType to) {
  return eval1(Prim::convert_element_type, {x}, {{"new_dtype", to}, {"weak_type", false}},
               at(to, x.shape()));
}

TEST(Convert, FloatToIntTruncatesSaturatesAndMapsNaNToZero) {
  Array x = vec<float>({-2.7f, 2.7f, kNaNf, 1e10f, -1e10f, std::numeric_limits<float>::infinity()});
  EXPECT_EQ(values<int32_t>(convert(x, DType::i32)),
            (std::vector<int32_t>{-2, 2, 0, kI32Max, kI32Min, kI32Max}));
  EXPECT_EQ(values<int64_t>(convert(vec<double>({1e30, -1e30, -0.5}), DType::i64)),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max(), kI64Min, 0}));
}

TEST(Convert, IntNarrowingWrapsAndBoolIsNonZero) {
  EXPECT_EQ(values<int32_t>(convert(vec<int64_t>({(int64_t{1} << 32) + 5, -1}), DType::i32)),
            (std::vector<int32_t>{5, -1}));
  EXPECT_EQ(values<bool>(convert(vec<double>({0.0, -0.5, kNaNf}), DType::bool_)),
            (std::vector<bool>{false, true, true}));
  EXPECT_EQ(values<float>(convert(vec<bool>({true, false}), DType::f32)),
            (std::vector<float>{1.0f, 0.0f}));
  EXPECT_EQ(values<double>(convert(vec<int32_t>({-7}), DType::f64)), (std::vector<double>{-7.0}));
  // i64 -> f32 rounds once (2^53+1 is not representable; nearest float is 2^53).
  EXPECT_EQ(values<float>(convert(vec<int64_t>({(int64_t{1} << 53) + 1}), DType::f32)),
            (std::vector<float>{9007199254740992.0f}));
}

TEST(Binary, IntArithmeticWraps) {
  Array x = vec<int32_t>({kI32Max, kI32Min, 6});
  Array y = vec<int32_t>({1, 1, 7});
  EXPECT_EQ(values<int32_t>(binary(Prim::add, x, y, DType::i32)),
            (std::vector<int32_t>{kI32Min, kI32Min + 1, 13}));
  EXPECT_EQ(values<int32_t>(binary(Prim::sub, x, y, DType::i32)),
            (std::vector<int32_t>{kI32Max - 1, kI32Max, -1}));
  EXPECT_EQ(values<int32_t>(binary(Prim::mul, x, y, DType::i32)),
            (std::vector<int32_t>{kI32Max, kI32Min, 42}));
  EXPECT_EQ(
      values<int64_t>(binary(Prim::add_any, vec<int64_t>({2}), vec<int64_t>({3}), DType::i64)),
      (std::vector<int64_t>{5}));
}

TEST(Binary, ScalarOperandBroadcastsOnEitherSide) {
  Array x = vec<float>({1.0f, 2.0f, 3.0f});
  Array s = Array::scalar<float>(10.0f);
  EXPECT_EQ(values<float>(binary(Prim::sub, x, s, DType::f32)),
            (std::vector<float>{-9.0f, -8.0f, -7.0f}));
  EXPECT_EQ(values<float>(binary(Prim::sub, s, x, DType::f32)),
            (std::vector<float>{9.0f, 8.0f, 7.0f}));
  EXPECT_EQ(values<bool>(binary(Prim::lt, s, x, DType::bool_)),
            (std::vector<bool>{false, false, false}));
}

TEST(Binary, MismatchedShapesOrDtypesAreErrors) {
  EXPECT_THROW(binary(Prim::add, vec<float>({1, 2}), vec<float>({1, 2, 3}), DType::f32), Error);
  EXPECT_THROW(binary(Prim::add, vec<float>({1}), vec<double>({1}), DType::f32), Error);
  EXPECT_THROW(binary(Prim::pow, vec<int32_t>({1}), vec<int32_t>({1}), DType::i32), Error);
}

TEST(Binary, IntDivisionFollowsXla) {
  Array x = vec<int32_t>({-7, 7, 5, kI32Min, kI32Min});
  Array y = vec<int32_t>({2, -2, 0, -1, 0});
  EXPECT_EQ(values<int32_t>(binary(Prim::div, x, y, DType::i32)),
            (std::vector<int32_t>{-3, -3, -1, kI32Min, -1}));
  EXPECT_EQ(
      values<int64_t>(binary(Prim::div, vec<int64_t>({kI64Min}), vec<int64_t>({-1}), DType::i64)),
      (std::vector<int64_t>{kI64Min}));
  std::vector<float> f = values<float>(
      binary(Prim::div, vec<float>({1.0f, 1.0f}), vec<float>({4.0f, 0.0f}), DType::f32));
  EXPECT_EQ(f[0], 0.25f);
  EXPECT_TRUE(std::isinf(f[1]));
}

TEST(Binary, MaxMinPropagateNaN) {
  Array x = vec<float>({1.0f, kNaNf, 3.0f});
  Array y = vec<float>({2.0f, 0.0f, kNaNf});
  std::vector<float> mx = values<float>(binary(Prim::max, x, y, DType::f32));
  std::vector<float> mn = values<float>(binary(Prim::min, x, y, DType::f32));
  EXPECT_EQ(mx[0], 2.0f);
  EXPECT_EQ(mn[0], 1.0f);
  EXPECT_TRUE(std::isnan(mx[1]) && std::isnan(mx[2]) && std::isnan(mn[1]) && std::isnan(mn[2]));
  EXPECT_EQ(
      values<int64_t>(binary(Prim::max, vec<int64_t>({-1, 5}), vec<int64_t>({3, 2}), DType::i64)),
      (std::vector<int64_t>{3, 5}));
}

TEST(Binary, PowOfFloats) {
  EXPECT_EQ(values<double>(
                binary(Prim::pow, vec<double>({2.0, 9.0}), vec<double>({10.0, 0.5}), DType::f64)),
            (std::vector<double>{1024.0, 3.0}));
  EXPECT_EQ(values<float>(binary(Prim::pow, vec<float>({1.7f}), vec<float>({2.3f}), DType::f32))[0],
            std::pow(1.7f, 2.3f));
}

TEST(Binary, ComparisonsGiveBoolForEveryDtype) {
  Array x = vec<int32_t>({1, 2, 3});
  Array y = vec<int32_t>({2, 2, 2});
  EXPECT_EQ(values<bool>(binary(Prim::eq, x, y, DType::bool_)), (std::vector<bool>{0, 1, 0}));
  EXPECT_EQ(values<bool>(binary(Prim::ne, x, y, DType::bool_)), (std::vector<bool>{1, 0, 1}));
  EXPECT_EQ(values<bool>(binary(Prim::lt, x, y, DType::bool_)), (std::vector<bool>{1, 0, 0}));
  EXPECT_EQ(values<bool>(binary(Prim::le, x, y, DType::bool_)), (std::vector<bool>{1, 1, 0}));
  EXPECT_EQ(values<bool>(binary(Prim::gt, x, y, DType::bool_)), (std::vector<bool>{0, 0, 1}));
  EXPECT_EQ(values<bool>(binary(Prim::ge, x, y, DType::bool_)), (std::vector<bool>{0, 1, 1}));
  Array f = vec<double>({kNaNf, 1.0});
  EXPECT_EQ(values<bool>(binary(Prim::eq, f, f, DType::bool_)), (std::vector<bool>{0, 1}));
  EXPECT_EQ(values<bool>(binary(Prim::ne, f, f, DType::bool_)), (std::vector<bool>{1, 0}));
  EXPECT_EQ(values<bool>(binary(Prim::gt, vec<bool>({true, false}), vec<bool>({false, false}),
                                DType::bool_)),
            (std::vector<bool>{1, 0}));
}

TEST(Binary, AndOrAreLogicalForBoolAndBitwiseForInt) {
  Array a = vec<bool>({true, true, false, false});
  Array b = vec<bool>({true, false, true, false});
  EXPECT_EQ(values<bool>(binary(Prim::and_, a, b, DType::bool_)), (std::vector<bool>{1, 0, 0, 0}));
  EXPECT_EQ(values<bool>(binary(Prim::or_, a, b, DType::bool_)), (std::vector<bool>{1, 1, 1, 0}));
  EXPECT_EQ(values<int32_t>(binary(Prim::and_, vec<int32_t>({12}), vec<int32_t>({10}), DType::i32)),
            (std::vector<int32_t>{8}));
  EXPECT_EQ(values<int64_t>(binary(Prim::or_, vec<int64_t>({12}), vec<int64_t>({10}), DType::i64)),
            (std::vector<int64_t>{14}));
}

TEST(SelectN, BoolPredicatePicksFalseThenTrueCase) {
  Array p = vec<bool>({true, false, true});
  Array f = vec<float>({1, 2, 3}), t = vec<float>({10, 20, 30});
  EXPECT_EQ(eval1(Prim::select_n, {p, f, t}, {}, f.type()), vec<float>({10, 2, 30}));
  EXPECT_EQ(eval1(Prim::select_n, {Array::scalar<bool>(false), f, t}, {}, f.type()), f);
}

TEST(SelectN, Int32PredicateClampsIntoRange) {
  Array p = vec<int32_t>({-4, 0, 1, 2, 9});
  Array c0 = vec<int64_t>({0, 0, 0, 0, 0}), c1 = vec<int64_t>({1, 1, 1, 1, 1}),
        c2 = vec<int64_t>({2, 2, 2, 2, 2});
  EXPECT_EQ(eval1(Prim::select_n, {p, c0, c1, c2}, {}, c0.type()), vec<int64_t>({0, 0, 1, 2, 2}));
}

}  // namespace
}  // namespace refjit
