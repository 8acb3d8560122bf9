// The object writer behind `refjit compile` and refjit::compile_to_object (include/refjit/
// aot.h). MLIR-free. The implementation (aot.cpp) reuses the native backend's pipeline
// (native.h: lower_to_llvm_ir, make_target_machine, optimize_llvm_module,
// emit_machine_code) and adds, per entry point, a plain C function wrapping the memref
// calling convention of `refjit_main`.
//
// The C ABI (docs/aot.md): parameters are the constvars, then the invars (by value for a
// rank-0 non-ref input, `const T*` for other inputs, `T*` for refs, updated in place), then
// one `T*` per output; every array is dense and row-major; the return value is a status code
// (REFJIT_AOT_OK = 0). Scratch memory is malloc'ed and freed inside each call.
#pragma once

#include "refjit/aot.h"
