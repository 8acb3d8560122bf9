#include "backend/code_cache.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <system_error>

#include "llvm/ADT/StringMap.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/SHA256.h"
#include "llvm/TargetParser/Host.h"
#include "refjit/compilation_cache.h"

#ifndef REFJIT_VERSION_STRING
#define REFJIT_VERSION_STRING "0.1.0"
#endif

namespace fs = std::filesystem;

namespace refjit {

namespace {

// An entry: this line, the codegen level, the number of objects, then each object's size on
// a line of its own followed by its bytes.
constexpr std::string_view kMagic = "refjit machine code 1\n";
constexpr const char* kSuffix = ".rjcode";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string default_dir() {
  if (const std::string off = env("REFJIT_CACHE"); off == "0" || off == "off") return "";
  if (std::string dir = env("REFJIT_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/refjit";
  if (std::string home = env("HOME"); !home.empty()) return home + "/.cache/refjit";
  return "";
}

int64_t max_bytes() {
  const std::string mb = env("REFJIT_CACHE_MAX_MB");
  char* end = nullptr;
  const long long v = mb.empty() ? 1024 : std::strtoll(mb.c_str(), &end, 10);
  return (end && *end) || v <= 0 ? int64_t{1024} << 20 : static_cast<int64_t>(v) << 20;
}

struct State {
  std::mutex mu;
  std::string dir = default_dir();
  std::atomic<int64_t> hits{0}, misses{0}, errors{0};
};

State& state() {
  static State s;
  return s;
}

std::string current_dir() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.dir;
}

// The host as the code generator sees it: a different CPU or feature set gets other code.
const std::string& host_description() {
  static const std::string text = [] {
    std::string t = std::string(llvm::sys::getHostCPUName()) + ";" + llvm::sys::getProcessTriple();
    llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
    std::vector<std::string> on;
    for (const auto& f : features)
      if (f.getValue()) on.push_back(f.getKey().str());
    std::sort(on.begin(), on.end());
    for (const std::string& f : on) t += "," + f;
    return t;
  }();
  return text;
}

// Keeps the directory under its bound: the entries used longest ago go first (a hit touches
// its entry).
void evict(const fs::path& dir, int64_t limit) {
  std::error_code ec;
  struct Entry {
    fs::path path;
    fs::file_time_type time;
    int64_t bytes;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != kSuffix) continue;
    const auto size = e.file_size(ec);
    if (ec) continue;
    entries.push_back({e.path(), e.last_write_time(ec), static_cast<int64_t>(size)});
    total += static_cast<int64_t>(size);
  }
  if (total <= limit) return;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.time < b.time; });
  for (const Entry& e : entries) {
    if (total <= limit * 9 / 10) break;
    if (fs::remove(e.path, ec)) total -= e.bytes;
  }
}

}  // namespace

void set_compilation_cache_dir(const std::string& dir) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.dir = dir;
}

std::string compilation_cache_dir() { return current_dir(); }

CompilationCacheStats compilation_cache_stats() {
  State& s = state();
  return {s.hits.load(), s.misses.load(), s.errors.load()};
}

namespace backend {

std::optional<std::string> code_cache_key(const std::string& module_text, int opt_level) {
  if (current_dir().empty()) return std::nullopt;
  llvm::SHA256 hash;
  // The revision of the LLVM pass pipeline (native.cpp's optimize_llvm_module): bumped when
  // a change there compiles the same module to other code, so that code cached before the
  // change is not used after it.
  constexpr int kPipelineRevision = 3;
  const char* width = std::getenv("REFJIT_VECTOR_WIDTH");  // overrides the pipeline's choice
  const std::string header =
      fmt::format("refjit {}; pipeline {}; LLVM {}; O{}; {}; width {}\n", REFJIT_VERSION_STRING,
                  kPipelineRevision, LLVM_VERSION_STRING, opt_level, host_description(),
                  width ? width : "chosen");
  hash.update(header);
  hash.update(module_text);
  std::string hex;
  for (uint8_t byte : hash.final()) hex += fmt::format("{:02x}", byte);
  return hex;
}

std::optional<CachedCode> load_cached_code(const std::string& key) {
  const std::string dir = current_dir();
  if (dir.empty()) return std::nullopt;
  const fs::path path = fs::path(dir) / (key + kSuffix);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    state().misses.fetch_add(1);
    return std::nullopt;
  }
  auto bad = [&]() -> std::optional<CachedCode> {
    // Unreadable (another format, or damaged): compiled again and overwritten.
    state().errors.fetch_add(1);
    state().misses.fetch_add(1);
    return std::nullopt;
  };
  std::string magic(kMagic.size(), '\0');
  if (!in.read(magic.data(), static_cast<std::streamsize>(magic.size())) || magic != kMagic)
    return bad();
  CachedCode code;
  size_t count = 0;
  if (!(in >> code.codegen_level >> count) || count == 0 || count > 4096) return bad();
  for (size_t k = 0; k < count; ++k) {
    size_t size = 0;
    if (!(in >> size) || in.get() != '\n' || size > (size_t{1} << 32)) return bad();
    std::string object(size, '\0');
    if (!in.read(object.data(), static_cast<std::streamsize>(size))) return bad();
    code.objects.push_back(std::move(object));
  }
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // recently used
  state().hits.fetch_add(1);
  return code;
}

void store_cached_code(const std::string& key, const CachedCode& code) {
  const std::string dir = current_dir();
  if (dir.empty()) return;
  std::error_code ec;
  fs::create_directories(dir, ec);
  // A name of this process's own, renamed into place whole: readers in other processes see
  // no entry or a complete one.
  static std::atomic<uint64_t> counter{0};
  const fs::path final_path = fs::path(dir) / (key + kSuffix);
  const fs::path temp =
      fs::path(dir) / fmt::format(".{}.{}.{}.tmp", key, ::getpid(), counter.fetch_add(1));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << kMagic << code.codegen_level << ' ' << code.objects.size() << ' ';
    for (const std::string& object : code.objects) {
      out << object.size() << '\n';
      out.write(object.data(), static_cast<std::streamsize>(object.size()));
    }
    if (!out.flush()) {
      state().errors.fetch_add(1);
      fs::remove(temp, ec);
      return;
    }
  }
  fs::rename(temp, final_path, ec);
  if (ec) {
    state().errors.fetch_add(1);
    fs::remove(temp, ec);
    return;
  }
  evict(dir, max_bytes());
}

}  // namespace backend

}  // namespace refjit
