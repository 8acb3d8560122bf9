#include "passes/jaxpr_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "ir/sub_jaxprs.h"
#include "refjit/ir/error.h"

namespace refjit {

bool is_row_major_reshape(const Eqn& e) {
  if (e.prim != Prim::reshape) return false;
  const ParamValue* d = e.params.find("dimensions");
  return !d || std::holds_alternative<NoneParam>(*d);
}

const Jaxpr& jit_body(const Eqn& eqn) {
  const JaxprPtr& p = eqn.params.get<JaxprPtr>("jaxpr");
  if (!p) throw Error("jit eqn without a `jaxpr` param");
  return *p;
}

namespace {

bool every_jit(const Eqn&) { return true; }
bool no_jit(const Eqn&) { return false; }

// The inliners: the jits of `callee` that `which` accepts are inlined too, with every jit
// inside them. `policies`, when given, receives one entry per appended eqn.
std::vector<Atom> inline_impl(JaxprBuilder& b, const Jaxpr& callee, std::span<const Atom> args,
                              const JitFilter& which, const std::string& policy,
                              std::vector<std::string>* policies) {
  const size_t n_bind = callee.constvars.size() + callee.invars.size();
  if (args.size() != n_bind)
    throw Error(fmt::format("internal: inlining a jaxpr with {} binders given {} arguments", n_bind,
                            args.size()));
  std::unordered_map<uint32_t, Atom> env;
  size_t k = 0;
  for (Var v : callee.constvars) env[v.id] = args[k++];
  for (Var v : callee.invars) env[v.id] = args[k++];
  auto read = [&](const Atom& a) -> Atom {
    if (!is_var(a)) return a;
    auto it = env.find(as_var(a).id);
    if (it == env.end())
      throw Error(fmt::format("internal: unbound variable {} while inlining", as_var(a).id));
    return it->second;
  };
  for (const Eqn& e : callee.eqns) {
    std::vector<Atom> ins;
    for (const Atom& a : e.ins) ins.push_back(read(a));
    // Autodiff (which records policies) keeps a jit with a custom JVP rule: the rule applies.
    if (e.prim == Prim::jit && which(e) && !(policies && has_custom_jvp_rule(e))) {
      if (policies) refuse_missing_custom_rule(e, "linearize");
      std::string inner = policy;
      if (const auto* p = e.params.find("policy"))
        if (const auto* name = std::get_if<std::string>(p)) inner = *name;
      std::vector<Atom> outs = inline_impl(b, jit_body(e), ins, every_jit, inner, policies);
      for (size_t i = 0; i < e.outs.size(); ++i) env[e.outs[i].id] = outs[i];
      continue;
    }
    std::vector<Var> outs;
    for (Var o : e.outs) {
      const VarInfo& info = callee.info(o);
      Var n = b.new_var(info.type, info.dropped);
      outs.push_back(n);
      env[o.id] = n;
    }
    b.add_eqn_with_outs(e.prim, std::move(ins), e.params, std::move(outs));
    if (policies) policies->push_back(policy);
  }
  std::vector<Atom> result;
  for (const Atom& a : callee.outvars) result.push_back(read(a));
  return result;
}

}  // namespace

std::vector<Atom> inline_call(JaxprBuilder& b, const Jaxpr& callee, std::span<const Atom> args,
                              bool inline_jits) {
  return inline_impl(b, callee, args, inline_jits ? every_jit : no_jit, "", nullptr);
}

std::vector<Atom> inline_call_where(JaxprBuilder& b, const Jaxpr& callee,
                                    std::span<const Atom> args, const JitFilter& which) {
  return inline_impl(b, callee, args, which, "", nullptr);
}

std::vector<Atom> inline_call_with_policies(JaxprBuilder& b, const Jaxpr& callee,
                                            std::span<const Atom> args, const std::string& policy,
                                            std::vector<std::string>& eqn_policies) {
  return inline_impl(b, callee, args, every_jit, policy, &eqn_policies);
}

bool touches_refs(const Jaxpr& j, const Eqn& eqn) {
  for (const Atom& a : eqn.ins)
    if (is_var(a) && j.type_of(as_var(a)).is_ref) return true;
  for (Var v : eqn.outs)
    if (j.type_of(v).is_ref) return true;
  return false;
}

bool has_custom_jvp_rule(const Eqn& eqn) {
  if (eqn.prim != Prim::jit) return false;
  const JaxprPtr* rule = std::get_if<JaxprPtr>(eqn.params.find("jvp_jaxpr"));
  return rule && *rule;
}

namespace {

void collect_missing_jvp_rules(const Jaxpr& j, std::vector<std::string>& names) {
  for (const Eqn& e : j.eqns) {
    if (const auto* name = std::get_if<std::string>(e.params.find("jvp_rule_missing"));
        name && std::find(names.begin(), names.end(), *name) == names.end())
      names.push_back(*name);
    for_each_sub_jaxpr(e, [&](const Jaxpr& sub) { collect_missing_jvp_rules(sub, names); });
  }
}

}  // namespace

std::vector<std::string> functions_missing_jvp_rules(const Jaxpr& jaxpr) {
  std::vector<std::string> names;
  collect_missing_jvp_rules(jaxpr, names);
  return names;
}

Jaxpr accept_primal_derivatives(const Jaxpr& jaxpr) {
  Jaxpr out = jaxpr;
  for (Eqn& e : out.eqns) {
    e.params.erase(kCustomRuleMissing);
    rewrite_sub_jaxprs(e, [](const Jaxpr& sub) { return accept_primal_derivatives(sub); });
  }
  return out;
}

void refuse_missing_custom_rule(const Eqn& eqn, const std::string& where) {
  const auto* param = eqn.params.find(kCustomRuleMissing);
  if (!param) return;
  const auto* fn = std::get_if<std::string>(param);
  // A refjit derivative program staged by the Python package (python/refjit/_staging.py)
  // that is JAX's derivative only to the order taken so far.
  if (fn && *fn == "derivative_not_exact")
    throw NotDifferentiableError(fmt::format(
        "{}: cannot differentiate this refjit derivative program again: it is JAX's "
        "derivative to the order taken so far only (a custom rule inside calls custom "
        "functions nested deeper than refjit traces their rules). Take the inner derivative "
        "with JAX (jax.grad, jax.jvp) and let refjit compile the outer one",
        where));
  throw NotDifferentiableError(fmt::format(
      "{}: cannot differentiate the custom_vjp function `{}`: JAX's printout names its fwd and "
      "bwd rules but does not contain them, and refjit will not substitute the primal's own "
      "derivative for a rule it cannot see. Trace the function with refjit's Python package "
      "(refjit.grad / refjit.jit) or define it with refjit's C++ custom_vjp, which keep the "
      "rules; `refjit --primal-derivatives` accepts the primal's derivative instead",
      where, fn ? *fn : std::string("?")));
}

std::string describe_eqn(const Eqn& eqn, size_t index) {
  return fmt::format("eqn {} (`{}`)", index, prim_name(eqn.prim));
}

Jaxpr rewritten_copy(const Jaxpr& jaxpr, const std::function<int(Jaxpr&)>& rewrite, int* changes) {
  Jaxpr out = jaxpr;
  const int n = rewrite(out);
  if (changes) *changes = n;
  return n > 0 ? out : jaxpr;
}

namespace {

// Runs `rewrite` on a copy of `*j` and makes `j` the copy when it changed something; returns
// the count of changes.
int rewrite_one(JaxprPtr& j, const std::function<int(Jaxpr&)>& rewrite) {
  if (!j) return 0;
  Jaxpr copy = *j;
  const int n = rewrite(copy);
  if (n > 0) j = std::make_shared<const Jaxpr>(std::move(copy));
  return n;
}

int rewrite_each(JaxprList& list, const std::function<int(Jaxpr&)>& rewrite) {
  int n = 0;
  for (JaxprPtr& j : list) n += rewrite_one(j, rewrite);
  return n;
}

}  // namespace

int drop_host_calls(Jaxpr& jaxpr) {
  int n = 0;
  std::vector<Eqn> kept;
  kept.reserve(jaxpr.eqns.size());
  for (Eqn& e : jaxpr.eqns) {
    if (prim_info(e.prim).host_effect) {
      ++n;
      continue;
    }
    if (has_host_effect(e))
      rewrite_sub_jaxprs(e, [&](const Jaxpr& sub) -> std::optional<Jaxpr> {
        Jaxpr copy = sub;
        const int k = drop_host_calls(copy);
        n += k;
        return k > 0 ? std::optional<Jaxpr>(std::move(copy)) : std::nullopt;
      });
    kept.push_back(std::move(e));
  }
  jaxpr.eqns = std::move(kept);
  return n;
}

int rewrite_body(Eqn& e, const std::function<int(Jaxpr&)>& rewrite) {
  if (e.prim == Prim::cond) {
    const JaxprList* branches = std::get_if<JaxprList>(e.params.find("branches"));
    if (!branches) return 0;
    JaxprList rewritten = *branches;
    const int n = rewrite_each(rewritten, rewrite);
    if (n > 0) e.params.set("branches", std::move(rewritten));
    return n;
  }
  if (e.prim != Prim::scan && e.prim != Prim::jit) return 0;
  const JaxprPtr* body = std::get_if<JaxprPtr>(e.params.find("jaxpr"));
  if (!body || !*body) return 0;
  JaxprPtr rewritten = *body;
  const int n = rewrite_one(rewritten, rewrite);
  if (n > 0) e.params.set("jaxpr", std::move(rewritten));
  return n;
}

}  // namespace refjit
