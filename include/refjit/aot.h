// Ahead-of-time compilation: a jaxpr (or its gradient, VJP or JVP) to a relocatable object
// file with plain C entry points, plus a C header declaring them (docs/aot.md).
//
// The object needs no refjit runtime: it depends only on libc (malloc/free, memcpy, ...)
// and libm. Link it with `cc main.c NAME.o -lm`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// Which program the object computes.
enum class AotMode {
  function,  // the jaxpr itself: one entry point SYMBOL
  grad,      // its gradient (one float scalar output): SYMBOL returns the output, then grads
  vjp,       // two entry points SYMBOL_fwd and SYMBOL_bwd sharing a residual struct
  jvp,       // forward mode: SYMBOL takes primals and tangents, returns outputs and tangents
};

// The gradient accumulator of one invar in AotMode::vjp.
enum class AotAccum {
  value,      // SYMBOL_bwd writes the gradient into an output pointer
  ref,        // SYMBOL_bwd adds the gradient into an in/out pointer (+=)
  dont_want,  // no gradient, no parameter
};

struct AotOptions {
  // The entry point's C name (AotMode::vjp: the prefix of SYMBOL_fwd/SYMBOL_bwd and of the
  // residual struct SYMBOL_residuals). Must be a C identifier.
  std::string name;
  // "host" (this machine's CPU and all its features), "generic" (the baseline of the
  // architecture, runs on any x86-64), or an LLVM CPU name ("x86-64-v3", "skylake", ...).
  std::string cpu = "host";
  int opt_level = 3;  // LLVM -O<n>, 0..3
  // libm for every transcendental (CompileOptions::exact_math); REFJIT_EXACT_MATH=1 in the
  // environment turns it on for every compile, as for the other doors.
  bool exact_math = false;
  AotMode mode = AotMode::function;
  // AotMode::grad: invar positions to differentiate; empty = every float, non-ref invar.
  std::vector<int> wrt;
  // AotMode::vjp: one accumulator per invar; empty = `value` for every float non-ref invar
  // and `dont_want` for the others.
  std::vector<AotAccum> accum;
  // Where to write the object and the header (nothing is written for an empty path).
  std::string object_path;
  std::string header_path;
  // Named in the header's first comment (e.g. the jaxpr file); optional.
  std::string source_name;
};

struct AotArtifact {
  std::string object;                // the relocatable object file's bytes
  std::string header;                // the C header's text
  std::vector<std::string> symbols;  // the entry points the object defines, in header order
  // AotMode::vjp: sizeof(SYMBOL_residuals), the struct SYMBOL_fwd fills (0 otherwise).
  int64_t residual_bytes = 0;
};

// Compiles and (with non-empty paths) writes the object and the header. Throws
// refjit::Error for a bad name, CPU, accumulator list or a program the backend cannot
// compile (the message says which), TypeError/RefError for an ill-typed program.
AotArtifact compile_to_object(const Jaxpr& jaxpr, const AotOptions& options);

// Whether `name` can be used as a C identifier for an entry point (not a keyword).
bool is_c_identifier(const std::string& name);

}  // namespace refjit
