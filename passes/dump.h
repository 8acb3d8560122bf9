// Text of the autodiff stages for `refjit dump --emit=jvp|linearize|vjp` (docs/autodiff.md).
#pragma once

#include <string>
#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// Text dumps for `refjit dump --emit=jvp|linearize|vjp` (the inputs differentiated are
// `differentiated`; empty = every float input, refs included).
std::string dump_jvp(const Jaxpr& f, std::vector<bool> differentiated = {});
// The forward jaxpr, a blank line, then the backward jaxpr (value accumulators for array
// inputs, ref accumulators for ref inputs).
std::string dump_vjp(const Jaxpr& f, std::vector<bool> differentiated = {});

// Every float input (array or ref): the default differentiated set of the dumps.
std::vector<bool> float_inputs(const Jaxpr& f);

}  // namespace refjit
