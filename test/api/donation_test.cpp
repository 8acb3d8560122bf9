// jit's donate_argnums: a donated array may become the storage of a result (no copy), the
// donated Value is unusable afterwards on both backends, results are unchanged, and bad
// requests (a position out of range, a ref) are errors naming the function.
#include <gtest/gtest.h>

#include <string>

#include "backend/native.h"
#include "passes/buffers/buffer_assignment.h"
#include "refjit/ir/text.h"
#include "refjit/refjit.h"

namespace refjit {
namespace {

// state.at[i, :].set(state[i, :] * 2 + v): the state is updated in place and returned.
Value double_row(Value state, Value i, Value v) {
  Value row = dynamic_slice(state, {i, Value(int32_t{0})}, {1, 4});
  return dynamic_update_slice(state, row * 2.0f + v, {i, Value(int32_t{0})});
}

Value fresh_state() { return array<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}); }

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Donation, ADonatedStateBecomesTheResultWithoutACopy) {
  auto step =
      jit(double_row, {.backend = Backend::native, .name = "double_row", .donate_argnums = {0}});
  Value state = copy(fresh_state());  // storage of its own
  const std::byte* before = state.array().data();
  Value next = step(state, Value(int32_t{1}), Value(0.5f));
  EXPECT_EQ(next.array(), Array::from_vector<float>(
                              {1, 2, 3, 4, 10.5f, 12.5f, 14.5f, 16.5f, 9, 10, 11, 12}, {3, 4}));
  EXPECT_EQ(next.array().data(), before);  // the caller's array, updated in place
  // The donated Value refuses every use, naming the function.
  std::string msg = error_of([&] { state.array(); });
  EXPECT_NE(msg.find("donated to jit function `double_row`"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { step(state, Value(int32_t{0}), Value(1.0f)); }).find("donated"),
            std::string::npos);
  // Nor can a trace capture it.
  EXPECT_NE(error_of([&] {
              make_jaxpr([&](Value x) { return x + state; })(Value(1.0f));
            }).find("donated"),
            std::string::npos);
  // Chained steps keep reusing the same storage.
  Value after = step(next, Value(int32_t{0}), Value(1.0f));
  EXPECT_EQ(after.array().data(), before);
  EXPECT_EQ(after.array().as_double(0), 3.0);
}

TEST(Donation, ASharedArrayIsCopiedAndTheOtherHolderKeepsItsValues) {
  auto step = jit(double_row,
                  {.backend = Backend::native, .name = "double_row_shared", .donate_argnums = {0}});
  Value state = fresh_state();
  Array keep = state.array();  // shares the storage
  Value next = step(state, Value(int32_t{2}), Value(0.0f));
  EXPECT_NE(next.array().data(), keep.data());
  EXPECT_EQ(keep, fresh_state().array());
  EXPECT_EQ(next.array().as_double(8), 18.0);
}

TEST(Donation, TheInterpreterGivesTheSameResultsAndAlsoRetiresTheValue) {
  for (Backend b : {Backend::native, Backend::interpreter}) {
    auto step = jit(double_row, {.backend = b, .name = "double_row_both", .donate_argnums = {0}});
    Value state = copy(fresh_state());
    Value next = step(state, Value(int32_t{0}), Value(1.0f));
    EXPECT_EQ(next.array().as_double(3), 9.0);
    EXPECT_NE(error_of([&] { state.array(); }).find("donated"), std::string::npos);
  }
}

TEST(Donation, ANonDonatedArgumentIsLeftAlone) {
  auto step = jit(double_row, {.backend = Backend::native, .name = "double_row_kept"});
  Value state = copy(fresh_state());
  Value next = step(state, Value(int32_t{0}), Value(1.0f));
  EXPECT_EQ(state.array(), fresh_state().array());
  EXPECT_NE(next.array().data(), state.array().data());
}

TEST(Donation, BadRequestsAreErrorsNamingTheFunction) {
  auto past =
      jit(double_row, {.backend = Backend::native, .name = "past_end", .donate_argnums = {3}});
  std::string msg = error_of([&] { past(fresh_state(), Value(int32_t{0}), Value(1.0f)); });
  EXPECT_NE(msg.find("`past_end`"), std::string::npos) << msg;
  EXPECT_NE(msg.find("argument 3"), std::string::npos) << msg;
  auto with_ref = jit([](Ref r, Value x) { r += x; },
                      {.backend = Backend::native, .name = "ref_donor", .donate_argnums = {0}});
  Ref r = new_ref(array<float>({1, 2}, {2}));
  msg = error_of([&] { with_ref(r, array<float>({1, 1}, {2})); });
  EXPECT_NE(msg.find("holds a ref"), std::string::npos) << msg;
}

TEST(Donation, TheCompiledFunctionTakesOverAnUnsharedDonatedArgument) {
  // The backend contract underneath: a plan with donated input 0 returns it in place; given
  // the argument vector by value, the output is the argument's storage.
  Jaxpr j = parse_jaxpr(R"({ lambda ; a:f32[4] b:f32[]. let
    c:f32[4] = mul a b
  in (c,) })");
  CompileOptions o{.opt_level = 0};
  o.plan = default_buffer_plan(j, BufferOptions{.donated = {true}});
  CompiledFunction f = compile_native(j, o);
  Array a = Array::from_vector<float>({1, 2, 3, 4}, {4});
  const std::byte* p = a.data();
  std::vector<RtValue> args = {std::move(a), Array::scalar(3.0f)};
  std::vector<RtValue> out = f(std::move(args));
  EXPECT_EQ(std::get<Array>(out[0]).data(), p);
  EXPECT_EQ(std::get<Array>(out[0]), Array::from_vector<float>({3, 6, 9, 12}, {4}));
  // Called with a const vector, nothing is taken: a fresh result, the argument intact.
  Array kept = Array::from_vector<float>({1, 2, 3, 4}, {4});
  const std::vector<RtValue> same = {kept, Array::scalar(3.0f)};
  out = f(same);
  EXPECT_NE(std::get<Array>(out[0]).data(), kept.data());
  EXPECT_EQ(kept, Array::from_vector<float>({1, 2, 3, 4}, {4}));
  EXPECT_EQ(std::get<Array>(out[0]), Array::from_vector<float>({3, 6, 9, 12}, {4}));
}

}  // namespace
}  // namespace refjit
