// Zero constants folded into the program: a constvar whose value is all zeros (a closed-over
// `zeros(...)`, the usual initial state of a scan carry) becomes a broadcast of a zero literal
// at the top of the jaxpr. The compiled code then fills the buffer (a memset, often into the
// buffer the consumer updates in place) instead of receiving the array as an argument and
// copying it, and the structural compile cache still shares the code between functions
// closing over different zero arrays of one shape. Only zeros are folded, so closing over
// arrays of changing contents never causes recompiles.
#pragma once

#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// `zero[k]`: constvar k holds an all-zero (array, not ref) value. Returns the jaxpr with
// those constvars removed (the others keep their order) and one broadcast_in_dim eqn per
// removed constvar, defining the same var, before the first eqn.
Jaxpr inline_zero_consts(const Jaxpr& jaxpr, const std::vector<bool>& zero);

}  // namespace refjit
