#include "backend/fusion.h"

#include <algorithm>

#include "backend/decision_bodies.h"
#include "backend/row_loops.h"
#include "refjit/ir/use_def.h"

namespace refjit {

// Elementwise with operands of the result's shape or rank 0, a broadcast_in_dim (each
// element of its result is one load of its operand), or a view.
bool fusible(const Jaxpr& j, const Eqn& e) {
  if (is_view_eqn(j, e)) return true;
  if (e.prim == Prim::broadcast_in_dim)
    return e.ins.size() == 1 && e.outs.size() == 1 && !j.type_of(e.outs[0]).is_ref &&
           (!is_var(e.ins[0]) || !j.type_of(as_var(e.ins[0])).is_ref);
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

// A reduction whose operand a group may compute element by element inside its loops, so
// that `sum(f(x))` keeps no array of f(x).
bool reduction_root(const Jaxpr& j, const Eqn& e) {
  return is_row_reduction(e.prim) && e.ins.size() == 1 && e.outs.size() == 1 && is_var(e.ins[0]) &&
         !j.type_of(as_var(e.ins[0])).is_ref;
}

int buffer_of(const JaxprBuffers& p, const Atom& a) {
  return is_var(a) && as_var(a).id < p.buffer_of_var.size() ? p.buffer_of_var[as_var(a).id] : -1;
}

namespace {

// Cheap enough to compute once per reader rather than store and read back.
bool duplicable(Prim p) {
  switch (p) {
    case Prim::add:
    case Prim::sub:
    case Prim::mul:
    case Prim::neg:
    case Prim::max:
    case Prim::min:
    case Prim::broadcast_in_dim:
    case Prim::convert_element_type: return true;
    default: return false;
  }
}

}  // namespace

std::vector<std::vector<int>> written_buffers(const Jaxpr& j, const JaxprBuffers& p) {
  std::vector<std::vector<int>> w(j.eqns.size());
  auto buf = [&](const Atom& a) { return buffer_of(p, a); };
  for (size_t i = 0; i < j.eqns.size() && i < p.eqns.size(); ++i) {
    const Eqn& e = j.eqns[i];
    EqnAction act = p.eqns[i].action;
    if (act == EqnAction::view || act == EqnAction::move || act == EqnAction::no_op) continue;
    for (Var v : e.outs)
      if (int b = buf(v); b >= 0) w[i].push_back(b);
    // A call body may update the operands handed over to it (random program 6334: an
    // elementwise chain fused past a call read an operand the call had overwritten).
    for (int b : p.eqns[i].handed_over) w[i].push_back(b);
    // Ref writes: swap / addupdate, and whatever a sub-jaxpr does with a ref operand.
    for (const Atom& a : e.ins)
      if (is_var(a) && j.type_of(as_var(a)).is_ref)
        if (int b = buf(a); b >= 0) w[i].push_back(b);
  }
  return w;
}

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
  std::vector<std::vector<size_t>> groups;  // in reverse program order while building
  // Whether eqn k's result is written to memory: a member of a group other than its root, or
  // an eqn computed again inside its readers' groups, is not (its planned in-place write
  // does not happen). Known for every k after the eqn being placed: they were placed first.
  auto stored = [&](size_t k) {
    const int32_t g = plan.group_of[k];
    return g == -1 || (g >= 0 && groups[g].front() == k);
  };
  // Whether an eqn between i and the group's root, outside the group, overwrites the buffer
  // of one of eqn i's operands (then i must run at its own position).
  auto operands_clobbered = [&](size_t i, int32_t group, size_t root) {
    if (!buffers) return false;
    for (const Atom& a : j.eqns[i].ins) {
      if (!is_var(a) || as_var(a).id >= buffers->buffer_of_var.size()) continue;
      int b = buffers->buffer_of_var[as_var(a).id];
      if (b < 0) continue;
      for (size_t k = i + 1; k < root; ++k)
        if (plan.group_of[k] != group && stored(k) &&
            std::find(writes[k].begin(), writes[k].end(), b) != writes[k].end())
          return true;
    }
    return false;
  };

  // Walk backwards so every consumer is placed before its producers.
  std::vector<Shape> group_shape;
  std::vector<std::vector<int32_t>> dup_groups(n);  // the groups a duplicated eqn is in
  for (size_t i = n; i-- > 0;) {
    const Eqn& e = j.eqns[i];
    if (reduction_root(j, e)) {  // roots a group of its operand's shape
      plan.group_of[i] = static_cast<int32_t>(groups.size());
      groups.push_back({i});
      group_shape.push_back(j.type_of(as_var(e.ins[0])).array.shape);
      continue;
    }
    if (!fusible(j, e)) continue;
    Var out = e.outs[0];
    const Shape& shape = j.type_of(out).array.shape;
    // The groups reading the result (a duplicated reader counts each group it is in), if
    // every reader is in a group of this shape that may compute it.
    std::vector<int32_t> readers;
    bool all = !returned[out.id] && !consumers[out.id].empty();
    // A view is evaluated at the index its reader asks for, so it may have another shape
    // when only views read it; anything else is evaluated at the root's index and may feed
    // no view (`pad(exp(x))` stores exp(x)).
    const bool view = is_view_eqn(j, e);
    bool read_by_view = false, read_by_other = false;
    for (size_t k : consumers[out.id])
      (is_view_eqn(j, j.eqns[k]) ? read_by_view : read_by_other) = true;
    if (read_by_view && !view) all = false;
    for (size_t k : consumers[out.id]) {
      std::vector<int32_t> of_reader;
      if (plan.group_of[k] >= 0)
        of_reader = {plan.group_of[k]};
      else if (plan.group_of[k] == FusionPlan::kDuplicated)
        of_reader = dup_groups[k];
      else
        all = false;
      for (int32_t g : of_reader)
        if (std::find(readers.begin(), readers.end(), g) == readers.end()) readers.push_back(g);
    }
    for (int32_t g : readers)
      all = all && (group_shape[g] == shape || (view && !read_by_other)) &&
            !operands_clobbered(i, g, groups[g].front());
    int32_t target = all && readers.size() == 1 ? readers[0] : -1;
    // A view roots no group: one alone is a copy, which its own rule (or the decisions that
    // read slices in place: move_windows, concat_windows) does as well.
    if (view && target < 0) continue;
    if (all && readers.size() > 1 && duplicable(e.prim)) {
      for (int32_t g : readers) groups[g].push_back(i);
      plan.group_of[i] = FusionPlan::kDuplicated;
      dup_groups[i] = readers;
      continue;
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

Jaxpr fuse_elementwise(const Jaxpr& program, const BufferAssignment* assignment) {
  return rewrite_every_jaxpr(program, assignment, [](const Jaxpr& j, const JaxprBuffers* plan) {
    const FusionPlan fusion = plan_fusion(j, plan);
    Jaxpr out = j;
    out.eqns.clear();
    for (size_t i = 0; i < j.eqns.size(); ++i) {
      if (fusion.is_root(i))
        out.eqns.push_back(eqn_with_body(Prim::fused, j, fusion.groups[fusion.group_of[i]]));
      else if (fusion.lowered_alone(i))
        out.eqns.push_back(j.eqns[i]);
      // else a member (or a duplicate): computed in its group's fused eqn
    }
    return out;
  });
}

Jaxpr fuse_elementwise(const Jaxpr& program, const BufferOptions& options) {
  const BufferAssignment provisional = assign_buffers(program, options);
  return fuse_elementwise(program, &provisional);
}

}  // namespace refjit
