// The native backend: lowers a Jaxpr to MLIR (memref level), then to LLVM IR optimised for
// the host CPU, and JIT-compiles it with LLVM ORC. This header is MLIR-free so the API layer
// and the CLI can use it without paying for MLIR's headers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/backend/buffer_plan.h"
#include "refjit/ir/jaxpr.h"
#include "runtime/interpreter.h"

namespace refjit {

struct CompileOptions {
  // 0 = fast tier (no LLVM IR optimisation, fast instruction selection); 1-3 = LLVM -O<n>.
  int opt_level = 3;
  // Replace exp/log/sin/cos/tanh/... by MLIR's polynomial approximations (vectorisable,
  // ~1e-7 relative error) instead of libm calls.
  bool fast_math_approx = false;
  // Where values live; the default gives every value its own buffer.
  BufferPlan plan = {};
};

// Wall time per compilation stage, in milliseconds.
struct CompileTimings {
  double passes_ms = 0;       // refjit passes before lowering: verifier, buffer plan
  double lower_ms = 0;        // Jaxpr -> memref-level MLIR (incl. fusion grouping)
  double mlir_passes_ms = 0;  // MLIR -> llvm dialect
  double llvm_opt_ms = 0;     // translation to LLVM IR + LLVM optimisation
  double codegen_ms = 0;      // machine code generation + linking in the JIT
  int opt_level = 0;          // the tier these timings are for

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
  const CompileTimings& timings() const;
  // Bytes of the workspace one call uses for intermediates (0: none, or a plan without a
  // workspace). Workspaces are pooled per CompiledFunction and reused across calls.
  int64_t workspace_bytes() const;
  // How many workspaces the pool has allocated so far (1 for sequential calls).
  int workspaces_allocated() const;

 private:
  std::unique_ptr<Impl> impl_;
};

// Throws refjit::Error for a primitive the backend cannot lower yet.
CompiledFunction compile_native(const Jaxpr& jaxpr, const CompileOptions& options = {});
// Textual forms for `refjit dump --emit=mlir|llvm|asm`. The MLIR is the memref-level module
// before conversion to the LLVM dialect; the LLVM IR is after optimisation.
std::string emit_mlir(const Jaxpr& jaxpr, const CompileOptions& options = {});
std::string emit_llvm_ir(const Jaxpr& jaxpr, const CompileOptions& options = {});
std::string emit_asm(const Jaxpr& jaxpr, const CompileOptions& options = {});

}  // namespace refjit
