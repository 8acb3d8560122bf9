// State discharge: a program with refs turned into one without (JAX's `discharge_state`).
//
// Each ref becomes the value it holds: `new_ref x` is `x`, a read `r[ix]` is a slice (static
// indices), a dynamic_slice (dynamic starts) or a gather (strides, index arrays) of the
// current value, a write makes the next value with dynamic_update_slice or scatter, an
// accumulation with scatter-add, `freeze r` is the current value. Ref binders become values
// of their inner type, and the program returns, after its own outputs, the final value of
// every ref binder (constvars first, then invars, in order). Refs handed to jit, scan, cond
// and while become operands and results of the discharged sub-jaxprs: a scan's or while's
// refs turn into leading carries. Dynamic indices clamp exactly as ref indexing does, so the
// discharged program computes what the original computes and leaves in its refs.
//
// refjit keeps refs all the way to the machine code (that is how updates stay in place);
// this pass is a view of the same program in functional form, printed by
// `refjit dump --emit=discharged` and offered by the C++ API (refjit/discharge.h).
#pragma once

#include "refjit/ir/jaxpr.h"

namespace refjit {

// The discharged program. Throws Error for what it cannot discharge: a ref among a jaxpr's
// outputs, a ref handed to custom_vjp_call, a while condition that writes a ref.
Jaxpr discharge_state(const Jaxpr& jaxpr);

}  // namespace refjit
