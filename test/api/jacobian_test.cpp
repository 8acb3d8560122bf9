// jacfwd / jacrev / hessian (refjit/jacobian.h): against closed forms and central finite
// differences, eagerly and under jit on both backends.
#include <gtest/gtest.h>

#include <cmath>

#include "refjit/refjit.h"

namespace refjit {
namespace {

// f(x) = [sin(x0) x1, x0^2 + exp(x1), x0 x1 x2]: out [3], in [3].
Value f(const Value& x) {
  Value x0 = x[0], x1 = x[1], x2 = x[2];
  return concatenate(
      {reshape(sin(x0) * x1, {1}), reshape(x0 * x0 + exp(x1), {1}), reshape(x0 * x1 * x2, {1})}, 0);
}

std::vector<double> values(const Value& v) {
  std::vector<double> out;
  Array a = v.array();
  for (int64_t i = 0; i < a.size(); ++i) out.push_back(a.as_double(i));
  return out;
}

// Central differences of f at x: J[i][j].
std::vector<double> finite_jacobian(const std::vector<float>& x) {
  const float eps = 1e-3f;
  std::vector<double> j(9);
  for (int c = 0; c < 3; ++c) {
    std::vector<float> hi = x, lo = x;
    hi[c] += eps;
    lo[c] -= eps;
    std::vector<double> fh = values(f(array<float>(hi, {3})));
    std::vector<double> fl = values(f(array<float>(lo, {3})));
    for (int r = 0; r < 3; ++r) j[r * 3 + c] = (fh[r] - fl[r]) / (2 * eps);
  }
  return j;
}

TEST(Jacobian, ForwardAndReverseAgreeWithTheClosedFormAndFiniteDifferences) {
  const std::vector<float> x = {0.5f, -1.0f, 2.0f};
  const double s = std::sin(0.5), c = std::cos(0.5), e = std::exp(-1.0);
  const std::vector<double> exact = {c * -1.0, s, 0, 2 * 0.5, e, 0, -1.0 * 2, 0.5 * 2, 0.5 * -1.0};
  const std::vector<double> fd = finite_jacobian(x);
  for (bool reverse : {false, true}) {
    Value j = reverse ? jacrev(f)(array<float>(x, {3})) : jacfwd(f)(array<float>(x, {3}));
    ASSERT_EQ(j.shape(), (Shape{3, 3}));
    std::vector<double> got = values(j);
    for (int k = 0; k < 9; ++k) {
      EXPECT_NEAR(got[k], exact[k], 1e-6) << "entry " << k << (reverse ? " (jacrev)" : "");
      EXPECT_NEAR(got[k], fd[k], 1e-2) << "entry " << k;
    }
  }
}

TEST(Jacobian, ShapesAreOutputThenInputAndWorkUnderJit) {
  // g: [2,3] -> [4]: J has shape [4, 2, 3].
  auto g = [](const Value& x) {
    return concatenate(
        {
            reshape(reduce_sum(x * x), {1}),
            reduce_sum(tanh(x), {0}),
        },
        0);
  };
  Value x = array<float>({0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f}, {2, 3});
  Value fwd = jacfwd(g)(x);
  Value rev = jacrev(g)(x);
  ASSERT_EQ(fwd.shape(), (Shape{4, 2, 3}));
  ASSERT_EQ(rev.shape(), (Shape{4, 2, 3}));
  std::vector<double> a = values(fwd), b = values(rev);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(a[k], b[k], 1e-6) << k;
  EXPECT_NEAR(a[0], 2 * 0.1, 1e-6);                              // d sum(x^2) / d x[0,0]
  EXPECT_NEAR(a[6 + 0], 1 - std::pow(std::tanh(0.1), 2), 1e-6);  // d sum_r tanh(x[r,0]) / d x[0,0]
  EXPECT_NEAR(a[6 + 1], 0.0, 1e-7);
  for (Backend backend : {Backend::native, Backend::interpreter}) {
    auto jitted = jit([&](const Value& v) { return jacrev(g)(v); },
                      JitOptions{.backend = backend, .tier = Tier::fast, .name = "jacrev_g"});
    std::vector<double> c = values(jitted(x));
    for (size_t k = 0; k < a.size(); ++k) EXPECT_NEAR(c[k], a[k], 1e-6) << k;
  }
}

TEST(Hessian, OfAScalarFunctionIsSymmetricAndExact) {
  // h(x) = x0^2 x1 + sin(x1) x2^3: H = [[2x1, 2x0, 0], [2x0, -sin(x1) x2^3, 3cos(x1) x2^2],
  //                                      [0, 3cos(x1) x2^2, 6 sin(x1) x2]].
  auto h = [](const Value& x) {
    Value x0 = x[0], x1 = x[1], x2 = x[2];
    return x0 * x0 * x1 + sin(x1) * x2 * x2 * x2;
  };
  const double x0 = 0.5, x1 = -1.0, x2 = 2.0;
  Value hv = hessian(h)(array<float>({0.5f, -1.0f, 2.0f}, {3}));
  ASSERT_EQ(hv.shape(), (Shape{3, 3}));
  const std::vector<double> exact = {2 * x1,
                                     2 * x0,
                                     0,
                                     2 * x0,
                                     -std::sin(x1) * x2 * x2 * x2,
                                     3 * std::cos(x1) * x2 * x2,
                                     0,
                                     3 * std::cos(x1) * x2 * x2,
                                     6 * std::sin(x1) * x2};
  std::vector<double> got = values(hv);
  for (int k = 0; k < 9; ++k) EXPECT_NEAR(got[k], exact[k], 1e-5) << k;
}

TEST(Jacobian, IntegerArgumentsAreRefused) {
  EXPECT_THROW((void)jacfwd(f)(array<int32_t>({1, 2, 3}, {3})), TypeError);
}

}  // namespace
}  // namespace refjit
