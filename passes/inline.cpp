#include "passes/inline.h"

#include "passes/jaxpr_util.h"

namespace refjit {

Jaxpr inline_jit(const Jaxpr& jaxpr) {
  JaxprBuilder b;
  std::vector<Atom> args;
  for (Var v : jaxpr.constvars)
    args.push_back(b.add_constvar(jaxpr.type_of(v), jaxpr.info(v).name));
  for (Var v : jaxpr.invars) args.push_back(b.add_invar(jaxpr.type_of(v), jaxpr.info(v).name));
  b.set_outvars(inline_call(b, jaxpr, args, /*inline_jits=*/true));
  return b.finish();
}

Jaxpr inline_jit(const Jaxpr& jaxpr, std::vector<std::string>& eqn_policies) {
  JaxprBuilder b;
  std::vector<Atom> args;
  for (Var v : jaxpr.constvars)
    args.push_back(b.add_constvar(jaxpr.type_of(v), jaxpr.info(v).name));
  for (Var v : jaxpr.invars) args.push_back(b.add_invar(jaxpr.type_of(v), jaxpr.info(v).name));
  eqn_policies.clear();
  b.set_outvars(inline_call_with_policies(b, jaxpr, args, "", eqn_policies));
  return b.finish();
}

bool has_jit_eqn(const Jaxpr& jaxpr) {
  for (const Eqn& e : jaxpr.eqns)
    if (e.prim == Prim::jit) return true;
  return false;
}

}  // namespace refjit
