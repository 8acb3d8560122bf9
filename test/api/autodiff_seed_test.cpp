// The autodiff examples of the seeds (autodiff-with-refs.txt, retain-graph-equivalent.txt)
// through the C++ API, with the values the seeds print.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>

#include "refjit/refjit.h"

namespace refjit {
namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(AutodiffSeed, GradOfPure2IsTwo) {
  auto pure2 = jit(
      [](Value x) {
        Ref ref = new_ref(x);
        ref.set(ref.get() + ref.get());
        return ref.get();
      },
      "pure2");
  EXPECT_EQ(grad(pure2)(3.0f).item(), 2.0);
}

TEST(AutodiffSeed, StashGradsPlumbsTheCotangentOutOfTheBackwardPass) {
  auto stash_grads = custom_vjp([](Ref, Value x) { return x; },
                                [](Ref grads_ref, Value x) {
                                  return std::tuple{x, grads_ref};
                                },
                                [](Ref grads_ref, Value g) {
                                  grads_ref.set(g);
                                  return std::tuple{std::nullopt, g};
                                },
                                "stash_grads");
  auto f = [&](Value x, Ref grads_ref) { return sin(stash_grads(grads_ref, x)); };
  Ref grads_ref = new_ref(0.0f);
  Value g = grad(f)(1.0f, grads_ref);
  EXPECT_EQ(grads_ref.str(), "Ref(0.5403023, dtype=float32)");
  EXPECT_EQ(g.array(), Array::scalar(std::cos(1.0f)));
  // Called directly it is the identity.
  EXPECT_EQ(f(0.5f, grads_ref).item(), static_cast<double>(std::sin(0.5f)));
}

TEST(AutodiffSeed, VjpWithRespectToARefAccumulatesIntoTheBoundRef) {
  auto f = [](Ref x_ref) { return integer_pow(x_ref.get(), 2); };
  Ref x_ref = new_ref(2.0f);
  auto [y, f_vjp] = vjp(f, x_ref);
  EXPECT_EQ(y.item(), 4.0);
  Ref x_grad_ref = new_ref(0.0f);
  auto [slot] = f_vjp.with_refs(x_grad_ref)(1.0);
  EXPECT_TRUE(slot.is_grad_ref());
  EXPECT_EQ(x_grad_ref.str(), "Ref(4.0, dtype=float32)");

  // Accumulated, not set.
  Ref prefilled = new_ref(100.0f);
  auto [y2, f_vjp2] = vjp(f, new_ref(2.0f));
  f_vjp2.with_refs(prefilled)(1.0);
  EXPECT_EQ(prefilled.str(), "Ref(104.0, dtype=float32)");
}

TEST(AutodiffSeed, GradientOfAWrittenRefIsWithRespectToItsInitialValue) {
  auto g = [](Ref x_ref) {
    x_ref.set(sin(x_ref.get()));
    return integer_pow(x_ref.get(), 2);
  };
  Ref x_ref = new_ref(2.0f);
  auto [y, g_vjp] = vjp(g, x_ref);
  // The forward pass ran at vjp time and updated x_ref.
  EXPECT_EQ(x_ref.value(), Array::scalar(std::sin(2.0f)));
  Ref g_grad_ref = new_ref(0.0f);
  g_vjp.with_refs(g_grad_ref)(1.0);
  EXPECT_EQ(g_grad_ref.str(), "Ref(-0.7568025, dtype=float32)");
  EXPECT_NEAR(g_grad_ref.value().as_double(0), 2 * std::sin(2.0) * std::cos(2.0), 1e-6);
}

TEST(AutodiffSeed, SinVjpAsAValueAndIntoARef) {
  auto [y, sin_vjp] = vjp([](Value x) { return sin(x); }, 1.0f);
  auto [x_bar] = sin_vjp(1.0);
  EXPECT_EQ(x_bar.str(), "0.5403023");
  Ref grad_ref = new_ref(0.0f);
  sin_vjp.with_refs(grad_ref)(1.0);
  EXPECT_EQ(grad_ref.str(), "Ref(0.5403023, dtype=float32)");
}

auto make_take() {
  return jit([](Value x, Value i) { return x[i]; }, "take");
}

TEST(AutodiffSeed, TakeGradientIsOneHotAsAValue) {
  auto take = make_take();
  Value x = arange(10, DType::f32);
  auto [y, take_vjp] = vjp(take, x, 3);
  EXPECT_EQ(y.item(), 3.0);
  auto [x_bar, i_bar] = take_vjp(1.0);
  EXPECT_EQ(x_bar.array(), Array::from_vector<float>({0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, {10}));
  EXPECT_TRUE(i_bar.is_value());
}

TEST(AutodiffSeed, TakeGradientsAccumulateSparselyIntoOneRef) {
  auto take = make_take();
  Value x = arange(10, DType::f32);
  Ref grad_ref = new_ref(zeros({10}));
  for (int i : {3, 5, 3}) {
    auto [y, take_vjp] = vjp(take, x, i);
    take_vjp.with_refs(grad_ref, GradValue{})(1.0);
  }
  EXPECT_EQ(grad_ref.value(), Array::from_vector<float>({0, 0, 0, 2, 0, 1, 0, 0, 0, 0}, {10}));
  EXPECT_EQ(grad_ref.str(),
            "Ref([0.0, 0.0, 0.0, 2.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0], dtype=float32)");
}

TEST(AutodiffSeed, TakeVjpJaxprStagesForwardAndSparseBackward) {
  auto take = make_take();
  Value x = arange(10, DType::f32);
  Ref grad_ref = new_ref(zeros({10}));
  auto take_vjp_jaxpr = make_jaxpr([&]() {
    auto [y, take_vjp] = vjp(take, x, 3);
    take_vjp.with_refs(grad_ref, GradValue{})(1.0);
  });
  std::string text = take_vjp_jaxpr().str();
  EXPECT_EQ(text.rfind("{ lambda a:f32[10] b:Ref{f32[10]}; . let", 0), 0u) << text;
  EXPECT_EQ(count(text, "jit["), 2) << text;
  EXPECT_EQ(count(text, "name=take"), 2) << text;
  EXPECT_EQ(count(text, "dynamic_slice"), 1) << text;
  // The backward is one sparse add-update of the gradient ref (bound to b): `m[l:l+1] += o`
  // (inner jaxprs name their variables afresh), with no dense zeros.
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\] d b 1\.0:f32\[\])"))) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\w+\[(\w+):\1\+1\] \+= \w+)"))) << text;
  EXPECT_EQ(count(text, "shape=(10,)"), 0) << text;
  EXPECT_EQ(count(text, "f32[10] = broadcast_in_dim"), 0) << text;
  EXPECT_EQ(count(text, "dynamic_update_slice"), 0) << text;
  // Staging ran nothing: the ref is untouched.
  EXPECT_EQ(grad_ref.value(), zeros({10}).array());
}

TEST(AutodiffSeed, DontWantSkipsTheSecondDotAndGivesDidntWant) {
  auto predict = [](Value W, Value x) { return matmul(W, x); };
  Value W = ones({4, 4});
  Value x = ones({4});
  auto [y, f_vjp] = vjp(predict, W, x);
  auto [W_bar, x_bar] = f_vjp.with_refs(GradValue{}, DontWant{})(ones({4}));
  EXPECT_EQ(W_bar.value()[0].array(), Array::from_vector<float>({1, 1, 1, 1}, {4}));
  EXPECT_TRUE(x_bar.is_didnt_want());
  EXPECT_EQ(x_bar.str(), "DidntWant()");

  std::string both = make_jaxpr([&]() { return f_vjp(ones({4}))[0].value(); })().str();
  std::string only_W =
      make_jaxpr([&]() { return f_vjp.with_refs(GradValue{}, DontWant{})(ones({4}))[0].value(); })()
          .str();
  EXPECT_EQ(count(both, "dot_general"), 2) << both;
  EXPECT_EQ(count(only_W, "dot_general"), 1) << only_W;
}

// retain-graph-equivalent.txt: one forward pass, two backward passes.
TEST(AutodiffSeed, RetainGraphOneForwardTwoBackwards) {
  int traces = 0;
  auto forward = [&](Value x) {
    ++traces;
    return sin(x) * cos(x);
  };
  Value x = ones({5});
  auto [y, f_vjp] = vjp(forward, x);
  EXPECT_EQ(traces, 1);
  auto [grad1] = f_vjp(ones_like(y));
  auto [modified_y, g_vjp] = vjp([](Value v) { return v * 2; }, y);
  auto [g_ct] = g_vjp(ones_like(modified_y));
  auto [grad2] = f_vjp(g_ct.value());
  EXPECT_EQ(traces, 1);            // the forward pass never re-ran
  const double d = std::cos(2.0);  // d/dx sin x cos x = cos 2x
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(grad1.array().as_double(i), d, 1e-6);
    EXPECT_NEAR(grad2.array().as_double(i), 2 * d, 1e-6);
  }
  EXPECT_NEAR(modified_y.array().as_double(0), 2 * std::sin(1.0) * std::cos(1.0), 1e-6);
}

}  // namespace
}  // namespace refjit
