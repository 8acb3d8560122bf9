// Range simplification: what the integer ranges (int_ranges.h) decide is folded away. The
// pipeline's `simplify-ranges` pass (driver/pipeline.h), after row trimming; the ranges start
// from what is known of the constants (jit's captured values, `refjit run`'s VALUEs), iotas
// and literals.
//
//  - comparisons of integers whose ranges decide them become constants; `and`/`or`/`not` of
//    constants fold, `select_n` with a constant predicate is its chosen case, and `max`/`min`
//    whose ranges decide them are the deciding operand;
//  - a gather or scatter whose index vector is a unit run (passes/simplify/unit_run.h) inside
//    what it indexes is a dynamic_slice / dynamic_update_slice at the run's first index, in
//    any program. Indexing two dims [D, W] (`dims=2`: `x.at[r, c:c+n].set(u)` as JAX writes
//    it, import/jax/gather_scatter.cpp) at W*r + c + iota(n) with the window inside row r, it
//    is a [1, n] window at (r, c), a concatenate of flattened pieces rebuilt from the pieces
//    themselves, which the backend lowers as memmoves (move_windows,
//    passes/simplify/move_windows.h); across rows, a window of the two dims flattened.
//
// Eqns left without readers (and without effects) are removed.
//
// The rewrites into windows also run before autodiff (`windows_before_autodiff`, which every
// door's derivative starts from: driver/derive.h), so a gather or scatter proven to
// touch one window is differentiated as the window it is: a row written with `x.at[idx].set`
// through a constant index vector differentiates into the same per-step work as the same row
// written with `dynamic_update_slice` (docs/backend.md).
#pragma once

#include <optional>
#include <vector>

#include "passes/simplify/inline_consts.h"
#include "passes/simplify/int_ranges.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// `const_ranges`: per constvar of `jaxpr`, the range of its integer elements if known.
// `changes`, when given, receives the number of rewrites made. The gathers and scatters left
// indexing several dims are then written on one (passes/plain_decisions.h), as lowered.
Jaxpr simplify_with_ranges(const Jaxpr& jaxpr,
                           const std::vector<std::optional<IntRange>>& const_ranges,
                           int* changes = nullptr);

// The form autodiff is given: the same rewrites on `jaxpr` in canonical form
// (passes/simplify/canonicalize.h) with the runs among its constants (`const_folds`, one per
// constvar or none) folded in and their binders kept, in it and its scan bodies but not
// inside nested jits. `jaxpr` itself when no window was made; `changes` receives the number
// of windows made.
Jaxpr windows_before_autodiff(const Jaxpr& jaxpr,
                              const std::vector<std::optional<IntRange>>& const_ranges,
                              const std::vector<ConstFold>& const_folds = {},
                              int* changes = nullptr);

}  // namespace refjit
