// Ref accesses through a flattened view (passes/ad/cotangent_ref.h): the transpose of a
// scatter on reshape(carry, [n]) reads and writes the carry's cotangent ref R with one index
// array per dim of R, the row-major split of clamp(x, 0, |R| - 1). When x is a unit run
// (passes/simplify/unit_run.h) starting at x0 with 0 <= x0 <= |R| - n, that access is the
// contiguous run R_flat[x0 : x0 + n]: one memmove instead of a loop of clamped index loads.
#pragma once

#include <functional>

#include "compiler/backend/lowering.h"

namespace refjit::backend {

// `fast(flat_ref, start, n)` works on `flat_ref`, the ref seen as rank 1, from index `start`.
using FlatRunFn = std::function<void(mlir::Value flat_ref, mlir::Value start, int64_t n)>;

// If ref access `e` (get, swap; its index operands start at `first`) is such a split unit run
// (the pipeline's fusion pass decided so: LoweringDecisions::index_run),
// emits `if (0 <= x0 <= |R| - n) fast(...) else general()` and returns true; otherwise
// emits nothing and returns false (the caller emits the general code).
bool lower_with_flat_run(LowerCtx& c, const Eqn& e, size_t first, const FlatRunFn& fast,
                         const std::function<void()>& general);

}  // namespace refjit::backend
