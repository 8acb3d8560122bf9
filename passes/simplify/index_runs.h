// Pass `index-runs`: a decision of the lowering, made as IR. A gather or scatter along one axis
// whose index vector is a unit run, iota plus scalars (`row * w + (col + iota(n))`,
// passes/simplify/unit_run.h), becomes `gather_run` / `scatter_run`, which take the run's first
// index (the scalars' sum) instead of the vector: the index array is never made, and native
// code tests at run time whether the whole run lies inside the axis, then moves one block per
// leading index (a memmove for a gather or a set) instead of an index load and a clamp or guard
// per element. Out of range it runs the per-element code, so the clamping and dropping are
// exactly the gather's and scatter's.
//
// The same decision for a ref, `get_flat_run` / `swap_flat_run`, is not made here: the
// transpose of a scatter on a flattened array writes it when it addresses its cotangent ref at
// a unit run (passes/ad/cotangent_ref.h).
//
// Runs that integer ranges place inside the axis became dynamic_slice / dynamic_update_slice
// in `simplify-ranges` already; this pass takes the rest. Patterns `gather-of-run` and
// `scatter-of-run`, applied by the pattern driver (passes/pattern_rewriter.h) in every body,
// after autodiff and the simplifications, before buffer assignment (docs/pipeline.md).
#pragma once

#include <span>

#include "passes/pattern_rewriter.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// The patterns, for with_patterns (passes/pattern_rewriter.h).
std::span<const RewritePattern> index_runs_patterns();

}  // namespace refjit
