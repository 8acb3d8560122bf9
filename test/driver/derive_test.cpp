// Differentiable (driver/derive.h): the one place every door takes a derivative. Told the
// ranges of the constants, a gather whose run they prove to lie inside its axis is
// differentiated as the window it is; told nothing, the program is differentiated as given.
// Either way every transformation agrees with the one taken on the program as written.
#include "driver/derive.h"

#include <gtest/gtest.h>

#include "backend/test_util.h"
#include "passes/ad/jvp.h"
#include "refjit/ir/text.h"
#include "runtime/interpreter.h"

namespace refjit {
namespace {

using testing::as_array;
using testing::at;
using testing::random_array;

// sum(x[:, c:c+3]^2) with the columns picked by a gather at c + iota(3).
const char* kLoss = R"({ lambda c:i32[]; x:f32[5,8]. let
    i:i32[3] = iota[dimension=0 dtype=int32 shape=(3,) sharding=None]
    b:i32[3] = broadcast_in_dim[broadcast_dimensions=() shape=(3,) sharding=None] c
    f:i32[3] = add b i
    g:f32[5,3] = gather[axis=1] x f
    h:f32[5,3] = mul g g
    y:f32[] = reduce_sum[axes=(0, 1)] h
  in (y,) })";

bool mentions(const Jaxpr& j, std::string_view what) {
  return print_jaxpr(j).find(what) != std::string::npos;
}

TEST(Differentiable, KnownConstantRangesMakeWindowsBeforeTheDerivative) {
  const Jaxpr loss = parse_jaxpr(kLoss);
  const Differentiable windows(loss, {IntRange{4, 4}});
  EXPECT_TRUE(mentions(*windows.program(), "dynamic_slice")) << print_jaxpr(*windows.program());
  EXPECT_FALSE(mentions(*windows.program(), "gather"));
  // The cotangent is added into a window of the gradient's ref, not through the index vector.
  const Jaxpr grad = windows.grad({0});
  EXPECT_FALSE(mentions(grad, "iota")) << print_jaxpr(grad);
  EXPECT_TRUE(mentions(grad, "+5,a:a+3] +=")) << print_jaxpr(grad);

  // The same numbers as the gradient of the program as written.
  const Array x = random_array(at(DType::f32, {5, 8}), 3);
  const std::vector<RtValue> args = {Array::scalar(int32_t{4}), x};
  const std::vector<RtValue> want = interpret(grad_jaxpr(loss, {0}), args);
  const std::vector<RtValue> got = interpret(grad, args);
  ASSERT_EQ(want.size(), 2u);
  ASSERT_EQ(got.size(), 2u);
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_EQ(as_array(got[k]), as_array(want[k])) << "output " << k;
  // d/dx sum(x[:, 4:7]^2) = 2x there, zero elsewhere.
  const std::span<const float> dx = as_array(got[1]).values<float>(), xs = x.values<float>();
  EXPECT_EQ(dx[1 * 8 + 5], 2 * xs[1 * 8 + 5]);
  EXPECT_EQ(dx[1 * 8 + 3], 0.0f);
}

TEST(Differentiable, WithoutRangesTheProgramIsDifferentiatedAsGiven) {
  const auto loss = std::make_shared<const Jaxpr>(parse_jaxpr(kLoss));
  const Differentiable as_given(loss);
  EXPECT_EQ(as_given.program().get(), loss.get());  // the same object: nothing was rewritten
  EXPECT_TRUE(mentions(as_given.grad({0}), "[:,e] +=")) << print_jaxpr(as_given.grad({0}));
  // A range that lets the run leave the axis (c up to 6: columns 6..8) proves nothing.
  const Differentiable may_leave(loss, {IntRange{0, 6}});
  EXPECT_EQ(may_leave.program().get(), loss.get());
}

TEST(Differentiable, EveryTransformationRunsOnTheWindowedProgram) {
  const Jaxpr loss = parse_jaxpr(kLoss);
  const Differentiable d(loss, {IntRange{0, 5}});
  const Array x = random_array(at(DType::f32, {5, 8}), 5);
  const Array dx = random_array(at(DType::f32, {5, 8}), 6);
  const std::vector<RtValue> jvp_args = {Array::scalar(int32_t{2}), x, dx};
  const Jaxpr jvp = d.jvp({true});
  EXPECT_FALSE(mentions(jvp, "gather"));
  const std::vector<RtValue> want = interpret(jvp_jaxpr(loss, {true}), jvp_args);
  const std::vector<RtValue> got = interpret(jvp, jvp_args);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(as_array(got[1]), as_array(want[1]));  // the tangent

  const Linearized lin = d.linearize({true});
  EXPECT_FALSE(mentions(lin.primal, "gather"));
  const VjpJaxprs vjp = d.vjp({true}, {AccumKind::value});
  EXPECT_FALSE(mentions(vjp.forward, "iota")) << print_jaxpr(vjp.forward);
  EXPECT_FALSE(mentions(vjp.backward, "iota")) << print_jaxpr(vjp.backward);
}

}  // namespace
}  // namespace refjit
