// Internal: the JVP rule table, one entry per differentiable primitive, filled by the
// jvp_rules_<family>.cpp files.
#pragma once

#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "passes/emitter.h"
#include "refjit/ir/primitive.h"

namespace refjit {

struct JvpCtx {
  Emitter p;             // primal work (including values the tangent rule needs, e.g. cos x)
  Emitter t;             // tangent work
  const Jaxpr* src;      // the jaxpr being differentiated
  std::string where;     // "eqn 3 (`swap`)" of the eqn being differentiated
  std::string ref_name;  // for ref ops: how to name operand 0 in errors
  // Linearizing: rules come from linearize_jvp_rules() first (passes/ad/linearize_rules.h);
  // rules differentiating a body pass it on.
  bool for_linearize = false;
  // Vars that depend on tangent inputs. A tangent that does not is a constant, hence zero.
  std::unordered_set<uint32_t> linear;
  bool depends_on_tangents(const MaybeAtom& t) const {
    return t && is_var(*t) && linear.count(as_var(*t).id);
  }
};

struct JvpArgs {
  const Eqn& eqn;                   // the original eqn
  std::vector<Atom> primals;        // its operands in the new jaxpr
  std::vector<MaybeAtom> tangents;  // their tangents (nullopt = symbolic zero)
  std::vector<Var> primal_outs;     // filled by the driver unless the rule emits the primal
};

// Returns one tangent per output of the eqn. Rules with `emits_primal` set fill
// args.primal_outs themselves (jit, cond, scan, ... fuse primal and tangent).
struct JvpRule {
  std::function<std::vector<MaybeAtom>(JvpCtx&, JvpArgs&)> fn;
  bool emits_primal = false;
  explicit operator bool() const { return static_cast<bool>(fn); }
};
using JvpRuleTable = RuleTable<JvpRule>;

void register_elementwise_jvp_rules(JvpRuleTable& t);
void register_window_jvp_rules(JvpRuleTable& t);  // jvp_rules_window.cpp
void register_shape_jvp_rules(JvpRuleTable& t);
void register_ref_jvp_rules(JvpRuleTable& t);
void register_control_jvp_rules(JvpRuleTable& t);
void register_collective_jvp_rules(JvpRuleTable& t);
void register_host_jvp_rules(JvpRuleTable& t);    // jvp_rules_host.cpp
void register_linalg_jvp_rules(JvpRuleTable& t);  // jvp_rules_linalg.cpp

const JvpRuleTable& jvp_rules();

// Whether values of this type carry tangents (floats, and refs of floats).
inline bool has_tangent(const Type& t) { return is_inexact(t.dtype()); }

// Tangent zero of `type` made concrete.
inline Atom instantiate(Emitter& e, const MaybeAtom& t, const ArrayType& type) {
  return t ? *t : e.zeros(type);
}

}  // namespace refjit
