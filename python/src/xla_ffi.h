// refjit's compiled code as an XLA FFI custom call ("refjit_call"): a refjit function called
// inside jax.jit runs from XLA's compiled program, on XLA's buffers, without Python
// (python/refjit/_staging.py lowers the refjit_call primitive to it).
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "backend/native.h"
#include "refjit/ir/jaxpr.h"

namespace refjit::python {

// What the custom call runs: an Executable's code and constants, shared with it.
struct FfiProgram {
  std::shared_ptr<const CompiledFunction> compiled;  // native code, or
  std::shared_ptr<const Jaxpr> interpreted;          // the interpreter's program
  std::vector<RtValue> consts;
  std::vector<Type> in_types;
  std::vector<Type> out_types;
};

// Registers `program` for the custom call and returns the id its `program` attribute names.
// Registered programs live as long as the process: XLA's compiled code may call them at any
// time.
int64_t register_ffi_program(FfiProgram program);

// Whether this build has the XLA FFI bridge (jaxlib's headers were found at build time), and
// the handler as a PyCapsule for jax.ffi.register_ffi_target.
bool have_xla_ffi();
nanobind::object xla_ffi_handler();

}  // namespace refjit::python
