#include "passes/ad/linearize_rules.h"

#include <fmt/format.h>

#include "refjit/ir/error.h"

namespace refjit {

const JvpRuleTable& linearize_jvp_rules() {
  static const JvpRuleTable table = [] {
    JvpRuleTable t;
    register_control_linearize_rules(t);
    return t;
  }();
  return table;
}

namespace {

// linearize inlines every jit first (its eqns then split one by one); one that is left would be
// staged whole, primal work and all.
EqnSplit refuse_jit(Jaxpr&, const Eqn& e, const std::function<bool(const Atom&)>&) {
  throw Error(fmt::format(
      "linearize: differentiating through a `{}` eqn that was not inlined is not supported "
      "yet; use jvp (forward mode) for this function",
      prim_name(e.prim)));
}

}  // namespace

const PartialEvalRuleTable& partial_eval_rules() {
  static const PartialEvalRuleTable table = [] {
    PartialEvalRuleTable t;
    t.set(Prim::scan, {split_scan_for_linearize});
    t.set(Prim::jit, {refuse_jit});
    return t;
  }();
  return table;
}

}  // namespace refjit
