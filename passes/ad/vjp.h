// Reverse mode: vjp = linearize + transpose, and grad for the CLI.
#pragma once

#include <vector>

#include "passes/ad/linearize.h"
#include "passes/ad/transpose.h"

namespace refjit {

struct VjpJaxprs {
  // f's constvars; f's invars -> f's outputs, then the residuals.
  Jaxpr forward;
  // residuals..., ref residuals..., a Ref{ct} per `ref` accumulator (in input order), one
  // cotangent per output of f -> one cotangent per `value` accumulator (in input order).
  Jaxpr backward;
  int num_residuals = 0;
  // The ref residuals: positions among f's constvars then invars of the refs to pass again.
  std::vector<int> ref_residuals;
};

// `differentiated[i]` selects f's inputs to differentiate; `kinds` has one entry per
// selected input. A Ref-typed input needs `ref` or dont_want (RefError E5 otherwise).
VjpJaxprs vjp_jaxpr(const Jaxpr& f, const std::vector<bool>& differentiated,
                    const std::vector<AccumKind>& kinds);

// The gradient program for `refjit run --grad`: same constvars and invars as f (whose first
// output must be a float scalar, followed by `num_aux` auxiliary outputs, JAX's has_aux);
// returns f's outputs, then d out / d invar[w] for each w in `wrt`. RefError "E2" when a
// wrt position is a Ref argument; Error for a non-float one.
Jaxpr grad_jaxpr(const Jaxpr& f, const std::vector<int>& wrt, int num_aux = 0);

}  // namespace refjit
