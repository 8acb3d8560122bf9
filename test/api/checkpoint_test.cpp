// checkpoint / remat (refjit/checkpoint.h): derivatives are unchanged, and the backward pass
// recomputes what the policy does not save (visible in the gradient's jaxpr).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "refjit/refjit.h"

namespace refjit {
namespace {

int count(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

Value ramp(const Ints& shape, double scale) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return reshape(sin(convert(arange(n), DType::f64) * scale), shape);
}

// An RNN whose step is checkpointed (the scan(checkpoint(step)) idiom) or not.
auto rnn_loss(std::optional<RematPolicy> policy) {
  return [policy](const Value& w, const Value& xs) {
    auto step = [&](Value h, Value x) {
      Value next = tanh(matmul(w, h) + x);
      return std::pair{next, reduce_sum(next * next)};
    };
    auto run = [&](auto body) {
      auto [h, ys] = scan(body, zeros({3}, DType::f64), xs);
      return reduce_sum(ys) + reduce_sum(h);
    };
    if (!policy) return run(step);
    return run(checkpoint(step, {.policy = *policy}));
  };
}

TEST(Checkpoint, ScanOfACheckpointedStepHasTheSameGradient) {
  const Value w = ramp({3, 3}, 0.7) * 0.5, xs = ramp({6, 3}, 0.3);
  const Value want = grad(rnn_loss(std::nullopt))(w, xs);
  for (RematPolicy p : {RematPolicy::nothing_saveable, RematPolicy::dots_saveable,
                        RematPolicy::everything_saveable}) {
    Value g = grad(rnn_loss(p))(w, xs);
    Value native = jit(grad(rnn_loss(p)), JitOptions{.backend = Backend::native})(w, xs);
    for (int64_t i = 0; i < 9; ++i) {
      EXPECT_NEAR(g.array().as_double(i), want.array().as_double(i), 1e-12) << policy_name(p);
      EXPECT_NEAR(native.array().as_double(i), want.array().as_double(i), 1e-12) << policy_name(p);
    }
  }
  // And the gradient is the derivative: central differences on one entry.
  const double eps = 1e-6;
  auto f = rnn_loss(RematPolicy::nothing_saveable);
  Array hi = w.array().clone(), lo = w.array().clone();
  hi.set_from_double(4, hi.as_double(4) + eps);
  lo.set_from_double(4, lo.as_double(4) - eps);
  const double fd = (f(Value(hi), xs).item() - f(Value(lo), xs).item()) / (2 * eps);
  EXPECT_NEAR(want.array().as_double(4), fd, 1e-7);
}

TEST(Checkpoint, NothingSaveableRecomputesTheStepInTheBackwardPass) {
  const Value w = ramp({3, 3}, 0.7) * 0.5, xs = ramp({6, 3}, 0.3);
  auto text = [&](std::optional<RematPolicy> p) {
    return make_jaxpr(grad(rnn_loss(p)))(w, xs).str();
  };
  // Without a policy the backward pass reads the saved 1 - tanh^2; checkpointed, it computes
  // tanh again from the saved carry.
  EXPECT_EQ(count(text(std::nullopt), "tanh"), 1) << text(std::nullopt);
  EXPECT_EQ(count(text(RematPolicy::everything_saveable), "tanh"), 1);
  EXPECT_EQ(count(text(RematPolicy::nothing_saveable), "tanh"), 2)
      << text(RematPolicy::nothing_saveable);
  // dots_saveable keeps the product: it is computed once, tanh twice.
  const std::string dots = text(RematPolicy::dots_saveable);
  EXPECT_EQ(count(dots, "tanh"), 2) << dots;
}

TEST(Checkpoint, OutsideLoopsTheRegionIsRecomputedFromItsInputs) {
  auto f = [](std::optional<RematPolicy> p) {
    return [p](const Value& x, const Value& y) {
      auto region = [](Value a, Value b) { return sin(tanh(a * b)) * a; };
      Value r = p ? checkpoint(region, {.policy = *p})(x, y) : region(x, y);
      return reduce_sum(exp(r));
    };
  };
  const Value x = ramp({4}, 0.4), y = ramp({4}, 1.3);
  auto [v0, g0] = value_and_grad<0, 1>(f(std::nullopt))(x, y);
  auto [v1, g1] = value_and_grad<0, 1>(f(RematPolicy::nothing_saveable))(x, y);
  EXPECT_EQ(v0.item(), v1.item());
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(std::get<0>(g0).array().as_double(i), std::get<0>(g1).array().as_double(i), 1e-14);
    EXPECT_NEAR(std::get<1>(g0).array().as_double(i), std::get<1>(g1).array().as_double(i), 1e-14);
  }
  const std::string text = make_jaxpr(grad(f(RematPolicy::nothing_saveable)))(x, y).str();
  EXPECT_EQ(count(text, "= tanh"), 2) << text;
  EXPECT_EQ(count(text, "= sin"), 2) << text;
}

TEST(Checkpoint, SaveOnlyTheseNamesKeepsTheNamedValues) {
  // jax.checkpoint(f, policy=save_only_these_names("z")) with checkpoint_name(h @ m, "z").
  auto f = [](std::vector<std::string> names) {
    return [names](const Value& x, const Value& w) {
      auto layer = checkpoint(
          [](Value h, Value m) {
            Value act = tanh(checkpoint_name(matmul(h, m), "z"));
            return sin(act) * act;
          },
          {.policy = RematPolicy::save_only_these_names, .names = names});
      return reduce_sum(layer(layer(x, w), w));
    };
  };
  const Value x = ramp({2, 3}, 0.4), w = ramp({3, 3}, 0.9);
  const Value want = grad(f({"z"}))(x, w);
  const Value other = grad(f({"other"}))(x, w);
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_NEAR(want.array().as_double(i), other.array().as_double(i), 1e-14);
  // Saved by name, the product is kept; otherwise the backward pass computes it again (once
  // per layer), to recompute tanh from it. tanh itself is recomputed either way (its
  // derivative reads its result, which has no name).
  const std::string saved = make_jaxpr(grad(f({"z"})))(x, w).str();
  const std::string unsaved = make_jaxpr(grad(f({"other"})))(x, w).str();
  EXPECT_EQ(count(unsaved, "dot_general"), count(saved, "dot_general") + 2) << saved;
  EXPECT_EQ(count(saved, "= tanh"), 4);
  EXPECT_THROW(checkpoint_name(x, "two words"), Error);
}

TEST(Checkpoint, SaveAnyNamesButTheseKeepsTheOtherNamedValues) {
  // policy=save_any_names_but_these("z"): "y" is kept, "z" (and the unnamed tanh) recomputed.
  auto f = [](std::vector<std::string> excluded) {
    return [excluded](const Value& x, const Value& w) {
      auto layer = checkpoint(
          [](Value h, Value m) {
            Value y = checkpoint_name(matmul(h, m), "y");
            Value z = checkpoint_name(matmul(tanh(y), m), "z");
            return sin(z) * z;
          },
          {.policy = RematPolicy::save_any_names_but_these, .names = excluded});
      return reduce_sum(layer(layer(x, w), w));
    };
  };
  const Value x = ramp({2, 3}, 0.4), w = ramp({3, 3}, 0.9);
  const Value plain = grad([](const Value& x, const Value& w) {
    auto layer = [](Value h, Value m) {
      Value z = matmul(tanh(matmul(h, m)), m);
      return sin(z) * z;
    };
    return reduce_sum(layer(layer(x, w), w));
  })(x, w);
  for (const auto& excluded : {std::vector<std::string>{"z"}, std::vector<std::string>{"y", "z"},
                               std::vector<std::string>{}}) {
    const Value g = grad(f(excluded))(x, w);
    for (int64_t i = 0; i < 6; ++i)
      EXPECT_NEAR(g.array().as_double(i), plain.array().as_double(i), 1e-12);
  }
  // Each excluded name costs its product again in the backward pass, once per layer.
  const int none = count(make_jaxpr(grad(f({})))(x, w).str(), "dot_general");
  const int z_only = count(make_jaxpr(grad(f({"z"})))(x, w).str(), "dot_general");
  const int both = count(make_jaxpr(grad(f({"y", "z"})))(x, w).str(), "dot_general");
  EXPECT_EQ(z_only, none + 2);
  EXPECT_EQ(both, none + 4);
}

TEST(Checkpoint, RefEffectsInsideAreKeptNotRepeated) {
  // The checkpointed function accumulates into a captured ref: the backward pass must not
  // repeat the write, and the ref ends with one write per forward call.
  Ref calls = new_ref(zeros({}, DType::f64));
  auto f = [&](const Value& x) {
    auto region = checkpoint([&](Value a) {
      calls[ellipsis] += stop_gradient(a * 0.0 + 1.0);
      return sin(a) * a;
    });
    return region(x) * 2.0;
  };
  Value g = grad(f)(Value::scalar(DType::f64, 0.5));
  EXPECT_NEAR(g.item(), 2.0 * (std::cos(0.5) * 0.5 + std::sin(0.5)), 1e-12);
  EXPECT_EQ(Value(calls.value()).item(), 1.0);
}

TEST(Checkpoint, JaxPolicyNamesAreCheckedInText) {
  EXPECT_THROW(parse_jaxpr("{ lambda ; a:f32[]. let\n"
                           "    b:f32[] = jit[jaxpr={ lambda ; c:f32[]. let  in (c,) } name=f "
                           "policy=save_everything] a\n  in (b,) }"),
               Error);
}

}  // namespace
}  // namespace refjit
