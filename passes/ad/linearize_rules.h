// Internal: linearize's own rules, for the primitives where the general path is not what
// linearize should do. The general path, which every other primitive takes, is the JVP
// fallback: the primitive's JVP rule (jvp_rules.h) emits primal and tangent work side by side,
// and partial evaluation (linearize.cpp) keeps the primal work and stages the tangent work
// into the linear jaxpr. Two tables, one entry per primitive each (JAX keeps the same two:
// `primitive_linearizations` and partial evaluation's custom rules):
//
//  - linearize_jvp_rules(): used instead of the JVP rule while linearizing (jvp_jaxpr_general
//    with for_linearize): cond (each branch linearized; a primal cond returning every
//    branch's residuals and a linear cond reading them), while (a primal loop now, the JVP
//    loop staged whole), custom_vjp_call (fwd now; a linear eqn that runs bwd when
//    transposed). Filled by register_control_linearize_rules (jvp_rules_control.cpp).
//  - partial_eval_rules(): how partial evaluation splits a staged eqn that holds primal work
//    too: scan becomes a primal scan saving per-step residuals and a linear scan reading them
//    (linearize_scan.cpp); a jit, inlined before linearizing, is refused if one is left.
//    Without an entry a staged eqn goes to the linear jaxpr whole.
#pragma once

#include <functional>

#include "passes/ad/jvp_rules.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

const JvpRuleTable& linearize_jvp_rules();

void register_control_linearize_rules(JvpRuleTable& t);  // jvp_rules_control.cpp

// A staged eqn split in two: `known` runs in the primal jaxpr (it also returns what `staged`
// reads), `staged` in the linear one.
struct EqnSplit {
  Eqn known;
  Eqn staged;
};

// Splits eqn `e` of `j` (new vars, e.g. residual stacks, are added to `j`); `unknown` says
// which of e's operands depend on the tangent inputs.
struct PartialEvalRule {
  std::function<EqnSplit(Jaxpr& j, const Eqn& e, const std::function<bool(const Atom&)>& unknown)>
      fn;
  explicit operator bool() const { return static_cast<bool>(fn); }
};
using PartialEvalRuleTable = RuleTable<PartialEvalRule>;

const PartialEvalRuleTable& partial_eval_rules();

// linearize_scan.cpp
EqnSplit split_scan_for_linearize(Jaxpr& j, const Eqn& e,
                                  const std::function<bool(const Atom&)>& outer_unknown);

}  // namespace refjit
