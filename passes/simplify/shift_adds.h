// Pass `shift-adds`: a decision of the lowering, made as IR. The transpose of a row segment
// shifted inside an array leaves, on the cotangent ref R,
//   v, R[w1] <- R[w1], 0          (the zero a literal, or a broadcast of one)
//   [v' = slice v[..., a:a+L]]    (optional: a run of v)
//   [v'' = reshape v']            (optional: the run's elements in the same order)
//   R[w2] += v''                  (the same ref)
// with w1 and w2 contiguous row-major runs of R. The run may also be read out first and zeroed
// later, `v <- R[w1]` then `_, R[w1] <- R[w1], 0` with nothing naming R in between (how the
// transpose of a read followed by a write of the same window comes out): the same shift. Done as written that is three passes over the
// run and a temporary per step; as one `shift_add` eqn at the swap's place it is one memmove
// of the overlapping part, the few elements outside the overlap added or zeroed one by one.
// Other readers of v are allowed when each is a static slice of a run of v between the swap
// and the addupdate (the transpose of `x[1:] = x[:-1]` keeps the cotangent v[0:1]): they
// become results of the shift_add, copied out of R's window before it is shifted.
//
// Conditions: v and every value of the chain are read only as above and not returned; no eqn
// between the swap and the addupdate, besides those above, reads or writes R (so moving the
// addupdate up to the swap changes nothing); the addupdate's start indices are defined before
// the swap. One rewrite, applied in every body (scan, jit, cond), after autodiff and the
// simplifications, before `move-windows` and buffer assignment (docs/pipeline.md).
#pragma once

#include "refjit/ir/jaxpr.h"

namespace refjit {

// `changes`, when given, receives how many shift_add eqns were made.
Jaxpr shift_adds(const Jaxpr& jaxpr, int* changes = nullptr);

}  // namespace refjit
