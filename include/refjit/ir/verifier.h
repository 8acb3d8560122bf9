// The verifier: types, SSA scoping, ref rules. Run after parsing and after every pass.
#pragma once

#include "refjit/ir/jaxpr.h"

namespace refjit {

// Throws TypeError (or RefError for ref-rule violations) naming the eqn and operand.
// Checks: every operand is bound before use in its own jaxpr (sub-jaxprs see only their own
// binders); each binder is bound once; eqn output types equal what the type rule infers;
// sub-jaxprs verify recursively and match their eqn's operand/output types; no ref is
// returned (outvars are arrays); no Ref of Ref.
void verify(const Jaxpr& jaxpr);

}  // namespace refjit
