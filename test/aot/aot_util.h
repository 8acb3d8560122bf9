// Helpers for the AOT tests: compile a jaxpr to an object with refjit::compile_to_object,
// link it into a shared object with the system C compiler and dlopen it, so the tests call
// the plain C entry points exactly as a C program would.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "refjit/aot.h"
#include "refjit/ir/text.h"
#include "runtime/interpreter.h"

namespace refjit::aot_testing {

namespace fs = std::filesystem;

inline fs::path test_root() {
  if (const char* d = std::getenv("REFJIT_TEST_DATA")) return d;
  return fs::path(__FILE__).parent_path().parent_path();
}

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs a shell command; returns its exit status and standard output.
inline std::pair<int, std::string> run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, out};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

inline fs::path fresh_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  fs::path d = fs::temp_directory_path() / ("refjit_aot_" + std::to_string(::getpid()) + "_" + tag +
                                            "_" + std::to_string(counter++));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// An object compiled from a jaxpr, its header, and the shared object loaded from it.
class AotLibrary {
 public:
  AotLibrary(const Jaxpr& j, AotOptions o) {
    dir_ = fresh_dir(o.name);
    o.object_path = (dir_ / (o.name + ".o")).string();
    o.header_path = (dir_ / (o.name + ".h")).string();
    artifact_ = compile_to_object(j, o);
    object_ = o.object_path;
    header_ = o.header_path;
    fs::path so = dir_ / ("lib" + o.name + ".so");
    auto [rc, out] =
        run_command("cc -shared -o " + so.string() + " " + object_.string() + " -lm 2>&1");
    EXPECT_EQ(rc, 0) << out;
    handle_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle_, nullptr) << dlerror();
  }
  ~AotLibrary() {
    if (handle_) dlclose(handle_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  AotLibrary(const AotLibrary&) = delete;
  AotLibrary& operator=(const AotLibrary&) = delete;

  template <class Fn>
  Fn get(const std::string& symbol) const {
    void* p = handle_ ? dlsym(handle_, symbol.c_str()) : nullptr;
    EXPECT_NE(p, nullptr) << "no symbol " << symbol;
    return reinterpret_cast<Fn>(p);
  }
  const AotArtifact& artifact() const { return artifact_; }
  const fs::path& object() const { return object_; }
  const fs::path& header() const { return header_; }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_, object_, header_;
  AotArtifact artifact_;
  void* handle_ = nullptr;
};

inline const Array& arr(const RtValue& v) { return std::get<Array>(v); }
inline RtValue ref_of(Array a) { return std::make_shared<RefBuffer>(std::move(a)); }
inline const Array& ref_value(const RtValue& v) { return std::get<RefBufferPtr>(v)->value(); }

inline void expect_floats_near(std::span<const float> got, std::span<const float> want, double rtol,
                               const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rtol * std::max(1.0, std::abs(double(want[i]))))
        << what << " element " << i;
}

}  // namespace refjit::aot_testing
