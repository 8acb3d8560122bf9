// jit on the native backend: compile cache, tiers, stage timings, backend selection, and
// refs updated in place in the caller's buffer.
#include <gtest/gtest.h>

#include <cstdlib>

#include "api/node.h"
#include "refjit/refjit.h"

namespace refjit {
namespace {

Value poly(Value x) { return add(mul(sin(x), x), 2.0f); }

Array expected_poly(const Array& x) {
  std::vector<float> v;
  for (int64_t i = 0; i < x.size(); ++i) {
    float e = static_cast<float>(x.as_double(i));
    v.push_back(std::sin(e) * e + 2.0f);
  }
  return Array::from_vector<float>(v, x.shape());
}

void expect_near(const Array& got, const Array& want) {
  ASSERT_EQ(got.type(), want.type());
  for (int64_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got.as_double(i), want.as_double(i), 1e-6) << "element " << i;
}

TEST(JitNative, SecondCallWithTheSameSignatureDoesNotRecompile) {
  auto f = jit(poly, JitOptions{.tier = Tier::fast, .name = "poly_once"});
  Array x = Array::from_vector<float>({0.5f, -1, 2, 3.25f}, {4});
  int before = native_compile_count();
  expect_near(f(Value(x)).array(), expected_poly(x));
  expect_near(f(Value(x)).array(), expected_poly(x));
  EXPECT_EQ(f.compile_count(), 1);
  EXPECT_EQ(native_compile_count(), before + 1);
  // A new signature is a new jaxpr: one more compilation.
  Array y = Array::from_vector<float>({1, 2}, {2});
  expect_near(f(Value(y)).array(), expected_poly(y));
  EXPECT_EQ(f.compile_count(), 2);
}

TEST(JitNative, StructurallyEqualJaxprsShareCompiledCode) {
  auto a = jit([](Value x) { return mul(exp(x), 3.0f); }, JitOptions{.tier = Tier::fast});
  auto b = jit([](Value x) { return mul(exp(x), 3.0f); }, JitOptions{.tier = Tier::fast});
  Array x = Array::from_vector<float>({0.25f, 1.5f, -2}, {3});
  Array ya = a(Value(x)).array();
  Array yb = b(Value(x)).array();
  EXPECT_EQ(a.compile_count(), 1);
  EXPECT_EQ(b.compile_count(), 0);  // found in the structural cache
  EXPECT_EQ(ya, yb);
}

TEST(JitNative, AdaptiveTierRecompilesAtO3WhenHot) {
  auto f = jit([](Value x) { return add(mul(x, x), 1.0f); }, "hot");
  Array x = Array::from_vector<float>({1, 2, 3}, {3});
  f(Value(x));
  EXPECT_EQ(f.compile_count(), 1);
  EXPECT_EQ(f.last_compile_timings().opt_level, 0);
  for (int i = 1; i < kHotCallThreshold - 1; ++i) f(Value(x));
  EXPECT_EQ(f.compile_count(), 1);
  Array y = f(Value(x)).array();  // call number kHotCallThreshold
  EXPECT_EQ(f.compile_count(), 2);
  EXPECT_EQ(f.last_compile_timings().opt_level, 3);
  EXPECT_EQ(y, Array::from_vector<float>({2, 5, 10}, {3}));
  f(Value(x));
  EXPECT_EQ(f.compile_count(), 2);
}

TEST(JitNative, LastCompileTimingsCoverEveryStage) {
  // LLVM must run: a hit in the on-disk cache would skip it (then llvm_opt_ms is 0).
  const std::string previous_cache = compilation_cache_dir();
  set_compilation_cache_dir("");
  auto f = jit([](Value x) { return cos(add(x, 1.0f)); }, JitOptions{.tier = Tier::optimized});
  EXPECT_EQ(f.last_compile_timings().opt_level, -1);
  f(Value(Array::from_vector<float>({1, 2}, {2})));
  CompileStageTimings t = f.last_compile_timings();
  EXPECT_EQ(t.opt_level, 3);
  EXPECT_GT(t.trace_ms, 0);
  EXPECT_GT(t.passes_ms, 0);
  EXPECT_GT(t.lower_ms, 0);
  EXPECT_GT(t.mlir_passes_ms, 0);
  EXPECT_GT(t.llvm_opt_ms, 0);
  EXPECT_GT(t.codegen_ms, 0);
  EXPECT_NEAR(
      t.total_ms(),
      t.trace_ms + t.passes_ms + t.lower_ms + t.mlir_passes_ms + t.llvm_opt_ms + t.codegen_ms,
      1e-9);
  set_compilation_cache_dir(previous_cache);
}

TEST(JitNative, InterpreterBackendNeverCompiles) {
  auto f = jit(poly, JitOptions{.backend = Backend::interpreter});
  Array x = Array::from_vector<float>({0.5f, 4}, {2});
  int before = native_compile_count();
  expect_near(f(Value(x)).array(), expected_poly(x));
  EXPECT_EQ(f.compile_count(), 0);
  EXPECT_EQ(native_compile_count(), before);
}

TEST(JitNative, EnvironmentVariableSelectsTheInterpreter) {
  // A function no other test compiles, so the structural cache cannot serve it.
  auto f = jit([](Value x) { return sub(x, 0.125f); }, "env");
  Array x = Array::from_vector<float>({7, 8}, {2});
  Array want = Array::from_vector<float>({6.875f, 7.875f}, {2});
  ::setenv("REFJIT_BACKEND", "interpreter", 1);
  EXPECT_EQ(f(Value(x)).array(), want);
  ::unsetenv("REFJIT_BACKEND");
  EXPECT_EQ(f.compile_count(), 0);
  EXPECT_EQ(f(Value(x)).array(), want);
  EXPECT_EQ(f.compile_count(), 1);
}

TEST(JitNative, EagerOpsStayOnTheInterpreter) {
  int before = native_compile_count();
  Value y = poly(Value(Array::from_vector<float>({1, 2}, {2})));
  EXPECT_EQ(native_compile_count(), before);
  expect_near(y.array(), expected_poly(Array::from_vector<float>({1, 2}, {2})));
}

TEST(JitNative, RefArgumentIsUpdatedInPlaceInTheCallersBuffer) {
  auto step = jit(
      [](Ref acc, Value x) {
        acc[Slice{0, 2}] += x;
        return acc.get(0);
      },
      JitOptions{.tier = Tier::fast});
  Ref acc = new_ref(Value(Array::from_vector<float>({1, 2, 3}, {3})));
  // The RefBuffer's storage (Ref::value() returns a copy).
  auto storage = [&] { return detail::node_of(acc)->buffer->value().data(); };
  const std::byte* before = storage();
  Value first = step(acc, Value(Array::from_vector<float>({10, 20}, {2})));
  step(acc, Value(Array::from_vector<float>({100, 200}, {2})));
  EXPECT_EQ(step.compile_count(), 1);
  EXPECT_EQ(storage(), before);
  EXPECT_EQ(acc.value(), Array::from_vector<float>({111, 222, 3}, {3}));
  EXPECT_EQ(first.array(), Array::scalar(11.0f));
}

}  // namespace
}  // namespace refjit
