// The native backend: lowers a Jaxpr to MLIR (memref level), then to LLVM IR optimised for
// the host CPU, and JIT-compiles it with LLVM ORC. This header is MLIR-free so the API layer
// and the CLI can use it without paying for MLIR's headers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/buffer_plan.h"
#include "passes/pass_report.h"
#include "refjit/ir/jaxpr.h"
#include "runtime/interpreter.h"

namespace refjit {

// Whether REFJIT_EXACT_MATH is set (to anything but 0): CompileOptions::exact_math's default.
bool exact_math_by_default();

struct CompileOptions {
  // 0 = fast tier (no LLVM IR optimisation, fast instruction selection); 1-3 = LLVM -O<n>.
  int opt_level = 3;
  // f32 exp, log, log1p, expm1, tanh, logistic, sin, cos and erf use MLIR's polynomial
  // approximations, which vectorise (errors in docs/backend.md "Transcendental functions");
  // true calls libm for each element instead. Defaults to REFJIT_EXACT_MATH=1 in the
  // environment.
  bool exact_math = exact_math_by_default();
  // Large f32/f64 dot_generals call refjit's runtime matrix kernel (runtime/kernels/gemm.h)
  // instead of inline loops. Off for `refjit compile` objects, which stand alone.
  bool runtime_kernels = true;
  // Large loops whose iterations are independent run on the runtime's threads
  // (runtime/kernels/parallel_loop.h); needs runtime_kernels. Results are the same bits
  // either way.
  bool parallel_loops = true;
  // Element loops that chain transcendental functions run in tiles, one loop per stage of the
  // chain (backend/chain_fission.h). The values are the same; a sum the loop carries
  // is grouped differently. False keeps such loops whole (to measure what the split gains).
  bool chain_fission = true;
  // Calls flush subnormal results to zero and read subnormal operands as zero, as XLA's CPU
  // backend does (runtime/kernels/float_mode.h); false computes with subnormals (IEEE), as the
  // interpreter does, at the cost of x86's slow path for them.
  bool flush_subnormals = true;
  // Where values live; empty = the buffer-assignment plan (default_buffer_plan);
  // naive_buffer_plan() gives every value its own buffer.
  BufferPlan plan = {};
  // Told about each lowering pass as it finishes: mlir, llvm-dialect, llvm, asm (the last
  // two only where they run: emit_llvm_ir/emit_asm, and the JIT, whose asm has no text).
  PassObserver after_pass;
};

// Wall time per compilation stage, in milliseconds.
struct CompileTimings {
  double passes_ms = 0;       // refjit passes before lowering: verifier, buffer plan
  double lower_ms = 0;        // Jaxpr -> memref-level MLIR (incl. fusion grouping)
  double mlir_passes_ms = 0;  // MLIR -> llvm dialect
  double llvm_opt_ms = 0;     // translation to LLVM IR + LLVM optimisation
  double codegen_ms = 0;      // machine code generation + linking in the JIT
  int opt_level = 0;          // the tier these timings are for
  int codegen_level = -1;     // the level LLVM's code generator ran at: 0 (none) .. 3
  int pieces = 1;             // LLVM modules compiled side by side, one thread each
  bool from_cache = false;    // the machine code came from the on-disk cache (no LLVM ran)

  double total_ms() const {
    return passes_ms + lower_ms + mlir_passes_ms + llvm_opt_ms + codegen_ms;
  }
};

// A JIT-compiled jaxpr. Movable, owns its machine code (released on destruction).
// Thread-compatible: concurrent calls are fine as long as they don't share ref arguments.
class CompiledFunction {
 public:
  struct Impl;
  explicit CompiledFunction(std::unique_ptr<Impl> impl);
  CompiledFunction(CompiledFunction&&) noexcept;
  CompiledFunction& operator=(CompiledFunction&&) noexcept;
  ~CompiledFunction();

  // Same contract as interpret(): one value per constvar then invar; ref arguments are
  // updated in place (their storage keeps its address). Throws refjit::Error on a wrong
  // argument count or type, naming the position.
  std::vector<RtValue> operator()(const std::vector<RtValue>& consts_then_args) const;
  // The same, taking the values over: an array argument that the buffer plan returns in
  // place (a donated input, BufferOptions::donated) becomes that result's storage when no
  // other Array shares it, instead of being copied into a fresh result.
  std::vector<RtValue> operator()(std::vector<RtValue>&& consts_then_args) const;
  // The same, writing output j into `outputs[j]` (memory of the output's type, row-major,
  // aligned to its element, not shared with an argument) instead of fresh arrays: how XLA's
  // custom call (python/src/xla_ffi.cpp) gets results in its own buffers without a copy.
  void call_into(const std::vector<RtValue>& consts_then_args, void* const* outputs) const;
  const CompileTimings& timings() const;
  // Bytes of the workspace one call uses for intermediates (0: none, or a plan without a
  // workspace). Workspaces are pooled per CompiledFunction and reused across calls.
  int64_t workspace_bytes() const;
  // How many workspaces the pool has allocated so far (1 for sequential calls).
  int workspaces_allocated() const;

 private:
  std::vector<RtValue> call(std::vector<RtValue>& args, bool take,
                            void* const* into = nullptr) const;
  std::unique_ptr<Impl> impl_;
};

// How many JIT modules (the machine code of a CompiledFunction) are alive in this process:
// +1 when compile_native creates one, -1 when its CompiledFunction is destroyed. Lets tests
// check that compiled code is released (e.g. after clear_compile_cache()).
int native_live_module_count();

// Whether the backend has a lowering rule for `p` (the rule table in backend/).
bool has_native_lowering(Prim p);

// Throws refjit::Error for a primitive the backend cannot lower yet.
CompiledFunction compile_native(const Jaxpr& jaxpr, const CompileOptions& options = {});
// Textual forms for `refjit dump --emit=mlir|llvm|asm`. The MLIR is the memref-level module
// before conversion to the LLVM dialect; the LLVM IR is after optimisation.
std::string emit_mlir(const Jaxpr& jaxpr, const CompileOptions& options = {});
std::string emit_llvm_dialect(const Jaxpr& jaxpr, const CompileOptions& options = {});
std::string emit_llvm_ir(const Jaxpr& jaxpr, const CompileOptions& options = {});
std::string emit_asm(const Jaxpr& jaxpr, const CompileOptions& options = {});

}  // namespace refjit

// ---- The pipeline stages shared by the JIT, the dumps and the object writer (aot.cpp).
// Internal to backend/; LLVM types are only forward-declared so this header stays
// MLIR/LLVM-free for its other users.
namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace refjit::backend {

// A jaxpr lowered to (unoptimised) LLVM IR: one function `refjit_main` (kEntryName) taking
// the expanded memref descriptors (allocated, aligned, offset, sizes..., strides...) of every
// constvar, invar and outvar, then of the workspace memref<?xi8> when `has_workspace`.
struct LlvmLowered {
  std::unique_ptr<llvm::Module> module;
  bool has_workspace = false;
  int64_t workspace_bytes = 0;
};

// Verifies, plans buffers, lowers to memref MLIR, runs the MLIR pipeline to the LLVM dialect
// and translates into `lctx`. Fills the passes/lower/mlir_passes timings.
LlvmLowered lower_to_llvm_ir(const Jaxpr& jaxpr, const CompileOptions& options,
                             llvm::LLVMContext& lctx, CompileTimings& timings);

// A target machine for `cpu`: "host" (this machine's CPU and all its features), "generic"
// (the architecture's baseline) or an LLVM CPU name such as "skylake" (Error if unknown).
// Position-independent code, codegen level matching `opt_level`.
std::unique_ptr<llvm::TargetMachine> make_target_machine(const std::string& cpu, int opt_level);

// Sets the module's data layout and triple from `tm` and runs LLVM's -O<opt_level> pipeline.
void optimize_llvm_module(llvm::Module& module, llvm::TargetMachine& tm, int opt_level);

// The text of an LLVM module (the `llvm` stage's dump).
std::string module_text(const llvm::Module& module);

// Machine code for `module`: a relocatable object file, or assembly text.
std::string emit_machine_code(llvm::Module& module, llvm::TargetMachine& tm, bool object_file);

}  // namespace refjit::backend
