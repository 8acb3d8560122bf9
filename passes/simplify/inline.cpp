#include "passes/simplify/inline.h"

#include "passes/jaxpr_util.h"

namespace refjit {

namespace {

// `jaxpr`'s constvars and invars, made in `b` (same types and names), in order.
std::vector<Atom> same_binders(JaxprBuilder& b, const Jaxpr& jaxpr) {
  std::vector<Atom> args;
  for (Var v : jaxpr.constvars)
    args.push_back(b.add_constvar(jaxpr.type_of(v), jaxpr.info(v).name));
  for (Var v : jaxpr.invars) args.push_back(b.add_invar(jaxpr.type_of(v), jaxpr.info(v).name));
  return args;
}

}  // namespace

Jaxpr inline_jit(const Jaxpr& jaxpr) {
  JaxprBuilder b;
  const std::vector<Atom> args = same_binders(b, jaxpr);
  b.set_outvars(inline_call(b, jaxpr, args, /*inline_jits=*/true));
  return b.finish();
}

Jaxpr inline_jit(const Jaxpr& jaxpr, std::vector<std::string>& eqn_policies) {
  JaxprBuilder b;
  const std::vector<Atom> args = same_binders(b, jaxpr);
  eqn_policies.clear();
  b.set_outvars(inline_call_with_policies(b, jaxpr, args, "", eqn_policies));
  return b.finish();
}

namespace {

// A jit standing for a custom_jvp function: its JVP rule (jvp_jaxpr), or the note that JAX's
// text left the rule out (jvp_rule_missing).
bool is_custom_jvp_call(const Eqn& e) {
  return e.prim == Prim::jit && (e.params.find("jvp_jaxpr") || e.params.find("jvp_rule_missing"));
}

// A call of straight-line array code: no control flow, calls, refs, collectives or host calls
// in its body, and no checkpoint policy (JAX's log_softmax, `_where`).
bool is_straight_line_call(const Eqn& e) {
  if (e.prim != Prim::jit || e.params.find("policy")) return false;
  const Jaxpr& body = jit_body(e);
  for (const Eqn& inner : body.eqns) {
    const PrimInfo& info = prim_info(inner.prim);
    if (info.has_subjaxprs || info.communicates || info.host_effect ||
        info.effect != RefEffect::none || touches_refs(body, inner))
      return false;
  }
  return true;
}

bool inlined_after_autodiff(const Eqn& e) {
  return is_custom_jvp_call(e) || is_straight_line_call(e);
}

}  // namespace

Jaxpr inline_custom_jvp_calls(const Jaxpr& jaxpr) {
  bool any = false;
  for (const Eqn& e : jaxpr.eqns) any |= inlined_after_autodiff(e);
  if (!any) return jaxpr;
  JaxprBuilder b;
  const std::vector<Atom> args = same_binders(b, jaxpr);
  b.set_outvars(inline_call_where(b, jaxpr, args, inlined_after_autodiff));
  return b.finish();
}

bool has_jit_eqn(const Jaxpr& jaxpr) {
  for (const Eqn& e : jaxpr.eqns)
    if (e.prim == Prim::jit) return true;
  return false;
}

}  // namespace refjit
