// Index vectors that are provably runs of consecutive integers ("unit runs"): `iota` plus or
// minus scalars, e.g. `row * w + (col + iota(n))`. For such a vector a[i] == a[0] + i modulo
// the integer type's wrap-around, so gather/scatter with it touch one contiguous block when
// a[0] is in range (compiler/backend/lower_shape.cpp), and whether it names an entry p is a
// scalar test on a[0] and a[n-1] (passes/transpose_rules_scatter.cpp).
#pragma once

#include "refjit/ir/jaxpr.h"

namespace refjit {

// Whether `a`, a rank-1 i32/i64 array defined in `j`, is a unit run: defined by iota
// (dimension 0) or by add/sub of a unit run and a scalar (either side for add). Looks only
// at `j`'s eqns (an invar or constvar is not known to be one).
bool is_unit_run(const Jaxpr& j, const Atom& a);

}  // namespace refjit
