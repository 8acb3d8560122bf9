#include "refjit/ir/jaxpr.h"

#include <algorithm>
#include <map>

#include "ir/sub_jaxprs.h"
#include "refjit/ir/error.h"

namespace refjit {

Var Jaxpr::new_var(Type type, bool dropped, std::string name) {
  vars.push_back(VarInfo{std::move(type), dropped, std::move(name)});
  return Var{static_cast<uint32_t>(vars.size() - 1)};
}

Type Jaxpr::type_of(const Atom& a) const {
  if (const Var* v = std::get_if<Var>(&a)) return type_of(*v);
  return std::get<Literal>(a).type();
}

std::vector<Type> Jaxpr::const_types() const {
  std::vector<Type> r;
  for (Var v : constvars) r.push_back(type_of(v));
  return r;
}
std::vector<Type> Jaxpr::in_types() const {
  std::vector<Type> r;
  for (Var v : invars) r.push_back(type_of(v));
  return r;
}
std::vector<Type> Jaxpr::out_types() const {
  std::vector<Type> r;
  for (const Atom& a : outvars) r.push_back(type_of(a));
  return r;
}

namespace {

// Ref binders of sub-jaxprs map back to the eqn operands that feed them.
std::vector<std::pair<size_t, const Jaxpr*>> subjaxpr_bindings(const Eqn& e) {
  std::vector<std::pair<size_t, const Jaxpr*>> out;  // (offset of first operand fed, jaxpr)
  for (const auto& [name, v] : e.params.entries()) {
    if (const auto* j = std::get_if<JaxprPtr>(&v)) {
      if (!*j) continue;
      // cond's branches take the operands after the index; custom_vjp's fwd/bwd and a jit's
      // custom_jvp rule take different binders and are not walked for the caller's effects.
      if (e.prim == Prim::custom_vjp_call && name != "call_jaxpr") continue;
      if (e.prim == Prim::linear_solve && name != "solve_jaxpr") continue;
      if (e.prim == Prim::jit && name != "jaxpr") continue;  // a custom_jvp rule
      out.push_back({0, j->get()});
    } else if (const auto* js = std::get_if<JaxprList>(&v)) {
      for (const auto& j : *js)
        if (j) out.push_back({1, j.get()});
    }
  }
  return out;
}

void collect(const Jaxpr& j, std::map<uint32_t, RefEffects>& fx) {
  for (const Eqn& e : j.eqns) {
    auto mark = [&](size_t operand, auto&& f) {
      if (operand < e.ins.size() && is_var(e.ins[operand])) f(fx[as_var(e.ins[operand]).id]);
    };
    switch (prim_info(e.prim).effect) {
      case RefEffect::read: mark(0, [](RefEffects& r) { r.read = true; }); break;
      case RefEffect::write: mark(0, [](RefEffects& r) { r.written = true; }); break;
      case RefEffect::accum: mark(0, [](RefEffects& r) { r.accumulated = true; }); break;
      default: break;
    }
    for (const auto& [offset, sub] : subjaxpr_bindings(e)) {
      std::vector<RefEffects> inner = compute_effects(*sub);
      // inner: constvars (none for sub-jaxprs) then invars, fed by operands from `offset`.
      size_t n_const = sub->constvars.size();
      for (size_t k = 0; k < sub->invars.size(); ++k) {
        const RefEffects& r = inner[n_const + k];
        if (!r.any()) continue;
        mark(offset + k, [&](RefEffects& outer) {
          outer.read |= r.read;
          outer.written |= r.written;
          outer.accumulated |= r.accumulated;
        });
      }
    }
  }
}

}  // namespace

std::vector<RefEffects> compute_effects(const Jaxpr& jaxpr) {
  std::map<uint32_t, RefEffects> fx;
  collect(jaxpr, fx);
  std::vector<RefEffects> out;
  for (Var v : jaxpr.constvars) out.push_back(fx.count(v.id) ? fx[v.id] : RefEffects{});
  for (Var v : jaxpr.invars) out.push_back(fx.count(v.id) ? fx[v.id] : RefEffects{});
  return out;
}

void refuse_unknown_forward_map(const Eqn& e) {
  const bool* marked = std::get_if<bool>(e.params.find(kForwardUnknown));
  if (!marked || !*marked) return;
  throw Error(
      "custom_vjp_call: this is the linear map of a custom_vjp function, run forward (the "
      "tangents of linearize, or a jvp of it), but the function's rule is for reverse mode "
      "only and its bwd is not a linear map refjit can transpose into a forward one; JAX "
      "refuses forward mode of custom_vjp functions too: use grad or vjp, or give the "
      "function a custom_jvp rule");
}

namespace {

// Whether `is` holds for `e` or for an eqn of a jaxpr its params hold, at any depth.
template <class Pred>
bool holds_within(const Eqn& e, const Pred& is) {
  if (is(e)) return true;
  if (!prim_info(e.prim).has_subjaxprs) return false;
  return any_sub_jaxpr(e, [&](const Jaxpr& body) {
    return std::any_of(body.eqns.begin(), body.eqns.end(),
                       [&](const Eqn& inner) { return holds_within(inner, is); });
  });
}

}  // namespace

bool has_host_effect(const Eqn& e) {
  return holds_within(e, [](const Eqn& x) { return prim_info(x.prim).host_effect; });
}

bool checks_processes(const Eqn& e) {
  return holds_within(
      e, [](const Eqn& x) { return x.prim == Prim::axis_index && x.params.find("axis_size"); });
}

bool bwd_accumulates(const Jaxpr& bwd, size_t n_res, size_t n_outs, size_t n_operands) {
  return n_operands > 0 && bwd.outvars.empty() && bwd.invars.size() == n_res + n_outs + n_operands;
}

}  // namespace refjit
