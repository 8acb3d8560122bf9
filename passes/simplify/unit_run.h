// Index vectors that are provably runs of consecutive integers ("unit runs"): `iota` plus or
// minus scalars, e.g. `row * w + (col + iota(n))`. For such a vector a[i] == a[0] + i modulo
// the integer type's wrap-around, so gather/scatter with it take a[0] alone (gather_run,
// scatter_run: passes/simplify/index_runs.h) and touch one contiguous block when a[0] is in
// range, and so does a flattened cotangent ref read or written at it (get_flat_run,
// swap_flat_run: passes/ad/cotangent_ref.h); whether it names an entry p is a scalar test on
// a[0] and a[n-1] (passes/ad/transpose_rules_scatter.cpp), and the integer ranges of its terms
// can place it inside one row (passes/simplify/range_simplify.cpp). This file is the one
// recogniser of the idiom.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// A unit run as the sum of one iota(length) and scalar terms: a[i] = sum of terms + i.
struct UnitRun {
  struct Term {
    Atom scalar;  // a rank-0 atom of this jaxpr
    bool negated = false;
  };
  int64_t length = 0;
  std::vector<Term> terms;
};

// `a`'s decomposition if `a`, a rank-1 i32/i64 array defined in `j`, is a unit run: built by
// add/sub from exactly one iota (dimension 0, added, not subtracted) and scalars (rank-0
// operands or broadcasts of them). Looks only at `j`'s eqns (an invar or constvar is not
// known to be one).
std::optional<UnitRun> as_unit_run(const Jaxpr& j, const Atom& a);

inline bool is_unit_run(const Jaxpr& j, const Atom& a) { return as_unit_run(j, a).has_value(); }

// `a`, a rank-0 integer atom, as the sum of the scalars an add/sub chain in `j` combines (a
// single term when it is not such a chain): a start index `W*r + c` gives its two terms.
std::vector<UnitRun::Term> scalar_sum_terms(const Jaxpr& j, const Atom& a);

// The sum of `terms` (rank-0 atoms of dtype `dt`) built by `make(prim, operands)`, which emits
// one neg, add or sub eqn and returns its result: a run's first index. A literal 0 for no terms.
Atom sum_of_terms(std::span<const UnitRun::Term> terms, DType dt,
                  const std::function<Atom(Prim, std::vector<Atom>)>& make);

}  // namespace refjit
