// Constants folded into the program, where their value is cheaper to compute than to pass:
//   - a constvar whose value is all zeros (a closed-over `zeros(...)`, the usual initial state
//     of a scan carry) becomes a broadcast of a zero literal. The compiled code then fills the
//     buffer (a memset, often into the buffer the consumer updates in place) instead of
//     receiving the array as an argument and copying it;
//   - a one-dimensional integer constant holding a run start, start+1, ... (NumPy's
//     `np.arange(n)` captured by a JAX function, as `col + np.arange(n)` index vectors are)
//     becomes an iota plus start, which the index-run rewrites (unit_run.h) recognise.
// The folded eqns go before the first eqn. Only such values are folded, so closing over
// arrays of changing contents never causes recompiles, and the structural compile cache
// still shares code between functions closing over different zero arrays of one shape.
#pragma once

#include <cstdint>
#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// What is known of one constvar's value.
struct ConstFold {
  enum class Kind { keep, zeros, run };
  Kind kind = Kind::keep;
  int64_t run_start = 0;  // Kind::run: the first element
};

// One entry per constvar. Returns the jaxpr with the folded constvars removed (the others keep
// their order), each defined instead by eqns before the first eqn. `keep_binders`: the folded
// constvars stay (unread) and their readers read the eqns' result, so that the program takes
// the same constants (how autodiff is given the folds, windows_before_autodiff).
Jaxpr inline_known_consts(const Jaxpr& jaxpr, const std::vector<ConstFold>& folds,
                          bool keep_binders = false);

}  // namespace refjit
