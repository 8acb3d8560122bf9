// JVP (finite differences) and transpose identity for the elementwise primitives.
#include <gtest/gtest.h>

#include "test/passes/ad_check.h"

namespace refjit {
namespace {

using namespace refjit::testing;

AdCase Case(const std::string& text, double lo = -1.0, double hi = 1.0) {
  AdCase c{parse(text)};
  c.lo = lo;
  c.hi = hi;
  return c;
}

std::string Unary(const std::string& prim) {
  return "{ lambda ; a:f64[3]. let b:f64[3] = " + prim + " a in (b,) }";
}

TEST(ElementwiseAd, UnaryMathMatchesFiniteDifferences) {
  for (const char* p :
       {"neg", "exp", "expm1", "sin", "cos", "tan", "tanh", "logistic", "abs", "copy",
        "integer_pow[y=3]", "integer_pow[y=1]", "bessel_i0e", "bessel_i1e"}) {
    SCOPED_TRACE(p);
    check_ad(Case(Unary(p)));
  }
  for (const char* p : {"log", "log1p", "sqrt", "rsqrt", "integer_pow[y=-2]"}) {
    SCOPED_TRACE(p);
    check_ad(Case(Unary(p), 0.5, 2.0));
  }
}

TEST(ElementwiseAd, PiecewiseConstantOpsHaveZeroTangent) {
  for (const char* p : {"sign", "floor", "ceil", "round"}) {
    SCOPED_TRACE(p);
    check_ad(Case(std::string("{ lambda ; a:f64[3]. let b:f64[3] = ") + p +
                      " a; c:f64[3] = mul b a in (c,) }",
                  1.1, 1.4));
  }
}

TEST(ElementwiseAd, BinaryOpsMatchFiniteDifferences) {
  for (const char* p : {"add", "add_any", "sub", "mul", "div", "max", "min"}) {
    SCOPED_TRACE(p);
    check_ad(
        Case(std::string("{ lambda ; a:f64[4] b:f64[4]. let c:f64[4] = ") + p + " a b in (c,) }",
             0.5, 2.0));
  }
  check_ad(Case("{ lambda ; a:f64[4] b:f64[4]. let c:f64[4] = pow a b in (c,) }", 0.5, 2.0));
}

TEST(ElementwiseAd, ScalarOperandsBroadcastAndTransposeBySumming) {
  for (const char* p : {"add", "sub", "mul", "div", "max", "pow"}) {
    SCOPED_TRACE(p);
    check_ad(Case(std::string("{ lambda ; a:f64[4] b:f64[]. let c:f64[4] = ") + p +
                      " a b; d:f64[4] = " + p + " b a in (c, d) }",
                  0.5, 2.0));
  }
}

TEST(ElementwiseAd, SelectNDifferentiatesTheChosenCase) {
  check_ad(Case(R"({ lambda ; a:f64[5] b:f64[5]. let
    p:bool[5] = lt a b
    c:f64[5] = select_n p a b
    q:i32[5] = convert_element_type[new_dtype=int32 weak_type=False] p
    d:f64[5] = select_n q b a
  in (c, d) })"));
}

TEST(ElementwiseAd, ConvertToIntIsZeroAndFloatToFloatIsLinear) {
  check_ad(Case(R"({ lambda ; a:f64[3]. let
    b:i32[3] = convert_element_type[new_dtype=int32 weak_type=False] a
    c:f64[3] = convert_element_type[new_dtype=float64 weak_type=False] b
    d:f64[3] = mul c a
  in (d,) })",
                1.2, 1.8));
  AdCase c = Case(R"({ lambda ; a:f32[3]. let
    b:f64[3] = convert_element_type[new_dtype=float64 weak_type=False] a
    c:f64[3] = mul b b
  in (c,) })");
  c.fd_tol = 1e-4;  // the input is f32
  c.fd_step = 1e-2;
  c.ident_tol = 1e-6;
  check_ad(c);
}

TEST(ElementwiseAd, StopGradientBlocksTheTangent) {
  Jaxpr f = parse(R"({ lambda ; a:f64[]. let
    b:f64[] = stop_gradient a
    c:f64[] = mul b a
  in (c,) })");
  Jaxpr j = jvp_jaxpr(f, {true});
  auto out = run(j, {f64(3.0), f64(1.0)});
  EXPECT_EQ(arr(out[0]).as_double(0), 9.0);
  EXPECT_EQ(arr(out[1]).as_double(0), 3.0);  // d/dx (sg(x) * x) = sg(x)
}

TEST(ElementwiseAd, ComparisonsHaveNoTangentAndCostNothing) {
  Jaxpr f = parse("{ lambda ; a:f64[3] b:f64[3]. let c:bool[3] = lt a b in (c,) }");
  Jaxpr j = jvp_jaxpr(f, {true, true});
  // The bool output's tangent is instantiated as zeros at the boundary only.
  ASSERT_EQ(j.outvars.size(), 2u);
  EXPECT_EQ(j.eqns.size(), 2u) << print_jaxpr(j);
}

TEST(ElementwiseAd, UntouchedTangentCostsNothing) {
  Jaxpr f =
      parse("{ lambda ; a:f64[3] b:f64[3]. let c:f64[3] = sin a; d:f64[3] = cos b in (c, d) }");
  Jaxpr j = jvp_jaxpr(f, {true, false});
  // sin a, cos b, the tangent of sin (cos a, mul); d's tangent is one zeros broadcast.
  const std::string text = print_jaxpr(j);
  EXPECT_EQ(count_prim(text, "sin"), 1) << text;
  EXPECT_EQ(count_prim(text, "cos"), 2) << text;
  EXPECT_EQ(count_prim(text, "mul"), 1) << text;
  EXPECT_EQ(j.eqns.size(), 5u) << text;
}

}  // namespace
}  // namespace refjit

namespace refjit {
namespace {

using namespace refjit::testing;

std::string ComplexUnary(const std::string& prim) {
  return "{ lambda ; a:c128[3]. let b:c128[3] = " + prim + " a in (b,) }";
}

// Complex JVPs are the real directional derivatives (finite differences along a complex
// tangent); transposes are JAX's, unconjugated (the identity's pairing is sum(a b)).
TEST(ElementwiseAd, ComplexMathMatchesFiniteDifferencesAndTransposes) {
  for (const char* p : {"neg",
                        "exp",
                        "expm1",
                        "log1p",
                        "sin",
                        "cos",
                        "tan",
                        "tanh",
                        "logistic",
                        "sinh",
                        "cosh",
                        "asin",
                        "acos",
                        "atan",
                        "asinh",
                        "acosh",
                        "atanh",
                        "exp2",
                        "copy",
                        "integer_pow[y=3]",
                        "integer_pow[y=-2]",
                        "log",
                        "sqrt",
                        "rsqrt"}) {
    SCOPED_TRACE(p);
    AdCase c{parse(ComplexUnary(p))};
    c.lo = 0.3;
    c.hi = 1.4;
    c.fd_tol = 1e-5;
    check_ad(c);
  }
  for (const char* p : {"add", "sub", "mul", "div", "pow"}) {
    SCOPED_TRACE(p);
    AdCase c{parse(std::string("{ lambda ; a:c128[4] b:c128[4]. let c:c128[4] = ") + p +
                   " a b in (c,) }")};
    c.lo = 0.4;
    c.hi = 1.6;
    c.fd_tol = 1e-5;
    check_ad(c);
  }
}

TEST(ElementwiseAd, ComplexPartsMagnitudeConjugateAndConversions) {
  AdCase c{parse(R"({ lambda ; a:c128[4] b:f64[4]. let
    c:f64[4] = real a
    d:f64[4] = imag a
    e:f64[4] = abs a
    f:c128[4] = conj[input_dtype=complex128] a
    g:c128[4] = conj[input_dtype=float64] b
    h:c128[4] = complex b d
    i:c128[4] = convert_element_type[new_dtype=complex128 weak_type=False] b
    j:f64[4] = convert_element_type[new_dtype=float64 weak_type=False] a
    k:c128[] = reduce_sum[axes=(0,)] h
    l:c128[4] = mul f h
  in (c, d, e, f, g, h, i, j, k, l) })")};
  c.lo = 0.2;
  c.hi = 1.3;
  c.fd_tol = 1e-5;
  check_ad(c);
}

TEST(ElementwiseAd, AbsOfARealZeroHasJaxsSlopeOne) {
  // JAX: select(x >= 0, t, -t), so the derivative at 0 is 1 (not sign(0) = 0).
  Jaxpr j = jvp_jaxpr(parse("{ lambda ; a:f64[3]. let b:f64[3] = abs a in (b,) }"), {true});
  std::vector<RtValue> out = run(j, {f64s({-2.0, 0.0, 3.0}, {3}), f64s({1.0, 1.0, 1.0}, {3})});
  EXPECT_EQ(values(arr(out[1])), (std::vector<double>{-1.0, 1.0, 1.0}));
}

}  // namespace
}  // namespace refjit
