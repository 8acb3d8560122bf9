// Row loops (row_loops.h): consecutive groups and reductions computed row by row in one loop,
// so each row is read from memory once. Part of LowerCtx (lowering.h).
#include "compiler/backend/fusion.h"
#include "compiler/backend/lowering.h"
#include "compiler/backend/mlir_pch.h"

namespace refjit::backend {

using mlir::Value;

namespace {

// The jaxpr holding the eqns that compute row-loop item eqn `e` (a fused eqn's body, or `j`)
// and its root there.
std::pair<const Jaxpr*, const Eqn*> item_root(const Jaxpr& j, const Eqn& e) {
  if (e.prim != Prim::fused) return {&j, &e};
  const Jaxpr& body = *e.params.get<JaxprPtr>("jaxpr");
  return {&body, &body.eqns.back()};
}

}  // namespace

void LowerCtx::in_row_item(const Jaxpr& j, const RowItem& item, Value dst,
                           const std::function<void(const Jaxpr&, const std::vector<size_t>&)>& f) {
  const Eqn& e = j.eqns[item.eqn];
  frames_.back().eqn = static_cast<int>(item.eqn);
  if (e.prim == Prim::fused)
    in_fused_body(e, dst, f);
  else
    f(j, {item.eqn});
}

void LowerCtx::lower_row_loop(const Jaxpr& j, const RowLoop& loop) {
  const int saved = frames_.back().eqn;
  const size_t n = loop.items.size();
  const int64_t blocks = loop.blocks();
  // Every item's buffer is made before the loop (result_buffer emits its view where it is
  // called, and the values must dominate the code after the loop too).
  std::vector<Value> dst(n);
  int64_t elements_per_row = 0;
  for (size_t k = 0; k < n; ++k) {
    const RowItem& item = loop.items[k];
    const Eqn& e = j.eqns[item.root()];
    frames_.back().eqn = static_cast<int>(item.root());
    const auto [in, root] = item_root(j, e);
    const ArrayType rt = type_of(e.outs.at(0)).array;
    const bool by_operand = is_row_reduction(root->prim) || item.kind == RowItemKind::matvec;
    const ArrayType loops = by_operand ? in->type_of(root->ins.at(0)).array : rt;
    if (loops.rank() < 1 || loops.shape[0] != loop.rows)
      fail_eqn(e, "is in a row loop but its first dim is not the loop's rows");
    elements_per_row += loops.num_elements() / loop.rows;
    if (item.kind == RowItemKind::partial) {
      dst[k] = alloc(ArrayType{rt.dtype, {loop.rows}});
    } else if (item.kind == RowItemKind::columns) {
      Shape per_block{blocks};
      per_block.insert(per_block.end(), rt.shape.begin(), rt.shape.end());
      dst[k] = alloc(ArrayType{rt.dtype, per_block});
    } else {
      dst[k] = result_buffer(e.outs[0]);
    }
  }
  // Passengers next: a view of an item's result needs its buffer.
  for (size_t k : loop.passengers) lower_eqn_at(j, k);
  auto over_blocks = b.create<mlir::scf::ForOp>(loc, index(0), index(blocks), index(1));
  {
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(over_blocks.getBody()->getTerminator());
    Value block = over_blocks.getInductionVar();
    for (size_t k = 0; k < n; ++k)
      if (loop.items[k].kind == RowItemKind::columns)
        in_row_item(j, loop.items[k], Value(), [&](const Jaxpr& in, const std::vector<size_t>& m) {
          start_block_partial(*this, in.eqns[m.back()], dst[k], block);
        });
    auto each_row = [&](Value row) {
      for (size_t k = 0; k < n; ++k) lower_row_item(j, loop.items[k], row, dst[k], block);
    };
    if (loop.block_rows == 1) {
      each_row(block);
    } else {
      Value first = b.create<mlir::arith::MulIOp>(loc, block, index(loop.block_rows));
      Value end = b.create<mlir::arith::MinSIOp>(
          loc, b.create<mlir::arith::AddIOp>(loc, first, index(loop.block_rows)), index(loop.rows));
      auto rows = b.create<mlir::scf::ForOp>(loc, first, end, index(1));
      b.setInsertionPoint(rows.getBody()->getTerminator());
      each_row(rows.getInductionVar());
    }
  }
  // Each block writes only its own rows and its own partials.
  mark_parallel(over_blocks, blocks, elements_per_row * loop.block_rows);
  for (size_t k = 0; k < n; ++k) {
    const RowItem& item = loop.items[k];
    if (!finished_after_loop(item.kind)) continue;
    const Eqn& e = j.eqns[item.root()];
    frames_.back().eqn = static_cast<int>(item.root());
    const ArrayType rt = type_of(e.outs[0]).array;
    const Value result = result_buffer(e.outs[0]);
    in_row_item(j, item, result, [&](const Jaxpr& in, const std::vector<size_t>& m) {
      const Eqn& root = in.eqns[m.back()];
      if (item.kind == RowItemKind::partial)
        store(combine_partials(*this, root, dst[k], loop.rows), result, rt.dtype, {});
      else
        combine_block_partials(*this, root, dst[k], blocks, result);
    });
  }
  frames_.back().eqn = saved;
}

void LowerCtx::lower_row_item(const Jaxpr& outer, const RowItem& item, Value row, Value dst,
                              Value block) {
  in_row_item(outer, item, dst, [&](const Jaxpr& j, const std::vector<size_t>& members) {
    lower_row_of(j, members, item.kind, row, dst, block);
  });
}

void LowerCtx::lower_row_of(const Jaxpr& j, const std::vector<size_t>& members, RowItemKind kind,
                            Value row, Value dst, Value block) {
  const Eqn& root = j.eqns[members.back()];
  const ArrayType rt = type_of(root.outs[0]).array;
  if (kind == RowItemKind::matvec) {
    store(dot_row(*this, root, row), dst, rt.dtype, {row});
    return;
  }
  if (is_row_reduction(root.prim)) {
    if (members.size() > 1)
      fused_operand_ = FusedOperand{as_var(root.ins[0]).id, &j,
                                    std::vector<size_t>(members.begin(), members.end() - 1)};
    if (kind == RowItemKind::columns)
      fold_row_into_block(*this, root, row, dst, block);
    else  // a row's result, or a full reduction's partial
      store(reduce_row(*this, root, row), dst, rt.dtype, {row});
    fused_operand_.reset();
    return;
  }
  const std::vector<bool> member = group_members(j, members);
  load_outside_scalars(j, members, member, rt);
  if (rt.rank() == 1) {
    store(fused_element(j, members, {row}), dst, rt.dtype, {row});
  } else {
    const Shape middle(rt.shape.begin() + 1, rt.shape.end() - 1);
    loop_nest(middle, [&](Ivs inner) {
      std::vector<Value> outer{row};
      outer.insert(outer.end(), inner.begin(), inner.end());
      lower_fused_row(j, members, member, outer, dst, rt);
    });
  }
  outside_scalar_.clear();
}

}  // namespace refjit::backend
