// Dead-region elimination: an array is computed and stored only over the region that its
// readers reach. The pipeline's `dead-regions` pass (driver/pipeline.h), in two parts:
//
//  - Values. A value that only static slices read (unit strides) is computed over the
//    smallest box holding every slice, when an elementwise eqn, a broadcast_in_dim, a
//    transpose, a reduction or a dot_general makes it: each operand is sliced to the part of
//    it that box needs (a broadcast's operand only along the dims it does not broadcast, a
//    reduction's and a product's only along the dims they keep), each reader slice becomes
//    relative to the box, and one that takes all of it is dropped. The sweep runs from the
//    last eqn to the first, so a chain shrinks in one pass: `tanh(x @ w + b)[:, :8]`
//    multiplies x by the first 8 columns of w only. It recurses into scan, jit and cond
//    bodies. Values whose readers reach everything, refs and returned values are left alone.
//  - Loop-carried state and refs: a scan carry or a ref loses the trailing rows that no
//    index reaches, from the integer ranges of its indices (passes/simplify/trim_rows.h).
//
// Results never change: every element a reader sees is computed from the same operand
// elements as before.
#pragma once

#include <optional>
#include <vector>

#include "passes/simplify/int_ranges.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// The value part alone. `changes`, when given, receives the number of eqns computed over a
// smaller box; `jaxpr` itself is returned when there are none.
Jaxpr shrink_sliced_values(const Jaxpr& jaxpr, int* changes = nullptr);

// The whole pass: shrink_sliced_values, then trim_untouched_rows with `const_ranges` (per
// constvar, the range of its integer elements if known).
Jaxpr eliminate_dead_regions(const Jaxpr& jaxpr,
                             const std::vector<std::optional<IntRange>>& const_ranges);

}  // namespace refjit
