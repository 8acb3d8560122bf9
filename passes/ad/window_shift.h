// The transpose of a window moved inside an array, written as one shift_add.
//
// `y = dynamic_update_slice(x, u, i)` whose update is a window of x itself,
// `u = dynamic_slice(x, j)`, or a concatenation of pieces one of which is such a window (a row
// segment shifted in place: `x.at[r, c:c+n].set(concatenate([v, x[r, c-1:c+n-1]], 1))`). The
// cotangent of x is y's, except that y's window at i is zeroed, and its part for the moved piece
// is added at j. When y's cotangent lives in a ref R, that is one shift_add on R: read the run at
// i, write zeros over it, add the piece's part at j (one memmove where the windows overlap); the
// other pieces' parts are copied out of the run first, as its side results. u's own accumulator
// receives nothing: what it would hand through the concatenate and the slice, the shift_add has
// delivered.
//
// The pieces and the update may be reached through row-major reshapes and broadcasts that only
// add dims of size 1. Taken for real float cotangents when y's cotangent is held in a ref in
// its own shape (Accum::can_hand_over), x's accumulator may take that ref over
// (Accum::can_alias), both windows are contiguous row-major runs of x, and the pieces are laid
// along a dim before which u has size 1 (so that each is a run of the window). Otherwise
// transpose_window_shift emits nothing and returns false, and the rule of dynamic_update_slice
// takes its general path.
//
// A transform of a derived program (a second derivative, a vmap of a gradient) reads the
// shift_add as the plain eqns it stands for (passes/plain_decisions.h).
#pragma once

#include "passes/ad/transpose_rules.h"

namespace refjit {

bool transpose_window_shift(Emitter& e, TransposeArgs& a);

// The same for a ref, whose cotangent is a ref R' throughout: `v <- R[w1]` (maybe reshaped, or
// one piece of a concatenation) later written back, `_, R[w2] <- R[w2], u`, with nothing naming
// R in between and the old value of R[w2] unused. The transpose of the write is then the
// shift_add on R' that also does the read's transpose: zeros over w2, its run's part for v
// added at w1. For the swap's rule (transpose_rules_refs.cpp); false, emitting nothing,
// otherwise.
bool transpose_ref_shift(Emitter& e, TransposeArgs& a);

}  // namespace refjit
