// Per-step accumulations of products in a scan, done once after it (pipeline pass
// `hoist-accumulations`, docs/pipeline.md).
//
// Reverse mode turns every matrix a scan body multiplies by into an accumulator ref: each step
// adds an outer product of one row of the scan's xs and a value of the step
// (`dW[...] += dot_general(x_t, d_t)`), rewriting the whole accumulator every step. When the
// accumulator is only ever added to in the body, the sum over the steps is one product of the
// stacked rows: the body returns d_t as one more stacked output (ys), and after the scan
//   dW[...] += dot_general(xs, ds)   contracting the step dim as well,
// a single matrix product instead of `length` rank-one updates. Applied where the stacked
// values stay small (kMaxStackedElements) and each step's product is at least as large as
// the value it stacks, so the rewrite never moves more memory than it saves. The order of the
// additions changes (within rounding); recurses into scan and jit bodies.
#pragma once

#include "refjit/ir/jaxpr.h"

namespace refjit {

// The rewritten program; `changes` (if given) receives the number of accumulations hoisted.
Jaxpr hoist_accumulations(const Jaxpr& jaxpr, int* changes = nullptr);

}  // namespace refjit
