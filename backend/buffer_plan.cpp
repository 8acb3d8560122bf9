#include "backend/buffer_plan.h"

#include "ir/sub_jaxprs.h"

namespace refjit {

namespace {

struct Hasher {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  void add(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  void add(const std::string& s) {
    add(s.size());
    for (char c : s) add(static_cast<uint64_t>(static_cast<unsigned char>(c)));
  }
  void add(const Atom& a) {
    if (is_var(a))
      add(as_var(a).id);
    else
      add(std::get<Literal>(a).type().str() + "literal");
  }
  void add(const Jaxpr& j) {
    add(j.vars.size());
    for (const VarInfo& v : j.vars) add(v.type.str());
    for (const auto* list : {&j.constvars, &j.invars}) {
      add(list->size());
      for (Var v : *list) add(v.id);
    }
    add(j.outvars.size());
    for (const Atom& a : j.outvars) add(a);
    add(j.eqns.size());
    for (const Eqn& e : j.eqns) {
      add(static_cast<uint64_t>(e.prim));
      add(e.ins.size());
      for (const Atom& a : e.ins) add(a);
      add(e.outs.size());
      for (Var v : e.outs) add(v.id);
      for_each_sub_jaxpr(e, [&](const Jaxpr& sub) { add(sub); });
    }
  }
};

}  // namespace

uint64_t jaxpr_signature(const Jaxpr& jaxpr) {
  Hasher h;
  h.add(jaxpr);
  return h.h;
}

BufferPlan default_buffer_plan(const Jaxpr& jaxpr, const BufferOptions& options) {
  BufferPlan plan;
  plan.assignment = std::make_shared<const BufferAssignment>(assign_buffers(jaxpr, options));
  plan.signature = jaxpr_signature(jaxpr);
  return plan;
}

BufferPlan naive_buffer_plan(const Jaxpr& jaxpr) {
  BufferPlan plan;
  plan.naive = true;
  plan.output_slot.assign(jaxpr.vars.size(), -1);
  std::vector<bool> produced_by_eqn(jaxpr.vars.size(), false);
  for (const Eqn& e : jaxpr.eqns)
    for (Var v : e.outs) produced_by_eqn[v.id] = true;
  for (size_t k = 0; k < jaxpr.outvars.size(); ++k) {
    if (!is_var(jaxpr.outvars[k])) continue;
    Var v = as_var(jaxpr.outvars[k]);
    if (produced_by_eqn[v.id] && plan.output_slot[v.id] < 0 && !jaxpr.type_of(v).is_ref)
      plan.output_slot[v.id] = static_cast<int32_t>(k);
  }
  return plan;
}

}  // namespace refjit
