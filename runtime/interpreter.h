// The reference interpreter: evaluates a Jaxpr on host arrays and refs. It is the oracle the
// native backend is tested against, so it favours clarity over speed.
#pragma once

#include <variant>
#include <vector>

#include "refjit/array.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// A runtime value: an array, or a ref (shared mutable storage, updated in place).
using RtValue = std::variant<Array, RefBufferPtr>;

// Evaluates `jaxpr` with one value per constvar then one per invar. Ref arguments are
// updated in place (their RefBuffer storage keeps its address). Throws refjit::Error on a
// wrong argument count/type naming the position.
std::vector<RtValue> interpret(const Jaxpr& jaxpr, const std::vector<RtValue>& consts_then_args);

}  // namespace refjit
