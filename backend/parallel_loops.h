// Outlined loops. Parallel loops: the lowering marks an scf.for whose iterations are
// independent (each writes only its own elements) with kParallelAttr, and
// outline_parallel_loops then moves each marked loop's body into a function over a range of
// iterations, `(ctx, lo, hi)`, and replaces the loop by a call of refjit_parallel_for
// (runtime/kernels/parallel_loop.h) with the loop's live-in values packed into a stack
// context. Large loops: outline_large_loops moves each large top-level loop into such a
// function too, called directly over the whole range, so that a large program is several
// functions LLVM can compile on several threads (jit_link.h). The `mlir` stage
// shows the result: the functions are named refjit_parallel_body_N and refjit_loop_body_N.
#pragma once

#include <cstdint>

namespace mlir {
class ModuleOp;
}

namespace refjit::backend {

// The attribute on a parallel scf.for: an i64, the fewest iterations worth a task of their own.
inline constexpr const char* kParallelAttr = "refjit.parallel";

// The attribute on the row loop of a matrix-product epilogue (product_epilogues.h), which
// the lowering places right before the refjit_gemm_* call it belongs to.
inline constexpr const char* kEpilogueAttr = "refjit.epilogue";

// Element count from which a loop nest is worth running on several threads: waking a worker
// costs microseconds, about as much as a few thousand elements of simple arithmetic.
inline constexpr int64_t kParallelMinElements = int64_t{1} << 17;

// Outlines every marked loop that is not inside another marked one. A loop whose bounds are
// not the constants 0 and n with step 1, or whose live-ins have a type the context cannot
// carry, stays serial (its mark is removed).
void outline_parallel_loops(mlir::ModuleOp module);

// Outlines every epilogue loop into a function `refjit_epilogue_N(ctx, lo, hi)` over rows and
// replaces the kernel call after it by the `_then` entry that takes the function and its
// context (runtime/kernels/gemm.h), so the kernel runs it on rows as they are final. Run before
// outline_parallel_loops. A loop that cannot be outlined (see there) is moved after the call
// and runs as an ordinary loop.
void outline_epilogues(mlir::ModuleOp module);

// Operations (counted recursively) from which a top-level loop is worth a function of its own.
inline constexpr int64_t kOutlineMinOps = 150;

// Outlines every loop directly in a function's body with at least kOutlineMinOps operations,
// called directly; run after outline_parallel_loops. A loop whose live-ins cannot be carried
// (a parallel loop's context) or whose bounds are not 0 and n with step 1 stays.
void outline_large_loops(mlir::ModuleOp module);

}  // namespace refjit::backend
