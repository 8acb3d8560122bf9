// Forward-mode differentiation of a Jaxpr (REFS.md 2.1).
#pragma once

#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// jvp_jaxpr(f, nonzero): a jaxpr taking (f's constvars as constvars;) primals..., then one
// tangent per input i with nonzero[i] (a Ref{T} tangent for a Ref{T} input), returning
// primal outs..., then one tangent per output (zeros instantiated at the boundary only).
// Tangents are symbolic zeros wherever nothing differentiated flows, so untouched tangents
// cost nothing. Throws RefError "E1" when a differentiated value is written into a ref
// that has no tangent (a plumbing or closed-over ref).
Jaxpr jvp_jaxpr(const Jaxpr& f, std::vector<bool> nonzero_tangents);

// The general form used by the jit/cond/scan rules and by linearize.
struct JvpResult {
  Jaxpr jaxpr;                    // primals, nonzero tangents -> primal outs, tangent outs
  std::vector<bool> nonzero_out;  // which outputs have a tangent output (others are zero)
  // One entry per eqn of `jaxpr`: true when the eqn is tangent work (for linearize).
  std::vector<bool> tangent_eqn;
  // One entry per eqn of `jaxpr`: the index of the eqn of f it was emitted for (linearize
  // reads the remat policy of that eqn, passes/ad/remat.h).
  std::vector<size_t> source_eqn;
};
// `instantiate[i]` forces output i's tangent to be present (zeros if symbolic); empty = all.
// `for_linearize`: the JVP that linearize splits; primitives with a linearize rule
// (passes/ad/linearize_rules.h: cond, while, custom_vjp_call) are differentiated by it.
JvpResult jvp_jaxpr_general(const Jaxpr& f, const std::vector<bool>& nonzero_tangents,
                            const std::vector<bool>& instantiate, bool for_linearize = false);

}  // namespace refjit
