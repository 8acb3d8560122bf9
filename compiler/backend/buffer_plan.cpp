#include "compiler/backend/buffer_plan.h"

namespace refjit {

BufferPlan default_buffer_plan(const Jaxpr& jaxpr) {
  BufferPlan plan;
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
