#include "compiler/backend/fusion.h"

#include <algorithm>

namespace refjit {

namespace {

// Elementwise with operands of the result's shape or rank 0.
bool fusible(const Jaxpr& j, const Eqn& e) {
  if (e.outs.size() != 1 || e.ins.empty() || !has_elementwise_lowering(e.prim)) return false;
  const Type rt = j.type_of(e.outs[0]);
  if (rt.is_ref) return false;
  for (const Atom& a : e.ins) {
    Type t = is_var(a) ? j.type_of(as_var(a)) : Type(std::get<Literal>(a).type());
    if (t.is_ref) return false;
    if (t.array.rank() != 0 && t.array.shape != rt.array.shape) return false;
  }
  return true;
}

// Per eqn, the buffers whose contents it (over)writes under the assignment `p`.
std::vector<std::vector<int>> written_buffers(const Jaxpr& j, const JaxprBuffers& p) {
  std::vector<std::vector<int>> w(j.eqns.size());
  auto buf = [&](const Atom& a) {
    return is_var(a) && as_var(a).id < p.buffer_of_var.size() ? p.buffer_of_var[as_var(a).id] : -1;
  };
  for (size_t i = 0; i < j.eqns.size() && i < p.eqns.size(); ++i) {
    const Eqn& e = j.eqns[i];
    EqnAction act = p.eqns[i].action;
    if (act == EqnAction::view || act == EqnAction::move || act == EqnAction::no_op) continue;
    for (Var v : e.outs)
      if (int b = buf(v); b >= 0) w[i].push_back(b);
    // Ref writes: swap / addupdate, and whatever a sub-jaxpr does with a ref operand.
    for (const Atom& a : e.ins)
      if (is_var(a) && j.type_of(as_var(a)).is_ref)
        if (int b = buf(a); b >= 0) w[i].push_back(b);
  }
  return w;
}

}  // namespace

FusionPlan plan_fusion(const Jaxpr& j, const JaxprBuffers* buffers) {
  const size_t n = j.eqns.size();
  FusionPlan plan;
  plan.group_of.assign(n, -1);
  // consumers[var id] = indices of the eqns reading it (with repeats); returned vars are
  // never fused away.
  std::vector<std::vector<size_t>> consumers(j.vars.size());
  std::vector<bool> returned(j.vars.size(), false);
  for (size_t i = 0; i < n; ++i)
    for (const Atom& a : j.eqns[i].ins)
      if (is_var(a)) consumers[as_var(a).id].push_back(i);
  for (const Atom& a : j.outvars)
    if (is_var(a)) returned[as_var(a).id] = true;

  std::vector<std::vector<int>> writes;
  if (buffers) writes = written_buffers(j, *buffers);
  // Whether an eqn between i and the group's root, outside the group, overwrites the buffer
  // of one of eqn i's operands (then i must run at its own position).
  auto operands_clobbered = [&](size_t i, int32_t group, size_t root) {
    if (!buffers) return false;
    for (const Atom& a : j.eqns[i].ins) {
      if (!is_var(a) || as_var(a).id >= buffers->buffer_of_var.size()) continue;
      int b = buffers->buffer_of_var[as_var(a).id];
      if (b < 0) continue;
      for (size_t k = i + 1; k < root; ++k)
        if (plan.group_of[k] != group &&
            std::find(writes[k].begin(), writes[k].end(), b) != writes[k].end())
          return true;
    }
    return false;
  };

  // Walk backwards so every consumer is placed before its producers.
  std::vector<std::vector<size_t>> groups;  // in reverse program order while building
  std::vector<Shape> group_shape;
  for (size_t i = n; i-- > 0;) {
    const Eqn& e = j.eqns[i];
    if (!fusible(j, e)) continue;
    Var out = e.outs[0];
    const Shape& shape = j.type_of(out).array.shape;
    int32_t target = -1;
    const auto& uses = consumers[out.id];
    if (!returned[out.id] && !uses.empty()) {
      target = plan.group_of[uses.front()];
      for (size_t k : uses)
        if (plan.group_of[k] != target) target = -1;
      if (target >= 0 && group_shape[target] != shape) target = -1;
      if (target >= 0 && operands_clobbered(i, target, groups[target].front())) target = -1;
    }
    if (target < 0) {
      target = static_cast<int32_t>(groups.size());
      groups.emplace_back();
      group_shape.push_back(shape);
    }
    plan.group_of[i] = target;
    groups[target].push_back(i);
  }

  // Keep groups of two or more, renumbered in program order of their roots.
  std::vector<int32_t> renumber(groups.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    int32_t g = plan.group_of[i];
    if (g < 0) continue;
    if (groups[g].size() < 2) {
      plan.group_of[i] = -1;
      continue;
    }
    if (groups[g].front() == i) {  // the root (built first, largest index)
      renumber[g] = static_cast<int32_t>(plan.groups.size());
      plan.groups.emplace_back(groups[g].rbegin(), groups[g].rend());
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (plan.group_of[i] >= 0) plan.group_of[i] = renumber[plan.group_of[i]];
  return plan;
}

}  // namespace refjit
