// Row trimming: a scan carry or a ref whose trailing rows (along dim 0) no eqn ever reads or
// writes, and that is not returned, is given only the rows that are touched.
//
// For example, a scan over a [1000, 1000] state of which only rows [0, 100) are ever indexed
// (the row indices are closed-over constants in [0, 100)), with only state[:100, :500] read
// afterwards: its gradient accumulates into a state-sized cotangent ref indexed by the same
// rows. Trimmed, neither the state nor the cotangent costs more than its 100 touched rows per
// call (a fill of 4 MB each, otherwise).
//
// Which rows an access touches comes from integer value ranges: the ranges given for the
// constvars (the jit path passes each integer constant's min and max) propagated through
// the arithmetic of index computations, scan xs and ys. Dynamic starts clamp: a window of
// size s starting in [a, b] touches rows [max(a, 0), max(b, 0) + s), and the trimmed buffer
// keeps at least max(b, 0) + s rows so that every start clamps to the same place as before.
// Accesses allowed on a trimmed value: dynamic_slice / dynamic_update_slice / static slice of
// a scan carry (in the scan body, the update's result continuing the carry) and static
// slices of the scan's final carry; get / swap / addupdate / shift_add through a ref, including
// inside scans that take the ref as a constant. Any other use keeps the value whole.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "passes/simplify/int_ranges.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// `const_ranges`: per constvar of `jaxpr`, the range of its (integer) elements if known.
// Returns the trimmed program (with nested jit eqns inlined), or `jaxpr` itself when nothing
// can be trimmed. `trimmed`, when given, receives the number of carries and refs trimmed.
Jaxpr trim_untouched_rows(const Jaxpr& jaxpr,
                          const std::vector<std::optional<IntRange>>& const_ranges,
                          int* trimmed = nullptr);

}  // namespace refjit
