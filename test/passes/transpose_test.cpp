// transpose_jaxpr on hand-written linear jaxprs: every linear rule, including those the JVP
// never emits (sub, div by a residual, convert, select_n, ...), checked by the identity
// <ct, L t> = <L^T ct, t>, and the accumulator kinds' interface.
#include "passes/ad/transpose.h"

#include <gtest/gtest.h>

#include "test/passes/ad_check.h"

namespace refjit {
namespace {

using namespace refjit::testing;

// `lin` has `nn` residual inputs (random, or `fixed`), then linear inputs (all value kind).
void check_identity(const std::string& text, size_t nn, std::map<size_t, Array> fixed = {},
                    double tol = 1e-10) {
  Jaxpr lin = parse(text);
  std::mt19937 rng(7);
  std::vector<RtValue> res;
  for (size_t i = 0; i < nn; ++i)
    res.push_back(fixed.count(i) ? fixed.at(i)
                                 : random_array(rng, lin.type_of(lin.invars[i]).array, 0.5, 2));
  std::vector<Array> ts;
  std::vector<RtValue> args = res;
  for (size_t i = nn; i < lin.invars.size(); ++i) {
    ts.push_back(random_array(rng, lin.type_of(lin.invars[i]).array));
    args.push_back(ts.back());
  }
  std::vector<RtValue> ys = run(lin, args);
  std::vector<RtValue> bargs = res;
  double lhs = 0;
  for (auto& y : ys) {
    Array ct = random_array(rng, arr(y).type());
    lhs += dot(ct, arr(y));
    bargs.push_back(ct);
  }
  Jaxpr bwd = transpose_jaxpr(lin, static_cast<int>(nn),
                              std::vector<AccumKind>(ts.size(), AccumKind::value));
  verify(bwd);
  std::vector<RtValue> gs = run(bwd, bargs);
  ASSERT_EQ(gs.size(), ts.size());
  double rhs = 0;
  for (size_t k = 0; k < ts.size(); ++k) rhs += dot(arr(gs[k]), ts[k]);
  EXPECT_NEAR(lhs, rhs, tol * (1 + std::abs(lhs))) << text;
}

TEST(Transpose, ElementwiseLinearRules) {
  check_identity(R"({ lambda ; r:f64[3] s:f64[] t:f64[3] u:f64[3] v:f64[3]. let
    a:f64[3] = sub t u
    b:f64[3] = neg a
    c:f64[3] = mul b r
    d:f64[3] = div c r
    e:f64[3] = mul s c
    f:f64[3] = sub e v
    g:f64[3] = add f u
    h:f64[3] = copy g
  in (h, d) })",
                 2);
}

TEST(Transpose, ScalarLinearOperandIsSummed) {
  check_identity(R"({ lambda ; r:f64[3] t:f64[] u:f64[3]. let
    a:f64[3] = mul r t
    b:f64[3] = sub u t
    c:f64[3] = add a b
  in (c,) })",
                 1);
}

TEST(Transpose, ConvertAndSelect) {
  check_identity(R"({ lambda ; p:bool[4] t:f32[4] u:f64[4]. let
    a:f64[4] = convert_element_type[new_dtype=float64 weak_type=False] t
    b:f64[4] = select_n p a u
    z:f64[4] = broadcast_in_dim[broadcast_dimensions=() shape=(4,) sharding=None] 0.0:f64[]
    c:f64[4] = select_n p u z
  in (b, c) })",
                 1, {{0, Array::from_vector<bool>({true, false, false, true}, {4})}}, 1e-6);
}

TEST(Transpose, DynamicUpdateSliceSplitsTheCotangent) {
  check_identity(R"({ lambda ; i:i32[] t:f64[5] u:f64[2]. let
    a:f64[5] = dynamic_update_slice t u i
  in (a,) })",
                 1, {{0, i32(2)}});
}

TEST(Transpose, DontWantInputsGetNoOutputAndNoWork) {
  Jaxpr lin = parse(R"({ lambda ; r:f64[3] t:f64[3] u:f64[3]. let
    a:f64[3] = mul t r
    b:f64[3] = sin r
    c:f64[3] = mul u b
    d:f64[3] = add a c
  in (d,) })");
  Jaxpr bwd = transpose_jaxpr(lin, 1, {AccumKind::value, AccumKind::dont_want});
  ASSERT_EQ(bwd.outvars.size(), 1u);
  EXPECT_EQ(count_prim(print_jaxpr(bwd), "sin"), 0) << print_jaxpr(bwd);
  EXPECT_EQ(count_prim(print_jaxpr(bwd), "mul"), 1) << print_jaxpr(bwd);
}

TEST(Transpose, RefAccumulatorInputsComeBeforeCotangents) {
  Jaxpr lin = parse(R"({ lambda ; r:f64[] t:f64[] u:f64[]. let
    a:f64[] = mul t r
    b:f64[] = add a u
  in (b,) })");
  Jaxpr bwd = transpose_jaxpr(lin, 1, {AccumKind::ref, AccumKind::value});
  ASSERT_EQ(bwd.invars.size(), 3u);
  EXPECT_EQ(bwd.type_of(bwd.invars[1]).str(), "Ref{f64[]}");
  RefBufferPtr g = ref_of(f64(100.0));
  auto out = run(bwd, {f64(3.0), g, f64(2.0)});
  EXPECT_EQ(g->value().as_double(0), 106.0);  // 100 + 3 * 2, accumulated, not set
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(arr(out[0]).as_double(0), 2.0);
}

TEST(Transpose, ZeroCotangentIsInstantiatedForValueInputs) {
  Jaxpr lin = parse("{ lambda ; t:f64[2] u:f64[2]. let in (t,) }");
  Jaxpr bwd = transpose_jaxpr(lin, 0, {AccumKind::value, AccumKind::value});
  auto out = run(bwd, {f64s({1, 2}, {2})});
  EXPECT_EQ(values(arr(out[0])), (std::vector<double>{1, 2}));
  EXPECT_EQ(values(arr(out[1])), (std::vector<double>{0, 0}));
}

TEST(Transpose, WrongNumberOfKindsIsAnError) {
  Jaxpr lin = parse("{ lambda ; t:f64[2]. let in (t,) }");
  EXPECT_THROW(transpose_jaxpr(lin, 0, {}), Error);
}

}  // namespace
}  // namespace refjit
