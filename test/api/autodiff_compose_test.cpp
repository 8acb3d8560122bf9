// Composition of the autodiff API with jit, tracing and itself, and forward mode checked
// against finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "refjit/refjit.h"

namespace refjit {
namespace {

TEST(AutodiffCompose, GradOfJitAndJitOfGrad) {
  auto f = jit([](Value x) { return sin(x) * x; }, "f");
  const double x = 0.7;
  const double want = std::cos(x) * x + std::sin(x);
  EXPECT_NEAR(grad(f)(Value::scalar(DType::f64, x)).item(), want, 1e-12);
  auto df = jit(grad(f), "df");
  EXPECT_NEAR(df(Value::scalar(DType::f64, x)).item(), want, 1e-12);
  std::string text = make_jaxpr(df)(Value::scalar(DType::f64, x)).str();
  EXPECT_NE(text.find("name=df"), std::string::npos) << text;
}

TEST(AutodiffCompose, GradOfGradOfSinIsMinusSin) {
  auto d2 = grad(grad([](Value x) { return sin(x); }));
  for (double x : {0.3, 1.0, 2.5})
    EXPECT_NEAR(d2(Value::scalar(DType::f64, x)).item(), -std::sin(x), 1e-12);
  auto d3 = grad(grad(grad([](Value x) { return x * x * x; })));
  EXPECT_NEAR(d3(Value::scalar(DType::f64, 1.5)).item(), 6.0, 1e-12);
}

TEST(AutodiffCompose, ValueAndGradWithSeveralArgnums) {
  auto f = [](Value a, Value b) { return a * a * b; };
  auto [v, g] = value_and_grad(f, std::vector<int>{0, 1})(3.0f, 2.0f);
  EXPECT_EQ(v.item(), 18.0);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].item(), 12.0);
  EXPECT_EQ(g[1].item(), 9.0);
  auto [v1, g1] = value_and_grad(f, 1)(3.0f, 2.0f);
  EXPECT_EQ(v1.item(), 18.0);
  EXPECT_EQ(g1.item(), 9.0);
  // argnums order is kept.
  std::vector<Value> rev = grad(f, std::vector<int>{1, 0})(3.0f, 2.0f);
  EXPECT_EQ(rev[0].item(), 9.0);
  EXPECT_EQ(rev[1].item(), 12.0);
}

TEST(AutodiffCompose, VjpInsideMakeJaxprStagesForwardAndBackward) {
  auto f = [](Value x) {
    auto [y, f_vjp] = vjp([](Value v) { return sin(v); }, x);
    auto [x_bar] = f_vjp(Value::scalar(DType::f32, 1.0));
    return std::pair{y, x_bar.value()};
  };
  ClosedJaxpr j = make_jaxpr(f)(1.0f);
  std::string text = j.str();
  EXPECT_NE(text.find("sin"), std::string::npos) << text;
  EXPECT_NE(text.find("cos"), std::string::npos) << text;
  auto outs = j.call(std::vector<Operand>{Value(1.0f)});
  EXPECT_EQ(std::get<Value>(outs[1]).array(), Array::scalar(std::cos(1.0f)));
  // The same function run eagerly gives the same numbers.
  auto [y, x_bar] = f(1.0f);
  EXPECT_EQ(y.array(), Array::scalar(std::sin(1.0f)));
  EXPECT_EQ(x_bar.array(), Array::scalar(std::cos(1.0f)));
}

TEST(AutodiffCompose, JvpMatchesFiniteDifferences) {
  auto f = [](Value x, Value y) { return tanh(x * y) + exp(x); };
  const double x = 0.4, y = -1.3, tx = 0.7, ty = 0.2, h = 1e-6;
  auto at = [&](double a, double b) {
    return f(Value::scalar(DType::f64, a), Value::scalar(DType::f64, b)).item();
  };
  auto [out, out_dot] =
      jvp(f, std::tuple{Value::scalar(DType::f64, x), Value::scalar(DType::f64, y)},
          std::tuple{Value::scalar(DType::f64, tx), Value::scalar(DType::f64, ty)});
  EXPECT_NEAR(out.item(), at(x, y), 1e-12);
  double fd = (at(x + h * tx, y + h * ty) - at(x - h * tx, y - h * ty)) / (2 * h);
  EXPECT_NEAR(out_dot.item(), fd, 1e-7);
}

TEST(AutodiffCompose, JvpOfARefArgumentUpdatesBothRefs) {
  auto f = [](Ref r) {
    r.set(sin(r.get()));
    return r.get() * 2;
  };
  Ref r = new_ref(Value::scalar(DType::f64, 0.5));
  Ref r_dot = new_ref(Value::scalar(DType::f64, 1.0));
  auto [y, y_dot] = jvp(f, std::tuple{r}, std::tuple{r_dot});
  EXPECT_NEAR(y.item(), 2 * std::sin(0.5), 1e-12);
  EXPECT_NEAR(y_dot.item(), 2 * std::cos(0.5), 1e-12);
  EXPECT_NEAR(r.value().as_double(0), std::sin(0.5), 1e-12);
  EXPECT_NEAR(r_dot.value().as_double(0), std::cos(0.5), 1e-12);
}

TEST(AutodiffCompose, LinearizeIsReusableAndMatchesFiniteDifferences) {
  int traces = 0;
  auto f = [&](Value x) {
    ++traces;
    return sin(x) * cos(x);
  };
  Value x = array<double>({0.1, 0.5, 1.2});
  auto [y, f_lin] = linearize(f, x);
  EXPECT_EQ(traces, 1);
  const double h = 1e-6;
  for (int k = 0; k < 3; ++k) {
    std::vector<double> t(3, 0.0);
    t[k] = 1.0;
    Value out = f_lin(array<double>(t));
    double xk = x.array().as_double(k);
    double fd =
        (std::sin(xk + h) * std::cos(xk + h) - std::sin(xk - h) * std::cos(xk - h)) / (2 * h);
    EXPECT_NEAR(out.array().as_double(k), fd, 1e-7);
  }
  EXPECT_EQ(traces, 1);  // f_lin never re-traces or re-runs f
}

TEST(AutodiffCompose, IntegerArgumentsGetZeroGradientsAndIgnoredTangents) {
  auto f = [](Value x, Value n) { return x * convert(n, DType::f32); };
  auto [y, f_vjp] = vjp(f, 2.0f, 3);
  auto [x_bar, n_bar] = f_vjp(1.0);
  EXPECT_EQ(x_bar.value().item(), 3.0);
  EXPECT_EQ(n_bar.value().array(), Array::scalar(int32_t{0}));
  auto [y2, f_lin] = linearize(f, 2.0f, 3);
  EXPECT_EQ(f_lin(1.0f, 0).item(), 3.0);
}

TEST(AutodiffCompose, CustomVjpBwdIsUsedInReverseModeAndThePrimalInForward) {
  auto scaled_sin = custom_vjp([](Value x) { return sin(x); },
                               [](Value x) {
                                 return std::tuple{sin(x), cos(x)};
                               },
                               [](Value c, Value g) { return c * g * 3; }, "scaled_sin");
  const float x = 0.5f;
  EXPECT_EQ(scaled_sin(x).array(), Array::scalar(std::sin(x)));
  EXPECT_NEAR(grad(scaled_sin)(x).item(), 3 * std::cos(0.5), 1e-6);
  auto [y, y_dot] = jvp(scaled_sin, std::tuple{Value(x)}, std::tuple{Value(1.0f)});
  EXPECT_NEAR(y_dot.item(), std::cos(0.5), 1e-6);
  std::string text = make_jaxpr(scaled_sin)(x).str();
  EXPECT_NE(text.find("custom_vjp_call["), std::string::npos) << text;
  EXPECT_NE(text.find("num_res=1"), std::string::npos) << text;
}

}  // namespace
}  // namespace refjit
