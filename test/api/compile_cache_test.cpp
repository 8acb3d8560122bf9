// Compiled code is released when its compile-cache entry goes: counted through the native
// backend's live JIT modules (so LeakSanitizer and long-running processes don't accumulate
// machine code).
#include <gtest/gtest.h>

#include <utility>

#include "backend/native.h"
#include "refjit/ir/text.h"
#include "refjit/refjit.h"

namespace refjit {
namespace {

JitOptions native_fast(const char* name) {
  return JitOptions{.backend = Backend::native, .tier = Tier::fast, .name = name};
}

TEST(CompileCache, ACompiledFunctionCountsAsOneLiveModuleUntilDestroyed) {
  Jaxpr j = parse_jaxpr("{ lambda ; a:f32[3]. let b:f32[3] = sin a in (b,) }");
  const int before = native_live_module_count();
  {
    CompiledFunction f = compile_native(j, CompileOptions{.opt_level = 0});
    EXPECT_EQ(native_live_module_count(), before + 1);
    CompiledFunction moved = std::move(f);  // a move transfers the module, no new one
    EXPECT_EQ(native_live_module_count(), before + 1);
  }
  EXPECT_EQ(native_live_module_count(), before);
}

TEST(CompileCache, ClearingTheCacheReleasesTheCodeOfDestroyedJitFunctions) {
  clear_compile_cache();
  const int before = native_live_module_count();
  EXPECT_EQ(compile_cache_size(), 0);
  {
    auto inc = jit([](Value x) { return x + 1; }, native_fast("inc"));
    auto dbl = jit([](Value x) { return x * 2; }, native_fast("dbl"));
    auto sn = jit([](Value x) { return sin(x); }, native_fast("sn"));
    EXPECT_EQ(inc(1.0f).item(), 2.0);
    EXPECT_EQ(dbl(1.0f).item(), 2.0);
    EXPECT_EQ(sn(0.0f).item(), 0.0);
    EXPECT_EQ(inc(ones({4})).array(), Array::full(ArrayType{DType::f32, {4}}, 2.0));
    EXPECT_EQ(native_live_module_count(), before + 4);
    EXPECT_EQ(compile_cache_size(), 4);
  }
  // Destroying the jit functions leaves their code in the process-wide cache...
  EXPECT_EQ(native_live_module_count(), before + 4);
  // ...until it is cleared.
  clear_compile_cache();
  EXPECT_EQ(native_live_module_count(), before);
  EXPECT_EQ(compile_cache_size(), 0);
}

TEST(CompileCache, ClearingTheCacheReleasesTheCodeOfLiveJitFunctionsWhichRecompile) {
  clear_compile_cache();
  const int before = native_live_module_count();
  auto inc = jit([](Value x) { return x + 1; }, native_fast("inc"));
  EXPECT_EQ(inc(1.0f).item(), 2.0);
  EXPECT_EQ(native_live_module_count(), before + 1);
  EXPECT_EQ(inc.compile_count(), 1);
  clear_compile_cache();
  EXPECT_EQ(native_live_module_count(), before);
  EXPECT_EQ(inc(5.0f).item(), 6.0);  // compiles again
  EXPECT_EQ(inc.compile_count(), 2);
  EXPECT_EQ(native_live_module_count(), before + 1);
  clear_compile_cache();
  EXPECT_EQ(native_live_module_count(), before);
}

TEST(CompileCache, BothTiersOfAHotFunctionAreReleased) {
  clear_compile_cache();
  const int before = native_live_module_count();
  auto f = jit([](Value x) { return x * x; },
               JitOptions{.backend = Backend::native, .tier = Tier::adaptive, .name = "sq"});
  for (int k = 0; k < kHotCallThreshold + 1; ++k) EXPECT_EQ(f(3.0f).item(), 9.0);
  EXPECT_EQ(f.compile_count(), 2);  // -O0, then -O3 once hot
  EXPECT_EQ(native_live_module_count(), before + 2);
  clear_compile_cache();
  EXPECT_EQ(native_live_module_count(), before);
}

TEST(CompileCache, AJitFunctionSharesCodeCompiledByAnotherUntilCleared) {
  clear_compile_cache();
  const int before = native_live_module_count();
  auto a = jit([](Value x) { return x - 1; }, native_fast("same"));
  auto b = jit([](Value x) { return x - 1; }, native_fast("same"));
  EXPECT_EQ(a(2.0f).item(), 1.0);
  EXPECT_EQ(b(3.0f).item(), 2.0);
  EXPECT_EQ(a.compile_count() + b.compile_count(), 1);  // b reused a's code
  EXPECT_EQ(native_live_module_count(), before + 1);
  clear_compile_cache();
  EXPECT_EQ(native_live_module_count(), before);
}

}  // namespace
}  // namespace refjit
