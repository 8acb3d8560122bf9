#include "backend/decision_bodies.h"

#include <unordered_map>

#include "ir/sub_jaxprs.h"

namespace refjit {

Eqn eqn_with_body(Prim prim, const Jaxpr& j, const std::vector<size_t>& eqns) {
  return eqn_with_body(prim, j, eqns, {j.eqns.at(eqns.back()).outs.at(0)});
}

Eqn eqn_with_body(Prim prim, const Jaxpr& j, const std::vector<size_t>& eqns,
                  const std::vector<Var>& results) {
  Jaxpr body;
  std::unordered_map<uint32_t, Var> inner;  // var of j -> var of the body
  std::vector<Atom> operands;
  auto operand = [&](const Atom& a) -> Atom {
    if (!is_var(a)) return a;
    if (auto it = inner.find(as_var(a).id); it != inner.end()) return it->second;
    const Var v = body.new_var(j.type_of(as_var(a)));
    body.invars.push_back(v);
    operands.push_back(a);
    inner.emplace(as_var(a).id, v);
    return v;
  };
  for (size_t k : eqns) {
    const Eqn& e = j.eqns[k];
    Eqn member{e.prim, e.params, {}, {}};
    for (const Atom& a : e.ins) member.ins.push_back(operand(a));
    for (Var o : e.outs) {
      const Var v = body.new_var(j.type_of(o));
      inner[o.id] = v;
      member.outs.push_back(v);
    }
    body.eqns.push_back(std::move(member));
  }
  for (Var r : results) body.outvars.push_back(inner.at(r.id));
  Params params;
  params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(body)));
  return Eqn{prim, std::move(params), std::move(operands), results};
}

namespace {

// Whether `p` holds a body that a decision made: not a program the passes below rewrite again.
bool is_decision_body(Prim p) {
  return p == Prim::fused || p == Prim::product_epilogue || p == Prim::row_loop;
}

using PlansByJaxpr = std::unordered_map<const Jaxpr*, const JaxprBuffers*>;

Jaxpr rewrite_in(const Jaxpr& j, const PlansByJaxpr& plans, const JaxprRewrite& rewrite) {
  const auto it = plans.find(&j);
  Jaxpr out = rewrite(j, it == plans.end() ? nullptr : it->second);
  for (Eqn& e : out.eqns) {
    if (!prim_info(e.prim).has_subjaxprs || is_decision_body(e.prim)) continue;
    // (The kept eqns share their bodies with `j`'s: the plans are found by those pointers.)
    rewrite_sub_jaxprs(e, [&](const Jaxpr& body) { return rewrite_in(body, plans, rewrite); });
  }
  return out;
}

}  // namespace

Jaxpr rewrite_every_jaxpr(const Jaxpr& program, const BufferAssignment* assignment,
                          const JaxprRewrite& rewrite) {
  PlansByJaxpr plans;
  if (assignment)
    for (const JaxprBuffers& p : assignment->jaxprs) plans.emplace(p.jaxpr, &p);
  return rewrite_in(program, plans, rewrite);
}

}  // namespace refjit
