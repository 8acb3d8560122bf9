// vmap (refjit/vmap.h): a batched call equals the per-example calls stacked, for products,
// loops, branches, refs and derivatives, eagerly and under jit; its errors name what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "refjit/refjit.h"

namespace refjit {
namespace {

void expect_near(const Value& got, const Value& want, double tol = 1e-5) {
  ASSERT_EQ(got.shape(), want.shape());
  Array g = got.array(), w = want.array();
  for (int64_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g.as_double(i), w.as_double(i), tol * (1 + std::abs(w.as_double(i))))
        << "element " << i;
}

// Row k of each example's result, stacked.
template <class F>
Value stacked(int64_t n, F one) {
  std::vector<Value> rows;
  for (int64_t k = 0; k < n; ++k) rows.push_back(expand_dims(one(k), {0}));
  return concatenate(rows, 0);
}

Value ramp(const Ints& shape, float scale) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return reshape(sin(convert(arange(n), DType::f32) * scale), shape);
}

TEST(Vmap, MatvecWithASharedMatrixAndOutAxes) {
  Value w = ramp({2, 3}, 0.7f), xs = ramp({4, 3}, 0.3f);
  auto f = [](const Value& x, const Value& m) { return std::pair{dot(m, x), reduce_sum(m)}; };
  auto [ys, total] = vmap(f, {.in_axes = {0, std::nullopt}})(xs, w);
  expect_near(ys, stacked(4, [&](int64_t k) { return dot(w, xs[k]); }));
  // An output that does not depend on the batch is broadcast along it.
  expect_near(total, stacked(4, [&](int64_t) { return reduce_sum(w); }));
  // The batch along axis 1 of the input and of the output.
  Value xs_t = transpose(xs, {1, 0});
  Value ys_t =
      vmap([&](const Value& x) { return dot(w, x); }, {.in_axes = {1}, .out_axes = {1}})(xs_t);
  expect_near(ys_t, transpose(ys, {1, 0}));
}

TEST(Vmap, RnnScanWithBatchedSequencesUnderJit) {
  Value w = ramp({3, 3}, 0.4f) * 0.5f;
  auto rnn = [&](const Value& xs) {
    auto [h, hs] = scan(
        [&](Value h, Value x) {
          Value next = tanh(dot(w, h) + x);
          return std::pair{next, reduce_sum(next)};
        },
        zeros({3}), xs);
    return std::pair{h, hs};
  };
  Value batch = ramp({5, 7, 3}, 0.2f);  // 5 sequences of 7 steps
  auto [h, hs] = jit([&](const Value& b) { return vmap(rnn)(b); })(batch);
  expect_near(h, stacked(5, [&](int64_t k) { return rnn(batch[k]).first; }));
  expect_near(hs, stacked(5, [&](int64_t k) { return rnn(batch[k]).second; }));
}

TEST(Vmap, BranchesAndWhileOnBatchedPredicatesRunPerExample) {
  auto f = [](const Value& x) {
    Value y = cond(
        reduce_sum(x) > 0.0f, [](Value v) { return sin(v) * 2.0f; }, [](Value v) { return v * v; },
        x);
    Value n = while_loop([](Value c) { return c < 20.0f; }, [](Value c) { return c * 2.0f + 1.0f; },
                         reduce_sum(abs(x)) + 1.0f);
    return y * n;
  };
  Value xs = ramp({6, 4}, 1.3f) - 0.2f;
  Value got = vmap(f)(xs);
  expect_near(got, stacked(6, [&](int64_t k) { return f(xs[k]); }));
  Value native = jit([&](const Value& b) { return vmap(f)(b); },
                     JitOptions{.backend = Backend::native, .name = "vmap_branches"})(xs);
  expect_near(native, got);
}

// vmap(f) over 4 tables and their index rows against f per example, interpreted and compiled,
// and the per-example gradients; the batched program holds `gather` (one op over every
// example) and no scan.
void expect_one_op_per_batch(const std::function<Value(const Value&, const Value&)>& f,
                             const Value& idx, const std::string& gather) {
  Value tables = ramp({4, 5, 3}, 0.7f);
  auto batched = [&](const Value& t, const Value& i) { return vmap(f)(t, i); };
  Value want = stacked(4, [&](int64_t k) { return f(tables[k], idx[k]); });
  expect_near(batched(tables, idx), want);
  expect_near(
      jit(batched, JitOptions{.backend = Backend::native, .name = "vmap_gather"})(tables, idx),
      want);
  auto per_example_grad = [&](const Value& t, const Value& i) { return grad(f)(t, i); };
  expect_near(vmap(per_example_grad)(tables, idx),
              stacked(4, [&](int64_t k) { return grad(f)(tables[k], idx[k]); }));
  const std::string text = make_jaxpr(batched)(tables, idx).str();
  EXPECT_NE(text.find(gather), std::string::npos) << text;
  EXPECT_EQ(text.find("scan"), std::string::npos) << text;  // no per-example loop
}

// Batched indices with a batched operand: one gather / scatter over the examples' rows
// (index b * N + i), with every example's out-of-range indices clamped (read) or dropped
// (update) inside its own rows, never reaching a neighbour's; and its gradient.
TEST(Vmap, BatchedIndicesIntoBatchedOperandsStayInTheirExample) {
  auto f = [](const Value& table, const Value& idx) {
    Value picked = table.at(idx).get();               // gather, axis 0
    Value hot = zeros_like(table).at(idx).set(1.0f);  // scatter, unbatched zeros
    Value added = table.at(idx).add(picked * 2.0f);   // scatter-add
    return reduce_sum(picked * 3.0f) + reduce_sum(hot * added);
  };
  expect_one_op_per_batch(f, array<int32_t>({0, 4, 2, -1, 7, 1, 3, 3, 5, 2, -6, 0}, {4, 3}),
                          "gather[axis=0 dims=2]");
}

// The same on an inner axis (x.at(all, idx)): the batch dim moves next to the indexed axis
// for one gather or scatter, and the result's moves back to the front.
TEST(Vmap, BatchedIndicesOnAnInnerAxisStayInTheirExample) {
  auto f = [](const Value& table, const Value& idx) {
    Value picked = table.at(all, idx).get();              // gather, axis 1
    Value added = table.at(all, idx).add(picked * 2.0f);  // scatter-add
    Value set = table.at(all, idx).set(picked + 1.0f);    // scatter: the last repeat wins
    return reduce_sum(picked * 3.0f) + reduce_sum(set * added);
  };
  expect_one_op_per_batch(f, array<int32_t>({0, 2, -1, 7, 1, 1, 2, -4}, {4, 2}),
                          "gather[axis=1 dims=2]");
}

TEST(Vmap, PerExampleGradientsAndTheGradientOfABatchedLoss) {
  Value w = ramp({3}, 0.9f);
  auto loss = [](const Value& w, const Value& x) { return reduce_sum(tanh(w * x) * x); };
  Value xs = ramp({4, 3}, 0.5f);
  // jax.vmap(jax.grad(loss), in_axes=(None, 0)): one gradient per example.
  Value per = vmap(grad(loss), {.in_axes = {std::nullopt, 0}})(w, xs);
  expect_near(per, stacked(4, [&](int64_t k) { return grad(loss)(w, xs[k]); }));
  // jax.grad(lambda w: vmap(loss)(w, xs).sum()) is their sum; checked by finite differences.
  auto batch_loss = [&](const Value& w) {
    return reduce_sum(vmap(loss, {.in_axes = {std::nullopt, 0}})(w, xs));
  };
  Value g = grad(batch_loss)(w);
  expect_near(g, reduce_sum(per, {0}), 1e-5);
  const float eps = 1e-3f;
  for (int64_t i = 0; i < 3; ++i) {
    Value e = convert(eq(arange(3), Value(int32_t(i))), DType::f32) * eps;
    double fd = (batch_loss(w + e).array().as_double(0) - batch_loss(w - e).array().as_double(0)) /
                (2 * eps);
    EXPECT_NEAR(g.array().as_double(i), fd, 2e-3) << i;
  }
}

TEST(Vmap, BatchedRefsKeepOneRowPerExample) {
  // Each example accumulates into its own row of the ref and reads it back.
  auto f = [](const Ref& acc, const Value& x) {
    acc[ellipsis] += x * 2.0f;
    acc[0] = acc.get(1);
    Ref local = new_ref(x);  // a ref made from a batched value is batched
    local[1] += 1.0f;
    return freeze(local) + acc.get();
  };
  Value init = ramp({3, 2}, 0.6f), xs = ramp({3, 2}, 1.1f);
  Ref batched = new_ref(init);
  Value got = vmap(f)(batched, xs);
  for (int64_t k = 0; k < 3; ++k) {
    Ref one = new_ref(init[k]);
    Value want = f(one, xs[k]);
    expect_near(got[k], want);
    expect_near(Value(batched.value())[k], Value(one.value()));
  }
}

TEST(Vmap, ARefBatchedAlongAnotherAxisUpdatesItsColumns) {
  // The ref is [2, 3] batched along axis 1: example k reads and writes column k.
  auto f = [](const Ref& acc, const Value& x) {
    acc[ellipsis] += x * 2.0f;
    acc[1] = acc.get(0) * 10.0f;
    return acc.get();
  };
  Value init = ramp({2, 3}, 0.6f), xs = ramp({3, 2}, 1.1f);
  for (bool use_jit : {false, true}) {
    SCOPED_TRACE(use_jit ? "jit" : "eager");
    Ref batched = new_ref(init);
    auto g = vmap(f, {.in_axes = {1, 0}, .out_axes = {1}});
    Value got = use_jit ? jit(g, "g")(batched, xs) : g(batched, xs);
    Value after = Value(batched.value());
    for (int64_t k = 0; k < 3; ++k) {
      Ref one = new_ref(init.at(all, k).get());
      Value want = f(one, xs[k]);
      expect_near(got.at(all, k).get(), want);
      expect_near(after.at(all, k).get(), Value(one.value()));
    }
  }
}

TEST(Vmap, WritingABatchedValueIntoASharedRefIsE11) {
  Ref shared = new_ref(zeros({2}));
  auto f = [&](const Value& x) {
    shared[ellipsis] += x;
    return x;
  };
  try {
    vmap(f)(ramp({3, 2}, 0.5f));
    FAIL() << "expected RefError E11";
  } catch (const RefError& e) {
    EXPECT_EQ(e.code(), "E11");
    EXPECT_NE(std::string(e.what()).find("ref that is not batched"), std::string::npos) << e.what();
  }
}

TEST(Vmap, ABranchOnTheBatchThatWritesASharedRefIsE11) {
  // The branch taken depends on the example, so the shared ref's final value would too.
  Ref shared = new_ref(zeros({}));
  auto f = [&](const Value& x) {
    return cond(
        x > 0.0f,
        [&] {
          shared[ellipsis] += 1.0f;
          return x;
        },
        [&] { return -x; });
  };
  try {
    vmap(f)(array<float>({1, -2, 3}));
    FAIL() << "expected RefError E11";
  } catch (const RefError& e) {
    EXPECT_EQ(e.code(), "E11") << e.what();
  }
  // Reading the shared ref from such a branch is fine.
  auto g = [&](const Value& x) {
    return cond(
        x > 0.0f, [&] { return x + shared.get(); }, [&] { return -x; });
  };
  expect_near(vmap(g)(array<float>({1, -2, 3})), array<float>({1, 2, 3}));
}

TEST(Vmap, NestedVmapIsAnOuterProductOfBatches) {
  Value a = ramp({3}, 0.5f), b = ramp({4}, 0.8f);
  auto mul = [](const Value& x, const Value& y) { return x * y; };
  Value outer =
      vmap(vmap(mul, {.in_axes = {std::nullopt, 0}}), {.in_axes = {0, std::nullopt}})(a, b);
  expect_near(outer, stacked(3, [&](int64_t i) { return a[i] * b; }));
}

TEST(Vmap, ErrorsNameTheArgument) {
  auto f = [](const Value& x, const Value& y) { return x + y; };
  try {
    vmap(f)(zeros({3, 2}), zeros({4, 2}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch axes differ in size"), std::string::npos)
        << e.what();
  }
  try {
    vmap(f, {.in_axes = {2, 0}})(zeros({3, 2}), zeros({3, 2}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the batch axis 2, which it does not have"),
              std::string::npos)
        << e.what();
  }
  try {
    vmap(f, {.in_axes = {0, 0}, .out_axes = {std::nullopt}})(zeros({3, 2}), zeros({3, 2}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("depends on the batch"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace refjit
