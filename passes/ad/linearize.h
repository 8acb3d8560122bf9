// Linearize: the JVP split by partial evaluation into a primal jaxpr, run now, and a linear
// jaxpr of the tangents, run later (REFS.md 2.2).
#pragma once

#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

struct Linearized {
  // f's constvars; f's invars -> f's outputs, then the residuals. Runs every primal ref
  // effect (reads of primal refs happen here; what the linear part needs is saved).
  Jaxpr primal;
  // residuals..., ref residuals..., one tangent per differentiated input (Ref{T} for a
  // Ref{T} input) -> one tangent per output of f. Tangent-ref ops are staged here, never
  // primal-ref ops.
  Jaxpr linear;
  int num_residuals = 0;  // value residuals: the primal jaxpr's outputs after f's outputs
  // Ref residuals: f's own ref binders the linear part uses (a plumbing ref a custom_vjp
  // bwd writes into), as positions among f's constvars then invars. Usually empty.
  std::vector<int> ref_residuals;
  int num_nonlinear() const { return num_residuals + static_cast<int>(ref_residuals.size()); }
  std::vector<bool> differentiated;  // per invar of f
};

// Residuals are only what the linear part needs: indices, values read or computed during the
// forward pass (a read slice, cos x), never a whole array when only a slice is read.
// jit eqns are inlined first. Each primitive is linearized by its JVP rule then partial
// evaluation, unless it has a rule of its own (passes/ad/linearize_rules.h): cond branches are
// linearized recursively, while stages its JVP loop whole, custom_vjp_call runs fwd and stages
// bwd, and a scan splits into a primal scan (stacking its per-step residuals) and a linear scan.
Linearized linearize_jaxpr(const Jaxpr& f, std::vector<bool> differentiated_inputs);

}  // namespace refjit
