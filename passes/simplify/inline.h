// inline_jit: replaces every (nested) jit eqn by the eqns of its body.
#pragma once

#include <string>
#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

Jaxpr inline_jit(const Jaxpr& jaxpr);

// inline_jit, and for each eqn of the result the remat policy it runs under (the `policy`
// param of the innermost checkpointed jit around it; "" outside any). passes/ad/remat.h.
Jaxpr inline_jit(const Jaxpr& jaxpr, std::vector<std::string>& eqn_policies);

// Each top-level jit that stands for a custom_jvp function (jax.nn.relu, softplus, ...), or
// whose body is straight-line array code (no control flow, calls, refs, collectives or host
// calls; no checkpoint policy: JAX's log_softmax), replaced by the eqns of its body (and of
// the jits in it); other jits stay calls. After autodiff a rule has done its work (the
// pipeline's inline-jits pass).
Jaxpr inline_custom_jvp_calls(const Jaxpr& jaxpr);

// Whether some top-level eqn of `jaxpr` is a jit.
bool has_jit_eqn(const Jaxpr& jaxpr);

}  // namespace refjit
