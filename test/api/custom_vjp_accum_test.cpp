// custom_vjp with an accumulating bwd rule (refjit/custom_vjp.h, GradAccum): the rule adds the
// arguments' cotangents into their accumulators instead of returning them, as JAX's ref-aware
// custom rules do. The gradients equal those of a returning bwd and of central differences,
// and an indexed add stays an in-place addupdate into the gradient (no dense cotangent).
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "refjit/refjit.h"

namespace refjit {
namespace {

Value i32(int v) { return Value::scalar(DType::i32, v); }

Value table_5x3() { return reshape(sin(convert(arange(15), DType::f64) * 0.7), {5, 3}); }

// table[i], with the table's cotangent added only at row i.
auto take_row_accumulating() {
  return custom_vjp([](Value table, Value i) { return table.at(i).get(); },
                    [](Value table, Value i) {
                      return std::tuple{table.at(i).get(), i};
                    },
                    [](Value i, Value g, GradAccum table_bar, GradAccum) { table_bar.add(i, g); },
                    "take_row");
}

// The same rule returning a dense cotangent (the classic form).
auto take_row_returning() {
  return custom_vjp([](Value table, Value i) { return table.at(i).get(); },
                    [](Value table, Value i) {
                      return std::tuple{table.at(i).get(), i, zeros({5, 3}, DType::f64)};
                    },
                    [](Value i, Value z, Value g) {
                      return std::tuple{z.at(i).add(g), std::nullopt};
                    },
                    "take_row_dense");
}

template <class TakeRow>
auto embedding_loss(TakeRow take_row) {
  return [take_row](Value table, Value w) {
    Value a = take_row(table, i32(1));
    Value b = take_row(table, i32(3));
    Value c = take_row(table, i32(1));  // row 1 again: both contributions add up
    return reduce_sum(a * w) + reduce_sum(b * w * w) + reduce_sum(sin(c));
  };
}

std::vector<double> values_of(const Value& v) {
  std::span<const double> s = v.array().values<double>();
  return {s.begin(), s.end()};
}

void expect_near_arrays(const Value& got, const Value& want, double tol) {
  ASSERT_EQ(got.shape(), want.shape());
  const std::vector<double> g = values_of(got);
  const std::vector<double> w = values_of(want);
  for (size_t k = 0; k < g.size(); ++k) EXPECT_NEAR(g[k], w[k], tol) << "element " << k;
}

TEST(CustomVjpAccum, GradientsMatchTheReturningRuleAndDifferences) {
  const Value table = table_5x3();
  const Value w = Value(Array::from_vector<double>({0.5, -1.0, 2.0}, {3}));
  auto accumulating = embedding_loss(take_row_accumulating());
  auto returning = embedding_loss(take_row_returning());

  // Expected by hand: row 1 gets w + cos(table[1]), row 3 gets w*w, the others nothing.
  const Value g = grad(accumulating)(table, w);
  const std::vector<double> t = values_of(table);
  const std::vector<double> wv = {0.5, -1.0, 2.0};
  const std::vector<double> gv = values_of(g);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 3; ++c) {
      double want = 0;
      if (r == 1) want = wv[c] + std::cos(t[3 + c]);
      if (r == 3) want = wv[c] * wv[c];
      EXPECT_NEAR(gv[r * 3 + c], want, 1e-12) << "row " << r << " col " << c;
    }
  expect_near_arrays(g, grad(returning)(table, w), 1e-12);
  expect_near_arrays(jit(grad(accumulating), "g")(table, w), g, 1e-12);

  // Central differences of the primal at one entry of row 3 and one of row 0 (zero).
  for (int k : {10, 1}) {
    const double h = 1e-6;
    Array plus = table.array().clone();
    Array minus = table.array().clone();
    plus.mutable_values<double>()[static_cast<size_t>(k)] += h;
    minus.mutable_values<double>()[static_cast<size_t>(k)] -= h;
    const double fd =
        (accumulating(Value(plus), w).item() - accumulating(Value(minus), w).item()) / (2 * h);
    EXPECT_NEAR(gv[static_cast<size_t>(k)], fd, 1e-6) << "entry " << k;
  }
}

TEST(CustomVjpAccum, AnArgumentWhoseGradientIsNotWantedGetsScratch) {
  // grad with respect to w only: the table's accumulator is a scratch ref nothing reads.
  const Value table = table_5x3();
  const Value w = Value(Array::from_vector<double>({0.5, -1.0, 2.0}, {3}));
  auto loss = embedding_loss(take_row_accumulating());
  const Value gw = grad(loss, 1)(table, w);
  const std::vector<double> t = values_of(table);
  const std::vector<double> wv = {0.5, -1.0, 2.0};
  const std::vector<double> got = values_of(gw);
  for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[c], t[3 + c] + 2 * wv[c] * t[9 + c], 1e-12);
  expect_near_arrays(jit(grad(loss, 1), "gw")(table, w), gw, 1e-12);
}

TEST(CustomVjpAccum, IndexedAddStaysInPlace) {
  // The accumulating rule's indexed add is an addupdate into the gradient; the returning rule
  // materialises a dense [5,3] cotangent per call and adds it.
  const Value table = table_5x3();
  const Value w = Value(Array::from_vector<double>({0.5, -1.0, 2.0}, {3}));
  const std::string acc = make_jaxpr(grad(embedding_loss(take_row_accumulating())))(table, w).str();
  const std::string dense = make_jaxpr(grad(embedding_loss(take_row_returning())))(table, w).str();
  EXPECT_NE(acc.find("+="), std::string::npos) << acc;
  EXPECT_EQ(acc.find("f64[5,3] = add_any"), std::string::npos) << acc;
  EXPECT_NE(dense.find("f64[5,3] = add_any"), std::string::npos) << dense;
}

TEST(CustomVjpAccum, InsideAScanTheStepsAccumulate) {
  // A scan over indices, each step reading one row through the custom rule.
  auto take_row = take_row_accumulating();
  auto loss = [&](Value table, Value idx) {
    auto [s, ys] = scan(
        [&](Value acc, Value i) {
          Value row = take_row(table, i);
          return std::pair{acc + reduce_sum(row * row), row};
        },
        Value::scalar(DType::f64, 0.0), idx);
    return s + reduce_sum(ys);
  };
  const Value table = table_5x3();
  const Value idx = Value(Array::from_vector<int32_t>({4, 0, 4, 2}, {4}));
  const Value g = grad(loss)(table, idx);
  const std::vector<double> t = values_of(table);
  std::vector<double> want(15, 0.0);
  for (int i : {4, 0, 4, 2})
    for (int c = 0; c < 3; ++c) want[i * 3 + c] += 2 * t[i * 3 + c] + 1;
  const std::vector<double> got = values_of(g);
  for (size_t k = 0; k < 15; ++k) EXPECT_NEAR(got[k], want[k], 1e-12) << "entry " << k;
  expect_near_arrays(jit(grad(loss), "g")(table, idx), g, 1e-12);
}

TEST(CustomVjpAccum, ForwardModeDifferentiatesThePrimal) {
  auto take_row = take_row_accumulating();
  const Value table = table_5x3();
  const Value dt = Value(Array::from_vector<double>(std::vector<double>(15, 1.0), {5, 3}));
  auto [y, y_dot] =
      jvp([&](Value t) { return take_row(t, i32(2)); }, std::tuple{table}, std::tuple{dt});
  expect_near_arrays(y_dot, Value(Array::from_vector<double>({1, 1, 1}, {3})), 0);
  expect_near_arrays(y, table.at(2).get(), 0);
}

TEST(CustomVjpAccum, TheBwdJaxprTakesOneAccumulatorPerArgument) {
  const std::string text = make_jaxpr(take_row_accumulating())(table_5x3(), i32(0)).str();
  // bwd_jaxpr: the residual i, the cotangent g, then Ref{f64[5,3]} and Ref{i32[]}; no outputs.
  EXPECT_NE(text.find("bwd_jaxpr={ lambda ; d:i32[] e:f64[3] f:Ref{f64[5,3]} g:Ref{i32[]}. let\n"
                      "          f[d] += e\n"
                      "        in () }"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace refjit
