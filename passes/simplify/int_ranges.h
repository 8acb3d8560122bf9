// Integer value ranges: for each integer var of a jaxpr, an interval holding every element
// it can take, from ranges known for its binders (jit knows its integer constants). The one
// integer-range analysis: row trimming (trim_rows.h) and range simplification
// (range_simplify.h) query it, as any pass can.
//
// Propagated through slicing, reshaping, broadcasting, gathers and reductions (a result's
// elements are some of the operand's), add/sub/mul/max/min/neg, div by a positive constant,
// select_n (the union of the cases its predicate's range allows) and concatenate (the union),
// iota, comparisons (a bool is the range [0, 1], narrowed when the operands' ranges decide
// the comparison: `select_n(i < 0, i, i + n)`, JAX's index normalisation, with i known
// non-negative is i's range; and/or/not combine such bools), and scans: consts and xs take their
// operand's range inside the body (an xs row holds some of the stacked elements), ys the body's
// result's; carries are unknown. A range the result's dtype cannot hold (i32 arithmetic that
// may wrap around) is unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "refjit/array.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// An inclusive range of integer values.
struct IntRange {
  int64_t lo = 0;
  int64_t hi = 0;
};

// Per var id of one jaxpr: the range of its integer elements, if known.
using IntRanges = std::vector<std::optional<IntRange>>;

// Fills `r` (sized to j.vars, binders' entries set by the caller) for every var an eqn of `j`
// defines.
void analyze_int_ranges(const Jaxpr& j, IntRanges& r);

// The ranges of `j`'s vars, starting from `const_ranges` (per constvar, the range of its
// integer elements if known).
IntRanges int_ranges_from_consts(const Jaxpr& j,
                                 const std::vector<std::optional<IntRange>>& const_ranges);

// The range of `a`'s elements if it is a non-empty integer array.
std::optional<IntRange> element_range(const Array& a);

// The ranges inside the body of scan eqn `e`, given the ranges `outer` of its jaxpr.
IntRanges scan_body_int_ranges(const Eqn& e, const IntRanges& outer);

// The range of an atom: a literal's value, or the var's entry.
std::optional<IntRange> range_of(const IntRanges& r, const Atom& a);

// Whether operands in ranges `a`, `b` decide comparison `p` (lt, le, gt, ge, eq, ne): its
// value if so.
std::optional<bool> decide_comparison(Prim p, IntRange a, IntRange b);

}  // namespace refjit
