// A compiled program callable from Python: the native code (or the reference interpreter)
// of one jaxpr, its constants bound, taking and returning NumPy arrays.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/native.h"
#include "python/src/xla_ffi.h"
#include "refjit/ir/jaxpr.h"
#include "runtime/interpreter.h"

namespace refjit::python {

struct ExecutableOptions {
  bool interpret = false;     // the reference interpreter instead of native code
  std::vector<bool> donated;  // per invar: the caller gives the array up (donate_argnums)
  bool exact_math = false;    // libm for every transcendental function
  int opt_level = 3;          // LLVM -O<n>
};

// The constants' values as the runtime holds them: copies of `consts` (one array per
// constvar of `program`, type-checked), so that the caller may change its arrays later.
std::vector<RtValue> const_values(const Jaxpr& program, const nanobind::list& consts);

class Executable {
 public:
  // Compiles `program` for the values of its constvars (`consts`, one per constvar), which
  // the native code is specialised to (all-zero constants folded in, index ranges used).
  Executable(const Jaxpr& program, const nanobind::list& consts, ExecutableOptions options);

  // Runs on one NumPy array per invar. A Ref-typed invar takes a writable array that is
  // updated in place (a gradient accumulator). Returns one NumPy array per output.
  nanobind::list call(const nanobind::list& args) const;

  int num_inputs() const { return static_cast<int>(in_types_.size()); }
  // Bytes of scratch memory one call uses (0 for the interpreter).
  int64_t workspace_bytes() const { return compiled_ ? compiled_->workspace_bytes() : 0; }
  double compile_ms() const { return compile_ms_; }
  // The id under which XLA's custom call "refjit_call" runs this code (python/src/xla_ffi.h),
  // registered on first use.
  int64_t ffi_id();

 private:
  std::optional<Jaxpr> interpreted_;                  // the interpreter's program
  std::shared_ptr<const CompiledFunction> compiled_;  // or the native code
  std::vector<RtValue> consts_;                       // the constants the code still takes
  std::vector<Type> in_types_, out_types_;
  std::vector<std::string> argument_names_;  // "argument k", for messages (made once)
  std::optional<int64_t> ffi_id_;
  std::vector<bool> donated_;
  double compile_ms_ = 0;
};

}  // namespace refjit::python
