// The on-disk compilation cache (docs/backend.md "Compilation cache"). Native code is kept on
// disk, so another process (or this one, after clear_compile_cache) that compiles the same
// program on the same CPU links the stored machine code instead of running LLVM. On by
// default, in $REFJIT_CACHE_DIR, else $XDG_CACHE_HOME/refjit, else $HOME/.cache/refjit;
// REFJIT_CACHE=0 turns it off; REFJIT_CACHE_MAX_MB bounds its size (1024 by default; the least
// recently used entries go first).
#pragma once

#include <cstdint>
#include <string>

namespace refjit {

// Where the cache lives; an empty string turns it off (for this process).
void set_compilation_cache_dir(const std::string& dir);
std::string compilation_cache_dir();

struct CompilationCacheStats {
  int64_t hits = 0;    // compiles answered from disk
  int64_t misses = 0;  // compiles that ran LLVM (and stored their code)
  int64_t errors = 0;  // entries that could not be written or read back (then compiled)
};
CompilationCacheStats compilation_cache_stats();

}  // namespace refjit
