// The seed's numeric examples (autodiff-with-refs.txt) at the jaxpr level.
#include <gtest/gtest.h>

#include <cmath>

#include "passes/ad/linearize.h"
#include "passes/ad/transpose.h"
#include "passes/ad/vjp.h"
#include "passes/simplify/dce.h"
#include "refjit/ir/text.h"
#include "test/passes/ad_test_util.h"

namespace refjit {
namespace {

using namespace refjit::testing;

TEST(SeedExamples, Pure2GradientIsTwo) {
  // pure2(x): ref = new_ref(x); ref[...] = ref[...] + ref[...]; return ref[...]
  Jaxpr f = parse(R"({ lambda ; a:f32[]. let
    b:Ref{f32[]} = new_ref a
    c:f32[] <- b[...]
    d:f32[] <- b[...]
    e:f32[] = add c d
    b[...] <- e
    g:f32[] <- b[...]
  in (g,) })");
  Jaxpr g = grad_jaxpr(f, {0});
  verify(g);
  auto out = run(g, {f32(3.0f)});
  EXPECT_EQ(arr(out[0]).as_double(0), 6.0);
  EXPECT_EQ(arr(out[1]).as_double(0), 2.0);
}

// f(x_ref) = x_ref[...] ** 2, differentiated w.r.t. the ref: runs the forward once, then
// the backward into a gradient ref pre-filled with `prefill`.
double SquareRefGradient(float prefill) {
  Jaxpr f = parse(R"({ lambda ; a:Ref{f32[]}. let
    b:f32[] <- a[...]
    c:f32[] = integer_pow[y=2] b
  in (c,) })");
  VjpJaxprs v = vjp_jaxpr(f, {true}, {AccumKind::ref});
  verify(v.forward);
  verify(v.backward);
  RefBufferPtr x = ref_of(f32(2.0f));
  auto fwd = run(v.forward, {x});
  EXPECT_EQ(arr(fwd[0]).as_double(0), 4.0);
  RefBufferPtr g = ref_of(f32(prefill));
  std::vector<RtValue> bwd_args(fwd.begin() + 1, fwd.end());
  bwd_args.push_back(g);
  bwd_args.push_back(f32(1.0f));
  EXPECT_TRUE(run(v.backward, bwd_args).empty());
  return g->value().as_double(0);
}

TEST(SeedExamples, RefArgumentGradientAccumulatesIntoBoundRef) {
  EXPECT_EQ(SquareRefGradient(0.0f), 4.0);
  EXPECT_EQ(SquareRefGradient(100.0f), 104.0);
}

// g(x_ref): x_ref[...] = sin(x_ref[...]); return x_ref[...] ** 2  (REFS.md 2.5).
Jaxpr SinThenSquare() {
  return parse(R"({ lambda ; a:Ref{f32[]}. let
    b:f32[] <- a[...]
    c:f32[] = sin b
    a[...] <- c
    d:f32[] <- a[...]
    e:f32[] = integer_pow[y=2] d
  in (e,) })");
}

TEST(SeedExamples, GradientThroughMutatedRefIsWithRespectToInitialValue) {
  VjpJaxprs v = vjp_jaxpr(SinThenSquare(), {true}, {AccumKind::ref});
  RefBufferPtr x = ref_of(f32(2.0f));
  auto fwd = run(v.forward, {x});
  EXPECT_FLOAT_EQ(static_cast<float>(x->value().as_double(0)), std::sin(2.0f));
  for (float prefill : {0.0f, 3.0f}) {
    RefBufferPtr g = ref_of(f32(prefill));
    std::vector<RtValue> args(fwd.begin() + 1, fwd.end());
    args.push_back(g);
    args.push_back(f32(1.0f));
    run(v.backward, args);
    // The pre-filled P acts as +P * (final value): cos2 * (P + 2 sin2).
    double expect = std::cos(2.0) * (prefill + 2 * std::sin(2.0));
    EXPECT_NEAR(g->value().as_double(0), expect, 1e-6);
    if (prefill == 0.0f) EXPECT_NEAR(g->value().as_double(0), -0.7568025, 1e-6);
  }
  // The forward mutated x once; the backward never touches it.
  EXPECT_FLOAT_EQ(static_cast<float>(x->value().as_double(0)), std::sin(2.0f));
}

// take(x, i) = x[i] as JAX traces it (negative index wrap, dynamic_slice, squeeze).
Jaxpr Take() {
  return parse(R"({ lambda ; a:f32[10] d:i32[]. let
    e:bool[] = lt d 0:i32[]
    g:i32[] = add d 10:i32[]
    c:i32[] = select_n e d g
    h:f32[1] = dynamic_slice[slice_sizes=(1,)] a c
    i:f32[] = squeeze[dimensions=(0,)] h
  in (i,) })");
}

TEST(SeedExamples, SparseTakeAccumulationIntoOneGradientRef) {
  VjpJaxprs v = vjp_jaxpr(Take(), {true, false}, {AccumKind::ref});
  std::vector<double> xs;
  for (int k = 0; k < 10; ++k) xs.push_back(k);
  Array x = Array::from_vector<float>(std::vector<float>(xs.begin(), xs.end()), {10});
  RefBufferPtr g = ref_of(Array(ArrayType{DType::f32, {10}}));
  for (int i : {3, 5, 3}) {
    auto fwd = run(v.forward, {x, i32(i)});
    EXPECT_EQ(arr(fwd[0]).as_double(0), i);
    std::vector<RtValue> args(fwd.begin() + 1, fwd.end());
    args.push_back(g);
    args.push_back(f32(1.0f));
    run(v.backward, args);
  }
  EXPECT_EQ(values(g->value()), (std::vector<double>{0, 0, 0, 2, 0, 1, 0, 0, 0, 0}));
}

TEST(SeedExamples, TakeTransposeWithRefAccumulatorIsOneSparseAddupdate) {
  VjpJaxprs v = vjp_jaxpr(Take(), {true, false}, {AccumKind::ref});
  std::string text = print_jaxpr(v.backward);
  EXPECT_NE(text.find("+="), std::string::npos) << text;
  EXPECT_EQ(text.find("f32[10] ="), std::string::npos) << "no dense f32[10] value: " << text;
  EXPECT_EQ(count_prim(text, "dynamic_update_slice"), 0) << text;
  EXPECT_EQ(count_prim(text, "new_ref"), 0) << text;
  // Residual: only the clamped index (the read slice is not needed: take is linear).
  EXPECT_EQ(v.num_residuals, 1);
  EXPECT_EQ(v.backward.type_of(v.backward.invars[0]).str(), "i32[]");
}

TEST(SeedExamples, TakeWithValueAccumulatorGivesOneHot) {
  VjpJaxprs v = vjp_jaxpr(Take(), {true, false}, {AccumKind::value});
  Array x(ArrayType{DType::f32, {10}});
  auto fwd = run(v.forward, {x, i32(-7)});
  std::vector<RtValue> args(fwd.begin() + 1, fwd.end());
  args.push_back(f32(1.0f));
  auto out = run(v.backward, args);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(values(arr(out[0])), (std::vector<double>{0, 0, 0, 1, 0, 0, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace refjit
