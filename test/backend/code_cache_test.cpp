// The on-disk compilation cache (backend/code_cache.h): a second compile of a program
// links the stored machine code instead of running LLVM, with the same results; another
// program or level is a miss; a damaged entry is compiled again; the directory stays under
// its bound; an empty directory turns the cache off.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "refjit/compilation_cache.h"
#include "test_util.h"

namespace refjit::testing {
namespace {

namespace fs = std::filesystem;

// A cache directory of this test's own, restored to the previous one afterwards.
class CodeCache : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = compilation_cache_dir();
    dir_ = fs::temp_directory_path() / fmt::format("refjit-cache-test-{}", ::getpid());
    fs::remove_all(dir_);
    set_compilation_cache_dir(dir_.string());
  }
  void TearDown() override {
    set_compilation_cache_dir(previous_);
    fs::remove_all(dir_);
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    if (fs::exists(dir_))
      for (const auto& e : fs::directory_iterator(dir_))
        if (e.path().extension() == ".rjcode") out.push_back(e.path());
    return out;
  }

  fs::path dir_;
  std::string previous_;
};

const char* kProgram =
    "{ lambda ; x:f32[64] y:f32[64]. let a:f32[64] = mul x y b:f32[64] = sin a "
    "c:f32[] = reduce_sum[axes=(0,)] b in (c, a) }";

std::vector<RtValue> inputs() {
  return {random_array(at(DType::f32, {64}), 1), random_array(at(DType::f32, {64}), 2)};
}

TEST_F(CodeCache, ASecondCompileLinksTheStoredCode) {
  const Jaxpr j = parse_jaxpr(kProgram);
  const CompilationCacheStats before = compilation_cache_stats();
  CompiledFunction first = compile_native(j, {.opt_level = 2});
  EXPECT_FALSE(first.timings().from_cache);
  ASSERT_EQ(entries().size(), 1u);
  CompiledFunction second = compile_native(j, {.opt_level = 2});
  EXPECT_TRUE(second.timings().from_cache);
  EXPECT_EQ(second.timings().llvm_opt_ms, 0);
  const CompilationCacheStats after = compilation_cache_stats();
  EXPECT_EQ(after.misses - before.misses, 1);
  EXPECT_EQ(after.hits - before.hits, 1);
  const std::vector<RtValue> a = first(inputs()), b = second(inputs());
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) expect_close(as_array(a[i]), as_array(b[i]), 0, "");
  // Another level, another program: other entries.
  EXPECT_FALSE(compile_native(j, {.opt_level = 0}).timings().from_cache);
  EXPECT_FALSE(
      compile_native(parse_jaxpr("{ lambda ; x:f32[3]. let y:f32[3] = cos x in (y,) }"), {})
          .timings()
          .from_cache);
  EXPECT_EQ(entries().size(), 3u);
}

TEST_F(CodeCache, ADamagedEntryIsCompiledAgain) {
  const Jaxpr j = parse_jaxpr(kProgram);
  CompiledFunction first = compile_native(j, {});
  ASSERT_EQ(entries().size(), 1u);
  {
    std::ofstream damage(entries()[0], std::ios::binary | std::ios::trunc);
    damage << "refjit machine code 1\n3 2 100\nnot an object";
  }
  const CompilationCacheStats before = compilation_cache_stats();
  CompiledFunction again = compile_native(j, {});
  EXPECT_FALSE(again.timings().from_cache);
  EXPECT_EQ(compilation_cache_stats().errors - before.errors, 1);
  const std::vector<RtValue> a = first(inputs()), b = again(inputs());
  expect_close(as_array(a[0]), as_array(b[0]), 0, "");
  // The entry was written again, whole: the next compile hits.
  EXPECT_TRUE(compile_native(j, {}).timings().from_cache);
}

TEST_F(CodeCache, TheLeastRecentlyUsedEntriesGoPastTheBound) {
  fs::create_directories(dir_);
  const fs::path old = dir_ / "0000-old.rjcode";
  {
    std::ofstream big(old, std::ios::binary);
    big << std::string(3 << 20, 'x');  // 3 MB, the oldest entry
  }
  fs::last_write_time(old, fs::file_time_type::clock::now() - std::chrono::hours(1));
  ::setenv("REFJIT_CACHE_MAX_MB", "2", 1);
  compile_native(parse_jaxpr(kProgram), {});
  ::unsetenv("REFJIT_CACHE_MAX_MB");
  EXPECT_FALSE(fs::exists(old));
  EXPECT_EQ(entries().size(), 1u);
}

TEST_F(CodeCache, AnEmptyDirectoryTurnsItOff) {
  set_compilation_cache_dir("");
  const CompilationCacheStats before = compilation_cache_stats();
  CompiledFunction f = compile_native(parse_jaxpr(kProgram), {});
  EXPECT_FALSE(f.timings().from_cache);
  EXPECT_TRUE(entries().empty());
  const CompilationCacheStats after = compilation_cache_stats();
  EXPECT_EQ(after.misses, before.misses);
  EXPECT_EQ(after.hits, before.hits);
}

}  // namespace
}  // namespace refjit::testing
