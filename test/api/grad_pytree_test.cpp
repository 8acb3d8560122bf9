// grad and value_and_grad of functions taking pytrees (std::vector<Value>, std::tuple), with
// the gradients shaped like the arguments (grad(f), grad<K...>(f)) or one Value per leaf
// (run-time argnums); checked against the closed form and central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "refjit/refjit.h"

namespace refjit {
namespace {

// A two-layer model whose params are a vector {w1, b1, w2} and whose data is a tuple.
Value loss(const std::vector<Value>& params, const std::tuple<Value, Value>& batch) {
  const auto& [x, y] = batch;
  Value z = matmul(x, params[0]);
  Value h = tanh(z + broadcast_in_dim(params[1], z.shape(), {1}));
  Value out = matmul(h, params[2]);
  return reduce_sum((out - y) * (out - y));
}

std::vector<Value> init_params() {
  auto ramp = [](Ints shape, float s) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return reshape(sin(convert(arange(n, DType::f64), DType::f64) * s), shape);
  };
  return {ramp({3, 4}, 0.7f), ramp({4}, 0.3f), ramp({4, 2}, 1.1f)};
}

std::tuple<Value, Value> batch() {
  return {reshape(cos(convert(arange(15), DType::f64) * 0.4), {5, 3}),
          reshape(sin(convert(arange(10), DType::f64) * 0.9), {5, 2})};
}

// Central differences of loss with respect to element i of params[p].
double finite_difference(int p, int64_t i) {
  const double eps = 1e-6;
  auto at = [&](double delta) {
    std::vector<Value> params = init_params();
    Array a = params[static_cast<size_t>(p)].array().clone();
    a.set_from_double(i, a.as_double(i) + delta);
    params[static_cast<size_t>(p)] = Value(a);
    return loss(params, batch()).item();
  };
  return (at(eps) - at(-eps)) / (2 * eps);
}

TEST(GradPytree, GradientsComeBackShapedLikeTheParams) {
  std::vector<Value> g = grad(loss)(init_params(), batch());
  ASSERT_EQ(g.size(), 3u);
  const std::vector<Value> params = init_params();
  for (int p = 0; p < 3; ++p) {
    ASSERT_EQ(g[static_cast<size_t>(p)].shape(), params[static_cast<size_t>(p)].shape());
    for (int64_t i = 0; i < params[static_cast<size_t>(p)].array().size(); ++i)
      EXPECT_NEAR(g[static_cast<size_t>(p)].array().as_double(i), finite_difference(p, i), 1e-6)
          << "params[" << p << "] element " << i;
  }
  // Under jit, and with the value.
  auto [value, g2] = jit(value_and_grad(loss))(init_params(), batch());
  EXPECT_NEAR(value.item(), loss(init_params(), batch()).item(), 1e-12);
  for (int p = 0; p < 3; ++p)
    EXPECT_EQ(g2[static_cast<size_t>(p)].array(), g[static_cast<size_t>(p)].array());
}

TEST(GradPytree, CompileTimeArgnumsGiveATupleOfShapedGradients) {
  auto f = [](const Value& scale, const std::vector<Value>& params,
              const std::tuple<Value, Value>& data) { return loss(params, data) * scale; };
  const Value scale = Value::scalar(DType::f64, 2.0);
  auto [g_scale, g_data] = grad<0, 2>(f)(scale, init_params(), batch());
  EXPECT_NEAR(g_scale.item(), loss(init_params(), batch()).item(), 1e-12);
  auto [gx, gy] = g_data;
  EXPECT_EQ(gx.shape(), (Shape{5, 3}));
  EXPECT_EQ(gy.shape(), (Shape{5, 2}));
  // d/dy of 2 * sum((out - y)^2) = -4 (out - y).
  const auto& [x, y] = batch();
  std::vector<Value> p = init_params();
  Value z = matmul(x, p[0]);
  Value out = matmul(tanh(z + broadcast_in_dim(p[1], z.shape(), {1})), p[2]);
  Array want = ((out - y) * -4.0).array();
  for (int64_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(gy.array().as_double(i), want.as_double(i), 1e-12);
}

TEST(GradPytree, RuntimeArgnumsGiveOneValuePerLeafAndNameAVectorArgument) {
  std::vector<Value> leaves = grad(loss, std::vector<int>{0})(init_params(), batch());
  EXPECT_EQ(leaves.size(), 3u);
  try {
    grad(loss, 0)(init_params(), batch());
    FAIL() << "a vector argument has no single-Value gradient";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use grad<0>(f)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace refjit
