// Machine code for the JIT: the lowered program's LLVM module optimised, compiled and linked
// in memory with LLVM ORC. A large module is compiled in pieces, one thread each: its
// functions (the entry, the outlined loops of parallel_loops.h) are dealt into modules of
// about equal size, each with its own LLVMContext, target machine and object file, and the
// JIT links the objects together. (Not mlir::ExecutionEngine: LLVM 19's ignores the code
// generation level it is given, so the fast tier ran the optimising code generator.)
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/kernels/parallel_loop.h"  // REFJIT_CALLS_JIT_CODE

namespace llvm {
class Module;
namespace orc {
class LLJIT;
}
}  // namespace llvm

namespace refjit::backend {

// The JIT code of one program.
struct LinkedCode {
  std::unique_ptr<llvm::orc::LLJIT> jit;  // owns the machine code
  // The program's packed entry: args[i] points at the i-th argument of its C-interface
  // wrapper `_mlir_ciface_refjit_main` (a memref descriptor pointer).
  void (*entry)(void** args) = nullptr;
  double codegen_ms = 0;  // code generation and linking, after the optimisation
  int codegen_level = 0;  // LLVM's code generation level: 0 (none) .. 3
  int pieces = 1;         // modules compiled side by side
};

// Optimises `module` (translated from the LLVM dialect; its context must outlive the call)
// at `opt_level`, compiles it, in pieces on up to `threads` threads when it is large, and
// links it in memory. `optimised` is called between optimisation and code generation with
// the modules' text, made on demand.
// `objects`, when given, receives the object files before they are linked (the code cache).
LinkedCode compile_and_link(
    std::unique_ptr<llvm::Module> module, int opt_level, int threads,
    const std::function<void(const std::function<std::string()>& text)>& optimised,
    std::vector<std::string>* objects = nullptr);

// Links object files `compile_and_link` made before (in this process or another, on this
// CPU) into a new JIT: the code cache's hit.
LinkedCode link_objects(const std::vector<std::string>& objects, int codegen_level);

// Calls a program's packed entry.
REFJIT_CALLS_JIT_CODE inline void call_entry(void (*entry)(void**), void** args) { entry(args); }

}  // namespace refjit::backend
