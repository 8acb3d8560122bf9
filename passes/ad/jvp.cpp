#include "passes/ad/jvp.h"

#include <fmt/format.h>

#include <unordered_map>

#include "passes/ad/jvp_rules.h"
#include "passes/ad/linearize_rules.h"
#include "passes/jaxpr_util.h"
#include "passes/plain_decisions.h"
#include "refjit/ir/error.h"

namespace refjit {

const JvpRuleTable& jvp_rules() {
  static const JvpRuleTable table = [] {
    JvpRuleTable t;
    register_elementwise_jvp_rules(t);
    register_shape_jvp_rules(t);
    register_window_jvp_rules(t);
    register_ref_jvp_rules(t);
    register_control_jvp_rules(t);
    register_collective_jvp_rules(t);
    register_host_jvp_rules(t);
    register_linalg_jvp_rules(t);
    return t;
  }();
  return table;
}

namespace {

// Names ref binders for E1 messages: arguments, closed-over refs, refs made by new_ref.
std::string ref_name(const Jaxpr& f, const Atom& a) {
  if (!is_var(a)) return "a literal";
  Var v = as_var(a);
  const std::string& name = f.info(v).name;
  std::string named = name.empty() ? "" : fmt::format(" `{}`", name);
  for (size_t i = 0; i < f.invars.size(); ++i)
    if (f.invars[i] == v) return fmt::format("the ref argument{} at position {}", named, i);
  for (size_t i = 0; i < f.constvars.size(); ++i)
    if (f.constvars[i] == v) return fmt::format("the closed-over ref{} (constvar {})", named, i);
  for (size_t k = 0; k < f.eqns.size(); ++k)
    for (Var o : f.eqns[k].outs)
      if (o == v) return fmt::format("the ref{} created by {}", named, describe_eqn(f.eqns[k], k));
  return "a ref";
}

}  // namespace

JvpResult jvp_jaxpr_general(const Jaxpr& f_in, const std::vector<bool>& nonzero_tangents,
                            const std::vector<bool>& instantiate_in, bool for_linearize) {
  std::optional<Jaxpr> plain;  // a derived program's decisions, written out
  const Jaxpr& f = plain_decisions(f_in, plain);
  if (nonzero_tangents.size() != f.invars.size())
    throw Error(fmt::format("jvp: {} tangent flags given for a function of {} arguments",
                            nonzero_tangents.size(), f.invars.size()));
  std::vector<bool> inst = instantiate_in;
  if (inst.empty()) inst.assign(f.outvars.size(), true);

  JvpResult result;
  JaxprBuilder b;
  JvpCtx ctx{Emitter(b, &result.tangent_eqn, false),
             Emitter(b, &result.tangent_eqn, true),
             &f,
             "",
             "",
             for_linearize,
             {}};
  ctx.t.track_linear(&ctx.linear);
  std::unordered_map<uint32_t, Atom> primal;
  std::unordered_map<uint32_t, MaybeAtom> tangent;
  auto read_p = [&](const Atom& a) -> Atom { return is_var(a) ? primal.at(as_var(a).id) : a; };
  auto read_t = [&](const Atom& a) -> MaybeAtom {
    if (!is_var(a)) return std::nullopt;
    auto it = tangent.find(as_var(a).id);
    return it == tangent.end() ? std::nullopt : it->second;
  };

  for (Var v : f.constvars) primal[v.id] = b.add_constvar(f.type_of(v), f.info(v).name);
  for (Var v : f.invars) primal[v.id] = b.add_invar(f.type_of(v), f.info(v).name);
  for (size_t i = 0; i < f.invars.size(); ++i) {
    if (!nonzero_tangents[i]) continue;
    Var v = f.invars[i];
    const std::string& n = f.info(v).name;
    Var tv = b.add_invar(f.type_of(v), n.empty() ? "" : n + "_dot");
    ctx.linear.insert(tv.id);
    if (has_tangent(f.type_of(v))) tangent[v.id] = Atom(tv);
  }

  for (size_t k = 0; k < f.eqns.size(); ++k) {
    const Eqn& e = f.eqns[k];
    result.source_eqn.resize(b.jaxpr().eqns.size(), k == 0 ? 0 : k - 1);  // eqn k - 1's
    JvpArgs args{e, {}, {}, {}};
    bool any_tangent = false;
    for (const Atom& a : e.ins) {
      args.primals.push_back(read_p(a));
      args.tangents.push_back(read_t(a));
      any_tangent |= args.tangents.back().has_value();
    }
    // Linearizing, a primitive's linearize rule comes first; the JVP rule is the fallback.
    const JvpRule* rule = ctx.for_linearize ? linearize_jvp_rules().find(e.prim) : nullptr;
    if (!rule) rule = jvp_rules().find(e.prim);
    // Ops with ref operands and new_ref always go through their rules (every internal ref
    // gets a tangent twin; E1 is checked); other ops with zero tangents are just copied.
    // Structured eqns (emits_primal) without tangents are copied: nothing differentiated
    // flows into their bodies.
    const bool needs_rule = any_tangent || (touches_refs(f, e) && !(rule && rule->emits_primal));
    std::vector<MaybeAtom> touts(e.outs.size());
    if (needs_rule && !rule && any_tangent)
      throw Error(
          fmt::format("jvp: no differentiation rule for `{}` ({}); it cannot be "
                      "differentiated, wrap its operands in stop_gradient",
                      prim_name(e.prim), describe_eqn(e, k)));
    if (!needs_rule || !rule || !rule->emits_primal)
      args.primal_outs = ctx.p.copy_eqn(f, e, args.primals);
    if (needs_rule && rule) {
      ctx.where = describe_eqn(e, k);
      ctx.ref_name = e.ins.empty() ? "" : ref_name(f, e.ins[0]);
      touts = rule->fn(ctx, args);
      if (touts.size() != e.outs.size())
        throw Error(fmt::format("internal: jvp rule of {} returned {} tangents for {} outputs",
                                prim_name(e.prim), touts.size(), e.outs.size()));
    }
    for (size_t i = 0; i < e.outs.size(); ++i) {
      primal[e.outs[i].id] = args.primal_outs.at(i);
      if (touts[i] && has_tangent(f.type_of(e.outs[i]))) tangent[e.outs[i].id] = touts[i];
    }
  }

  std::vector<Atom> outs;
  for (const Atom& a : f.outvars) outs.push_back(read_p(a));
  for (size_t i = 0; i < f.outvars.size(); ++i) {
    MaybeAtom t = read_t(f.outvars[i]);
    bool present = t.has_value() || inst[i];
    result.nonzero_out.push_back(present);
    if (present) outs.push_back(instantiate(ctx.t, t, f.type_of(f.outvars[i]).array));
  }
  b.set_outvars(std::move(outs));
  result.jaxpr = b.finish();
  result.tangent_eqn.resize(result.jaxpr.eqns.size(), false);
  result.source_eqn.resize(result.jaxpr.eqns.size(), f.eqns.empty() ? 0 : f.eqns.size() - 1);
  return result;
}

Jaxpr jvp_jaxpr(const Jaxpr& f, std::vector<bool> nonzero_tangents) {
  return jvp_jaxpr_general(f, nonzero_tangents, {}).jaxpr;
}

}  // namespace refjit
