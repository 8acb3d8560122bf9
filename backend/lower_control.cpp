// Lowering of the structured primitives. jit and custom_vjp_call are inlined; scan becomes
// an scf.for whose carries live in the result buffers; cond becomes an scf.index_switch
// whose branches write into the result buffers. Following a buffer assignment, sub-jaxprs
// are lowered with their own plans (lower_planned) and copy only what those list.
#include <fmt/format.h>

#include <functional>

#include "backend/lowering.h"
#include "ir/loop_params.h"

namespace refjit::backend {
namespace {

std::vector<Value> operand_buffers(LowerCtx& c, const Eqn& e, size_t first, size_t count) {
  std::vector<Value> v;
  for (size_t i = first; i < first + count; ++i) v.push_back(c.buffer(e.ins.at(i)));
  return v;
}

// Copies new carry values into the carry buffers. A new carry may alias an old carry buffer
// (a body returning its carry, or swapping two): those go through fresh buffers first.
void store_carries(LowerCtx& c, const Eqn& e, std::vector<Value> next,
                   const std::vector<Value>& carry) {
  for (size_t k = 0; k < carry.size(); ++k) {
    if (c.owned_by_current_scope(next[k])) continue;
    ArrayType at = c.type_of(e.outs[k]).array;
    Value tmp = c.alloc(at);
    c.copy(next[k], tmp, at);
    next[k] = tmp;
  }
  for (size_t k = 0; k < carry.size(); ++k) c.copy(next[k], carry[k], c.type_of(e.outs[k]).array);
}

void lower_call(LowerCtx& c, const Eqn& e, const char* param) {
  const JaxprPtr& body = e.params.get<JaxprPtr>(param);
  if (!body) fail_eqn(e, fmt::format("param {} holds no jaxpr", param));
  if (body->outvars.size() != e.outs.size()) fail_eqn(e, "the body's outputs do not match");
  if (c.buffers()) {
    // The results' buffers (an operand's for an updated handed-over operand, else fresh
    // ones here) exist before the body, which computes or copies its results into them.
    for (Var v : e.outs) c.result_buffer(v);
    c.lower_planned(*body, 0, operand_buffers(c, e, 0, e.ins.size()));
    return;
  }
  std::vector<Value> outs = c.lower_inline(*body, operand_buffers(c, e, 0, e.ins.size()));
  for (size_t i = 0; i < outs.size(); ++i) c.bind(e.outs[i], outs[i]);
}

// The loop over a scan's steps: `step(t)` emits one step's code in a scope of its own, with t
// the index of the step's row of xs/ys (counting down for a reverse scan).
void scan_steps(LowerCtx& c, int64_t length, bool reverse, const std::function<void(Value)>& step) {
  c.loop_nest({length}, [&](Ivs i) {
    Value t = reverse ? Value(c.b.create<arith::SubIOp>(c.loc, c.index(length - 1), i[0])) : i[0];
    c.enter_loop();
    c.with_scope([&] { step(t); });
    c.exit_loop();
  });
}

// Performs the plan's copies of eqn `e` into its carries (its first `n` results' buffers), each
// from its initial value, operand `first_init` + k for carry k.
void copy_into_carries(LowerCtx& c, const Eqn& e, size_t n, size_t first_init) {
  for (const Copy& cp : c.eqn_buffers()->copies) {
    size_t k = 0;
    while (k < n && c.buffers()->buffer_of_var.at(e.outs[k].id) != cp.dst) ++k;
    if (k == n) fail_eqn(e, "the buffer plan lists a copy into no carry");
    c.perform_copy(cp, &e.ins.at(first_init + k));
  }
}

// Following the plan: carry k lives in the scan's result buffer k for the whole loop (the
// operand's own buffer when it is handed over, else filled once before the loop, as the
// eqn's copies list); the body updates it in place and its end copies put the ys into
// their rows and any carry-out not computed in place into the carry buffer.
void lower_scan_planned(LowerCtx& c, const Eqn& e, const ScanParams& scan,
                        const std::vector<Value>& consts, const std::vector<Value>& xs) {
  const size_t nc = scan.num_consts, nk = scan.num_carry;
  std::vector<Value> carry, ys;
  for (size_t k = 0; k < e.outs.size(); ++k)
    (k < nk ? carry : ys).push_back(c.result_buffer(e.outs[k]));
  copy_into_carries(c, e, nk, nc);

  scan_steps(c, scan.length, scan.reverse, [&](Value t) {
    std::vector<Value> args = consts;
    args.insert(args.end(), carry.begin(), carry.end());
    for (Value x : xs) args.push_back(c.row_view(x, t));  // refs: writes land in the row
    c.lower_planned(*scan.body, 0, args, [&] {
      // y rows are views of row t of the stacked outputs.
      const JaxprBuffers& p = *c.buffers();
      for (size_t b = 0; b < p.buffers.size(); ++b)
        if (p.buffers[b].origin == BufferOrigin::y_row)
          c.set_buffer_memory(static_cast<int>(b), c.row_view(ys.at(p.buffers[b].index), t));
    });
  });
}

void lower_scan(LowerCtx& c, const Eqn& e) {
  const ScanParams scan_params = ScanParams::of(e);
  const Jaxpr& body = *scan_params.body;
  int64_t length = scan_params.length;
  bool reverse = scan_params.reverse;
  size_t nc = scan_params.num_consts;
  size_t nk = scan_params.num_carry;
  if (e.ins.size() < nc + nk || e.outs.size() < nk) fail_eqn(e, "operand counts do not match");
  size_t nx = e.ins.size() - nc - nk;
  size_t ny = e.outs.size() - nk;

  std::vector<Value> consts = operand_buffers(c, e, 0, nc);
  std::vector<Value> carry, ys, xs = operand_buffers(c, e, nc + nk, nx);
  if (c.buffers()) return lower_scan_planned(c, e, scan_params, consts, xs);
  for (size_t k = 0; k < nk; ++k) {
    Value buf = c.result_buffer(e.outs[k]);
    c.copy(c.buffer(e.ins[nc + k]), buf, c.type_of(e.outs[k]).array);
    carry.push_back(buf);
  }
  for (size_t j = 0; j < ny; ++j) ys.push_back(c.result_buffer(e.outs[nk + j]));

  scan_steps(c, length, reverse, [&](Value t) {
    std::vector<Value> args = consts;
    args.insert(args.end(), carry.begin(), carry.end());
    for (Value x : xs) args.push_back(c.row_view(x, t));  // refs: writes land in the row
    std::vector<Value> outs = c.lower_inline(body, args);
    if (outs.size() != nk + ny) fail_eqn(e, "the body's outputs do not match");
    for (size_t j = 0; j < ny; ++j)
      c.copy(outs[nk + j], c.row_view(ys[j], t), body.type_of(body.outvars[nk + j]).array);
    store_carries(c, e, std::vector<Value>(outs.begin(), outs.begin() + nk), carry);
  });
}

// Following the plan, carry k of a while lives in result buffer k (filled before the loop as the
// eqn's copies list, unless the operand was handed over) and the body, planned like a scan
// body, updates the carries in place. Without a plan, the carries are copied in and the body
// is lowered inline, its new carries copied back.
void lower_while(LowerCtx& c, const Eqn& e) {
  const WhileParams while_params = WhileParams::of(e);
  const Jaxpr& cond = *while_params.cond;
  const Jaxpr& body = *while_params.body;
  size_t nc = while_params.cond_nconsts;
  size_t nb = while_params.body_nconsts;
  if (e.ins.size() < nc + nb || e.outs.size() != e.ins.size() - nc - nb)
    fail_eqn(e, "operand counts do not match");
  std::vector<Value> cond_args = operand_buffers(c, e, 0, nc);
  std::vector<Value> body_args = operand_buffers(c, e, nc, nb);
  const bool planned = c.buffers() && !c.eqn_buffers()->sub_plans.empty();
  std::vector<Value> carry;
  for (size_t k = 0; k < e.outs.size(); ++k) {
    Value buf = c.result_buffer(e.outs[k]);
    if (!planned) c.copy(c.buffer(e.ins[nc + nb + k]), buf, c.type_of(e.outs[k]).array);
    carry.push_back(buf);
  }
  if (planned) copy_into_carries(c, e, carry.size(), nc + nb);
  cond_args.insert(cond_args.end(), carry.begin(), carry.end());
  body_args.insert(body_args.end(), carry.begin(), carry.end());

  auto loop = c.b.create<mlir::scf::WhileOp>(c.loc, mlir::TypeRange{}, mlir::ValueRange{});
  mlir::OpBuilder::InsertionGuard guard(c.b);
  c.enter_loop();
  c.b.createBlock(&loop.getBefore());
  Value go;
  c.with_scope([&] {
    std::vector<Value> outs = c.lower_inline(cond, cond_args);
    if (outs.size() != 1) fail_eqn(e, "the condition must return one value");
    go = c.b.create<mlir::memref::LoadOp>(c.loc, outs[0], mlir::ValueRange{});
    if (go.getType() != c.b.getI1Type())  // bools are stored as bytes holding 0 or 1
      go = c.b.create<mlir::arith::TruncIOp>(c.loc, c.b.getI1Type(), go);
  });
  c.b.create<mlir::scf::ConditionOp>(c.loc, go, mlir::ValueRange{});
  c.b.createBlock(&loop.getAfter());
  c.with_scope([&] {
    if (planned) {
      c.lower_planned(body, 0, body_args);  // its end copies put the new carries in place
      return;
    }
    std::vector<Value> outs = c.lower_inline(body, body_args);
    if (outs.size() != carry.size()) fail_eqn(e, "the body's outputs do not match");
    store_carries(c, e, outs, carry);
  });
  c.b.create<mlir::scf::YieldOp>(c.loc);
  c.exit_loop();
}

void lower_cond(LowerCtx& c, const Eqn& e) {
  const JaxprList& branches = e.params.get<JaxprList>("branches");
  if (branches.empty() || e.ins.empty()) fail_eqn(e, "needs an index and at least one branch");
  int64_t n = static_cast<int64_t>(branches.size());
  std::vector<Value> ops = operand_buffers(c, e, 1, e.ins.size() - 1);
  std::vector<Value> results;
  for (Var v : e.outs) results.push_back(c.result_buffer(v));
  size_t branch_index = 0;
  auto emit_branch = [&](const Jaxpr& br) {
    size_t which = branch_index++;
    if (c.buffers()) {
      // Each branch computes or copies its results into the result buffers (its end copies).
      c.with_scope([&] { c.lower_planned(br, which, ops); });
      return;
    }
    c.with_scope([&] {
      std::vector<Value> outs = c.lower_inline(br, ops);
      if (outs.size() != results.size()) fail_eqn(e, "a branch's outputs do not match");
      for (size_t i = 0; i < outs.size(); ++i)
        c.copy(outs[i], results[i], c.type_of(e.outs[i]).array);
    });
  };
  if (n == 1) {
    emit_branch(*branches[0]);
    return;
  }
  Value idx = c.clamp_to_index(c.load_index_scalar(e.ins[0]), 0, n - 1);
  std::vector<int64_t> cases;
  for (int64_t k = 0; k + 1 < n; ++k) cases.push_back(k);
  auto sw = c.b.create<mlir::scf::IndexSwitchOp>(c.loc, mlir::TypeRange{}, idx, cases, n - 1);
  mlir::OpBuilder::InsertionGuard guard(c.b);
  auto fill_region = [&](mlir::Region& r, const Jaxpr& br) {
    mlir::Block* blk = c.b.createBlock(&r);
    c.b.setInsertionPointToEnd(blk);
    auto y = c.b.create<mlir::scf::YieldOp>(c.loc);
    c.b.setInsertionPoint(y);
    emit_branch(br);
  };
  for (int64_t k = 0; k + 1 < n; ++k) fill_region(sw.getCaseRegions()[k], *branches[k]);
  fill_region(sw.getDefaultRegion(), *branches[n - 1]);
}

}  // namespace

void register_control_lowerings(LowerTable& t) {
  t.set(Prim::jit, [](LowerCtx& c, const Eqn& e) { lower_call(c, e, "jaxpr"); });
  t.set(Prim::custom_vjp_call, [](LowerCtx& c, const Eqn& e) {
    refuse_unknown_forward_map(e);
    lower_call(c, e, "call_jaxpr");
  });
  t.set(Prim::linear_solve, [](LowerCtx& c, const Eqn& e) { lower_call(c, e, "solve_jaxpr"); });
  t.set(Prim::scan, &lower_scan);
  t.set(Prim::cond, &lower_cond);
  t.set(Prim::while_, &lower_while);
}

}  // namespace refjit::backend
