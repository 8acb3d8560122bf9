// discharge_state (refjit/discharge.h): a traced function with refs, discharged into a pure
// jaxpr, computes the original's outputs and returns what the original leaves in its refs.
#include <gtest/gtest.h>

#include "refjit/refjit.h"

namespace refjit {
namespace {

bool has_refs(const ClosedJaxpr& j) { return j.str().find("Ref{") != std::string::npos; }

std::vector<Value> values(const std::vector<Operand>& xs) {
  std::vector<Value> out;
  for (const Operand& x : xs) out.push_back(std::get<Value>(x));
  return out;
}

// Writes at a dynamic row, accumulates through an index array, scans with the ref captured,
// and reads a strided window: every kind of access.
std::vector<Value> program(const Ref& state, const Value& row, const Value& idx, const Value& upd) {
  Value old = state.get(row);
  state[row] = old * 2.0f;
  state[idx] += upd;
  Value xs = array<float>({1, 2, 3});
  auto [total, ys] = scan(
      [&](Value c, Value x) {
        state[1] += x;
        return std::pair{c + state.get(1)[0], x * c};
      },
      0.0f, xs);
  Value window = state.get(slice(0, 4, 2));
  return {total, ys, window};
}

TEST(Discharge, ComputesTheOutputsAndTheRefsFinalValues) {
  const Value init = array<float>({1, 2, 3, 4, 5, 6, 7, 8}, {4, 2});
  const Value row = Value(int32_t{2}), idx = array<int32_t>({3, 0, 3});
  const Value upd = array<float>({10, 20, 30, 40, 50, 60}, {3, 2});

  Ref r = new_ref(init);
  std::vector<Value> want = program(r, row, idx, upd);

  ClosedJaxpr traced = make_jaxpr([](const Ref& s, const Value& a, const Value& b, const Value& c) {
    return program(s, a, b, c);
  })(new_ref(init), row, idx, upd);
  ASSERT_TRUE(has_refs(traced));
  ClosedJaxpr pure = discharge_state(traced);
  EXPECT_FALSE(has_refs(pure)) << pure;
  std::vector<Operand> got = pure.call(std::vector<Operand>{init, row, idx, upd});
  ASSERT_EQ(got.size(), want.size() + 1);  // the outputs, then the ref's final value
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_EQ(std::get<Value>(got[k]).array(), want[k].array()) << "output " << k;
  EXPECT_EQ(std::get<Value>(got.back()).array(), r.value());

  // The same under jit, natively compiled.
  auto compiled = jit([&](const Value& a, const Value& b, const Value& c, const Value& d) {
    return values(pure.call(std::vector<Operand>{a, b, c, d}));
  });
  std::vector<Value> native = compiled(init, row, idx, upd);
  ASSERT_EQ(native.size(), want.size() + 1);
  EXPECT_EQ(native.back().array(), r.value());
}

TEST(Discharge, CapturedRefsBecomeTheirCurrentValueAndComeBackLast) {
  Ref counter = new_ref(array<float>({5, 5}));
  ClosedJaxpr traced = make_jaxpr([&](const Value& x) {
    counter[0] += x;
    return counter.get(1) * x;
  })(Value(2.0f));
  ClosedJaxpr pure = discharge_state(traced);
  EXPECT_FALSE(has_refs(pure)) << pure;
  std::vector<Operand> got = pure.call(std::vector<Operand>{Value(3.0f)});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(std::get<Value>(got[0]).array(), Array::scalar(15.0f));
  EXPECT_EQ(std::get<Value>(got[1]).array(), array<float>({8, 5}).array());
  EXPECT_EQ(counter.value(), array<float>({5, 5}).array());  // the original is untouched
}

TEST(Discharge, WhileLoopRefsBecomeCarries) {
  // Doubles a ref until its first element passes a bound the condition reads from a ref.
  auto f = [](const Ref& acc, const Ref& bound) {
    return while_loop([&](Value n) { return acc.get(0) < bound.get(); },
                      [&](Value n) {
                        acc[ellipsis] = acc.get() * 2.0f;
                        return n + 1;
                      },
                      Value(int32_t{0}));
  };
  ClosedJaxpr traced = make_jaxpr(f)(new_ref(array<float>({1, 3})), new_ref(Value(20.0f)));
  ClosedJaxpr pure = discharge_state(traced);
  EXPECT_FALSE(has_refs(pure)) << pure;
  std::vector<Operand> got = pure.call(std::vector<Operand>{array<float>({1, 3}), Value(20.0f)});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(std::get<Value>(got[0]).array(), Array::scalar(int32_t{5}));
  EXPECT_EQ(std::get<Value>(got[1]).array(), array<float>({32, 96}).array());
  EXPECT_EQ(std::get<Value>(got[2]).array(), Array::scalar(20.0f));
}

TEST(Discharge, CondAndScannedOverRefRows) {
  auto f = [](const Ref& m, const Value& flag) {
    foreach (m) ([](Ref row) { row[1] += row.get(0); });
    return cond(
        flag, [&] { return m.get(0); },
        [&] {
          m[0] = zeros({2});
          return m.get(1);
        });
  };
  const Value init = array<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  for (bool flag : {true, false}) {
    Ref r = new_ref(init);
    Value want = f(r, Value(flag));
    ClosedJaxpr pure = discharge_state(make_jaxpr(f)(new_ref(init), Value(flag)));
    EXPECT_FALSE(has_refs(pure)) << pure;
    std::vector<Operand> got = pure.call(std::vector<Operand>{init, Value(flag)});
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(std::get<Value>(got[0]).array(), want.array()) << flag;
    EXPECT_EQ(std::get<Value>(got[1]).array(), r.value()) << flag;
  }
}

}  // namespace
}  // namespace refjit
