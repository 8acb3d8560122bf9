// inline_jit: replaces every (nested) jit eqn by the eqns of its body.
#pragma once

#include "refjit/ir/jaxpr.h"

namespace refjit {

Jaxpr inline_jit(const Jaxpr& jaxpr);

// Whether some top-level eqn of `jaxpr` is a jit.
bool has_jit_eqn(const Jaxpr& jaxpr);

}  // namespace refjit
