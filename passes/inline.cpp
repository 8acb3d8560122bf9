#include "passes/inline.h"

#include <unordered_map>

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

namespace {

// A jit standing for a custom_jvp function: its JVP rule (jvp_jaxpr), or the note that JAX's
// text left the rule out (jvp_rule_missing).
bool is_custom_jvp_call(const Eqn& e) {
  return e.prim == Prim::jit && (e.params.find("jvp_jaxpr") || e.params.find("jvp_rule_missing"));
}

}  // namespace

Jaxpr inline_custom_jvp_calls(const Jaxpr& jaxpr) {
  bool any = false;
  for (const Eqn& e : jaxpr.eqns) any |= is_custom_jvp_call(e);
  if (!any) return jaxpr;
  JaxprBuilder b;
  std::unordered_map<uint32_t, Atom> env;
  for (Var v : jaxpr.constvars) env[v.id] = b.add_constvar(jaxpr.type_of(v), jaxpr.info(v).name);
  for (Var v : jaxpr.invars) env[v.id] = b.add_invar(jaxpr.type_of(v), jaxpr.info(v).name);
  auto read = [&](const Atom& a) { return is_var(a) ? env.at(as_var(a).id) : a; };
  for (const Eqn& e : jaxpr.eqns) {
    std::vector<Atom> ins;
    for (const Atom& a : e.ins) ins.push_back(read(a));
    if (is_custom_jvp_call(e)) {
      std::vector<Atom> outs = inline_call(b, jit_body(e), ins, /*inline_jits=*/true);
      for (size_t i = 0; i < e.outs.size(); ++i) env[e.outs[i].id] = outs[i];
      continue;
    }
    std::vector<Var> outs;
    for (Var o : e.outs) {
      Var n = b.new_var(jaxpr.info(o).type, jaxpr.info(o).dropped);
      outs.push_back(n);
      env[o.id] = n;
    }
    b.add_eqn_with_outs(e.prim, std::move(ins), e.params, std::move(outs));
  }
  std::vector<Atom> result;
  for (const Atom& a : jaxpr.outvars) result.push_back(read(a));
  b.set_outvars(result);
  return b.finish();
}

bool has_jit_eqn(const Jaxpr& jaxpr) {
  for (const Eqn& e : jaxpr.eqns)
    if (e.prim == Prim::jit) return true;
  return false;
}

}  // namespace refjit
