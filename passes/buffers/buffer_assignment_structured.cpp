// Buffer assignment (buffer_assigner.h): scan, cond and call eqns, whose bodies get plans of
// their own.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "ir/loop_params.h"
#include "passes/buffers/buffer_assigner.h"
#include "passes/buffers/buffer_rules.h"
#include "refjit/ir/error.h"

namespace refjit::buffers {

Buffer JaxprAssigner::binder(BufferOrigin origin, int index, const Atom& operand,
                             bool writable) const {
  const Type t = j_.type_of(operand);
  return Buffer{.type = t.array,
                .bytes = t.array.byte_size(),
                .origin = origin,
                .index = index,
                .writable = writable || t.is_ref,
                .outer = buf(operand)};
}

bool JaxprAssigner::can_hand_over(const Eqn& e, size_t k, int i) const {
  int b = buf(e.ins[k]);
  if (b < 0 || !p_.buffers[b].writable || j_.type_of(e.ins[k]).is_ref || live_after(b, i))
    return false;
  for (size_t m = 0; m < e.ins.size(); ++m)
    if (m != k && buf(e.ins[m]) == b) return false;
  return true;
}

bool JaxprAssigner::sub_ref_writes(const Eqn& e, int i, const Jaxpr& body, size_t first_operand) {
  std::vector<RefEffects> fx = compute_effects(body);
  for (size_t k = 0; k < fx.size() && first_operand + k < e.ins.size(); ++k)
    if ((fx[k].written || fx[k].accumulated) && is_var(e.ins[first_operand + k]) &&
        j_.type_of(e.ins[first_operand + k]).is_ref &&
        !before_ref_write(as_var(e.ins[first_operand + k]), i, std::nullopt,
                          /*operands_live=*/true))
      return false;
  return true;
}

std::string JaxprAssigner::sub_where(const Eqn& e, size_t i, const std::string& what) const {
  return fmt::format("{} of eqn {} ({}) of {}", what, i, prim_name(e.prim), entry_.where);
}

void JaxprAssigner::structured(const Eqn& e, size_t i) {
  p_.eqns[i].action = EqnAction::structured;
  switch (e.prim) {
    case Prim::scan: return scan(e, i);
    case Prim::cond: return cond(e, i);
    case Prim::jit: return call(e, i, "jaxpr");
    case Prim::custom_vjp_call: return call(e, i, "call_jaxpr");
    case Prim::linear_solve: return call(e, i, "solve_jaxpr");
    case Prim::while_: return while_loop(e, i);
    default: return all_fresh(e, i);
  }
}

// A while loop's carries live in its result buffers (as a scan's, loop_carries); its body is
// planned like a scan body without rows (its consts, then the carries), so it runs in place
// and fused. The condition, a small function of the carries, is lowered as it is. The refs
// its cond or body write (operands: the cond's consts, then the body's) are written while
// every operand is live: a value read from such a ref before the loop, and read by the loop,
// gets a copy of its own.
void JaxprAssigner::while_loop(const Eqn& e, size_t i) {
  const int ii = static_cast<int>(i);
  const WhileParams while_params = WhileParams::of(e);
  const Jaxpr& body = *while_params.body;
  const auto cond_consts = while_params.cond_nconsts;
  const auto body_consts = while_params.body_nconsts;
  if (!sub_ref_writes(e, ii, *e.params.get<JaxprPtr>("cond_jaxpr"), 0)) return;
  if (!sub_ref_writes(e, ii, body, cond_consts)) return;
  loop_carries(e, ii, cond_consts + body_consts, e.outs.size());
  Entry sub = loop_body_entry(e, i, cond_consts, body_consts, e.outs.size());
  p_.eqns[i].sub_plans.push_back(a_.assign(body, std::move(sub)));
}

Entry JaxprAssigner::loop_body_entry(const Eqn& e, size_t i, size_t first, size_t nc,
                                     size_t nk) const {
  Entry sub{.kind = JaxprKind::scan_body,
            .parent = self_,
            .parent_eqn = static_cast<int>(i),
            .where = sub_where(e, i, "body"),
            .in_loop = true,
            .num_consts = static_cast<int>(nc),
            .num_carry = static_cast<int>(nk)};
  for (size_t k = 0; k < nc; ++k)
    sub.binders.push_back(
        binder(BufferOrigin::scan_const, static_cast<int>(k), e.ins.at(first + k), false));
  for (size_t k = 0; k < nk; ++k) {
    Buffer c = binder(BufferOrigin::carry, static_cast<int>(k), e.ins.at(first + nc + k), true);
    c.outer = buf(e.outs[k]);
    sub.binders.push_back(c);
  }
  return sub;
}

// The carries of a loop (scan or while): carry k, operand `first + k`, lives in result buffer
// k for the whole loop. That is the operand's own buffer when it can be handed over (nothing
// reads it after the loop), else a fresh one filled before the loop (the eqn's copies).
void JaxprAssigner::loop_carries(const Eqn& e, int ii, size_t first, size_t nk) {
  EqnBuffers& E = p_.eqns[static_cast<size_t>(ii)];
  std::set<int> taken;
  for (size_t k = 0; k < nk && k < e.outs.size(); ++k) {
    Var res = e.outs[k];
    const ArrayType& t = j_.type_of(res).array;
    size_t op = first + k;
    int b = buf(e.ins.at(op));
    if (can_hand_over(e, op, ii) && !taken.count(b)) {
      taken.insert(b);
      set(res, b);
      origin_get_[res.id] = origin_get_[as_var(e.ins[op]).id];
      E.in_place[k] = static_cast<int>(op);
      continue;
    }
    int d = fresh(t, BufferOrigin::internal, ii);
    set(res, d);
    if (b < 0) {
      E.copies.push_back(make_copy(CopyKind::fill, -1, d, t.byte_size(), ii, std::nullopt,
                                   fmt::format("carry {} starts from a literal", k)));
    } else {
      Var x = as_var(e.ins[op]);
      E.copies.push_back(make_copy(
          CopyKind::whole, b, d, t.byte_size(), ii, x,
          fmt::format(
              "initial carry {} `{}` cannot become the loop's carry buffer: {}", k, name(x),
              p_.buffers[b].writable && !live_after(b, ii)
                  ? fmt::format("another operand of the {} shares its buffer", prim_name(e.prim))
                  : why_not_writable(b, ii))));
    }
  }
}

void JaxprAssigner::scan(const Eqn& e, size_t i) {
  const ScanParams scan_params = ScanParams::of(e);
  const Jaxpr& body = *scan_params.body;
  size_t nc = scan_params.num_consts;
  size_t nk = scan_params.num_carry;
  int ii = static_cast<int>(i);
  EqnBuffers& E = p_.eqns[i];
  if (!sub_ref_writes(e, ii, body, 0)) return;
  loop_carries(e, ii, nc, nk);
  for (size_t k = nk; k < e.outs.size(); ++k)
    set(e.outs[k], fresh(j_.type_of(e.outs[k]).array, BufferOrigin::internal, ii));

  Entry sub = loop_body_entry(e, i, 0, nc, nk);
  for (size_t k = nc + nk; k < e.ins.size(); ++k) {
    Type bt = body.type_of(body_binders(body).at(k));
    Buffer row = binder(BufferOrigin::x_row, static_cast<int>(k - nc - nk), e.ins[k], false);
    row.type = bt.array;
    row.bytes = bt.array.byte_size();
    sub.binders.push_back(row);
  }
  for (size_t k = nk; k < e.outs.size(); ++k) sub.out_outer.push_back(buf(e.outs[k]));
  E.sub_plans.push_back(a_.assign(body, std::move(sub)));
}

void JaxprAssigner::cond(const Eqn& e, size_t i) {
  const JaxprList& branches = e.params.get<JaxprList>("branches");
  int ii = static_cast<int>(i);
  for (const JaxprPtr& br : branches)
    if (!sub_ref_writes(e, ii, *br, 1)) return;
  all_fresh(e, i);
  p_.eqns[i].action = EqnAction::structured;
  for (size_t b = 0; b < branches.size(); ++b) {
    Entry sub{.kind = JaxprKind::cond_branch,
              .parent = self_,
              .parent_eqn = ii,
              .where = sub_where(e, i, fmt::format("branch {}", b)),
              .in_loop = entry_.in_loop};
    for (size_t k = 1; k < e.ins.size(); ++k)
      sub.binders.push_back(binder(BufferOrigin::operand, k, e.ins[k], false));
    for (Var v : e.outs) sub.out_outer.push_back(buf(v));
    int plan = a_.assign(*branches[b], std::move(sub));
    p_.eqns[i].sub_plans.push_back(plan);
  }
}

void JaxprAssigner::call(const Eqn& e, size_t i, const char* param) {
  const Jaxpr& body = *e.params.get<JaxprPtr>(param);
  int ii = static_cast<int>(i);
  if (!sub_ref_writes(e, ii, body, 0)) return;
  Entry sub{.kind = JaxprKind::call_body,
            .parent = self_,
            .parent_eqn = ii,
            .where = sub_where(e, i, "body"),
            .in_loop = entry_.in_loop};
  for (size_t k = 0; k < e.ins.size(); ++k) {
    const bool hand_over = can_hand_over(e, k, ii);
    sub.binders.push_back(binder(BufferOrigin::operand, k, e.ins[k], hand_over));
    if (hand_over) p_.eqns[i].handed_over.push_back(buf(e.ins[k]));
  }
  int plan = a_.assign(body, std::move(sub));
  p_.eqns[i].sub_plans.push_back(plan);
  // Results: an operand's buffer when the body returns (an update of) its binder, else a
  // fresh buffer here that the body computes into.
  JaxprBuffers& bp = a_.out.jaxprs.at(plan);
  std::vector<int> outer_of_body(bp.buffers.size(), -1);
  for (size_t k = 0; k < e.outs.size() && k < body.outvars.size(); ++k) {
    Var res = e.outs[k];
    int bb = is_var(body.outvars[k]) ? bp.buffer_of_var[as_var(body.outvars[k]).id] : -1;
    if (bb >= 0 && bp.buffers[bb].origin == BufferOrigin::operand && bp.buffers[bb].outer >= 0 &&
        !j_.type_of(e.ins.at(bp.buffers[bb].index)).is_ref) {
      int op = bp.buffers[bb].index;
      set(res, bp.buffers[bb].outer);
      if (is_var(e.ins[op])) origin_get_[res.id] = origin_get_[as_var(e.ins[op]).id];
      p_.eqns[i].in_place[k] = op;
      continue;
    }
    if (bb >= 0 && outer_of_body[bb] >= 0) {
      set(res, outer_of_body[bb]);
      continue;
    }
    int d = fresh(j_.type_of(res).array, BufferOrigin::internal, ii);
    set(res, d);
    if (bb >= 0 && bp.buffers[bb].home == static_cast<int>(k)) {
      bp.buffers[bb].outer = d;
      outer_of_body[bb] = d;
      continue;
    }
    // The body copies the value into a result buffer that is this eqn's result.
    const ArrayType& t = j_.type_of(res).array;
    bp.buffers.push_back(Buffer{.type = t,
                                .bytes = t.byte_size(),
                                .origin = BufferOrigin::result,
                                .index = static_cast<int>(k),
                                .outer = d});
    int dst = static_cast<int>(bp.buffers.size()) - 1;
    Copy c = make_copy(bb < 0 ? CopyKind::fill : CopyKind::whole, bb, dst, t.byte_size(), -1,
                       std::nullopt, fmt::format("result {} of the body", k));
    if (bb >= 0) {
      c.value = as_var(body.outvars[k]);
      c.why =
          fmt::format("result {}: the body's value is in a buffer that cannot be the result", k);
    }
    bp.end_copies.push_back(std::move(c));
  }
}

}  // namespace refjit::buffers
