// The on-disk cache of compiled machine code (docs/backend.md "Compilation cache"): the object
// files of a program, keyed on its LLVM-dialect module text, the optimisation level, the CPU
// (name and features), LLVM's version and refjit's. A hit skips LLVM's optimisation and code
// generation (over 95% of a compile); the refjit passes and the MLIR lowering still run, so a
// change to any of them changes the key. Entries are written to a temporary file and renamed,
// so processes filling one directory at once never read half an entry; the directory is kept
// under its size bound by removing the least recently used entries.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace refjit::backend {

struct CachedCode {
  std::vector<std::string> objects;  // the object files, linked together by link_objects
  int codegen_level = 0;
};

// The key of a module (hex SHA-256), or nullopt when the cache is off.
std::optional<std::string> code_cache_key(const std::string& module_text, int opt_level);

// The entry of `key`, or nullopt (absent, unreadable or from another format: a miss).
std::optional<CachedCode> load_cached_code(const std::string& key);

// Stores an entry; a failure to write is counted (stats().errors), never thrown.
void store_cached_code(const std::string& key, const CachedCode& code);

}  // namespace refjit::backend
