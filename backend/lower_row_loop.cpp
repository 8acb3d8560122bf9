// Row loops (row_loops.h): consecutive groups and reductions computed row by row in one loop,
// so each row is read from memory once. Part of LowerCtx (lowering.h).
#include "backend/fusion.h"
#include "backend/lowering.h"
#include "backend/mlir_pch.h"

namespace refjit::backend {

namespace {

// The jaxpr holding the eqns that compute row-loop item eqn `e` (a fused eqn's body, or `j`)
// and its root there.
std::pair<const Jaxpr*, const Eqn*> item_root(const Jaxpr& j, const Eqn& e) {
  if (e.prim != Prim::fused) return {&j, &e};
  const Jaxpr& body = *e.params.get<JaxprPtr>("jaxpr");
  return {&body, &body.eqns.back()};
}

}  // namespace

void LowerCtx::in_eqn_body(const Jaxpr& j, size_t index, Value dst,
                           const std::function<void(const Jaxpr&, const std::vector<size_t>&)>& f,
                           bool with_operands) {
  const Eqn& e = j.eqns[index];
  frames_.back().eqn = static_cast<int>(index);
  if (e.prim == Prim::fused)
    in_fused_body(e, dst, f, with_operands);
  else
    f(j, {index});
}

void LowerCtx::lower_row_loop(const Eqn& e) {
  const Jaxpr& body = *e.params.get<JaxprPtr>("jaxpr");
  const RowLoop loop = row_loop_of_body(body);
  std::vector<Value> operands, results;
  for (const Atom& a : e.ins) operands.push_back(buffer(a));
  for (Var v : e.outs) results.push_back(result_buffer(v));
  push_frame(body, /*top_level=*/false);
  for (size_t k = 0; k < body.invars.size(); ++k) bind_var(body.invars[k], operands.at(k));
  for (size_t k = 0; k < body.outvars.size(); ++k)
    frames_.back().result_into.emplace_back(as_var(body.outvars[k]).id, results.at(k));
  lower_row_loop(body, loop);
  pop_frame();
}

Value LowerCtx::row_of_block(Value rows, const ArrayType& t, Value block) {
  // Row `block` of `rows` (one row per block, contiguous), seen as all of `t`: dim 0 has stride
  // 0, so row i of the view is that one row whatever i.
  llvm::SmallVector<int64_t> strides(t.shape.size(), 1);
  for (size_t d = t.shape.size() - 1; d-- > 1;) strides[d] = strides[d + 1] * t.shape[d + 1];
  strides[0] = 0;
  const int64_t row_elements = t.shape[0] == 0 ? 0 : t.num_elements() / t.shape[0];
  return strided_view(rows, t, strides,
                      b.create<mlir::arith::MulIOp>(loc, block, index(row_elements)));
}

// The fewest elements a row of an item needs to be kept one row per block (lower_row_loop).
constexpr int64_t kMinScratchRow = 64;

void LowerCtx::lower_row_loop(const Jaxpr& j, const RowLoop& planned) {
  const int saved = frames_.back().eqn;
  RowLoop loop = planned;
  const size_t n = loop.items.size();
  // Every item's buffer is made before the loop (result_buffer emits its view where it is
  // called, and the values must dominate the code after the loop too). An item whose rows only
  // the loop reads (not a result of the row_loop, not seen through a view) keeps one row per
  // block instead of an array of all of them (`scratch`): the loop reads its row i only while
  // computing row i, and a block's rows run in order on one thread.
  std::vector<Value> dst(n);
  std::vector<bool> scratch(n, false);
  std::vector<bool> viewed(j.vars.size(), false);
  for (size_t k : loop.passengers)
    for (const Atom& a : j.eqns[k].ins)
      if (is_var(a)) viewed[as_var(a).id] = true;
  auto is_result = [&](Var v) {
    for (const auto& [id, memref] : frames_.back().result_into)
      if (id == v.id) return true;
    return false;
  };
  for (size_t k = 0; k < n; ++k) {
    const Var v = j.eqns[loop.items[k].eqn].outs.at(0);
    const ArrayType t = type_of(v).array;
    // (A row of a few elements stays an array: the loop over the rows is then the one LLVM
    // vectorises, and a scratch slot stored and loaded every row would stop it.)
    const bool long_rows = t.rank() >= 2 && t.num_elements() / t.shape[0] >= kMinScratchRow;
    scratch[k] =
        loop.items[k].kind == RowItemKind::rows && long_rows && !is_result(v) && !viewed[v.id];
  }
  // (Blocks of rows, as column sums make them, give every block its scratch row; the rows are
  // independent, so the blocks change no bits.)
  if (std::find(scratch.begin(), scratch.end(), true) != scratch.end())
    loop.block_rows = std::max(loop.block_rows, (loop.rows + kRowBlocks - 1) / kRowBlocks);
  const int64_t blocks = loop.blocks();
  int64_t elements_per_row = 0;
  for (size_t k = 0; k < n; ++k) {
    const RowItem& item = loop.items[k];
    const Eqn& e = j.eqns[item.eqn];
    frames_.back().eqn = static_cast<int>(item.eqn);
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
    } else if (scratch[k]) {
      Shape per_block = rt.shape;
      per_block[0] = blocks;
      dst[k] = alloc(ArrayType{rt.dtype, per_block});  // the blocks' rows, in order
    } else {
      dst[k] = result_buffer(e.outs[0]);
    }
  }
  // Passengers next (views of row results): a view of an item's result needs its buffer.
  for (size_t k : loop.passengers) lower_eqn_at(j, k);
  mlir::Operation* over_blocks = loop_nest({blocks}, [&](Ivs block_iv) {
    const Value block = block_iv[0];
    for (size_t k = 0; k < n; ++k)
      if (loop.items[k].kind == RowItemKind::columns)
        in_eqn_body(
            j, loop.items[k].eqn, Value(),
            [&](const Jaxpr& in, const std::vector<size_t>& m) {
              start_block_partial(*this, in.eqns[m.back()], dst[k], block);
            },
            /*with_operands=*/false);
    // This block's scratch rows, seen as the items' whole results.
    std::vector<Value> at(dst);
    for (size_t k = 0; k < n; ++k) {
      if (!scratch[k]) continue;
      const Var v = j.eqns[loop.items[k].eqn].outs[0];
      at[k] = row_of_block(dst[k], type_of(v).array, block);
      bind_var(v, at[k]);
    }
    auto each_row = [&](Value row) {
      for (size_t k = 0; k < n; ++k)
        in_eqn_body(j, loop.items[k].eqn, at[k],
                    [&](const Jaxpr& in, const std::vector<size_t>& m) {
                      lower_row_of(in, m, loop.items[k].kind, row, at[k], block);
                    });
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
  });
  // Each block writes only its own rows and its own partials.
  mark_parallel(over_blocks, blocks, elements_per_row * loop.block_rows);
  for (size_t k = 0; k < n; ++k) {
    const RowItem& item = loop.items[k];
    if (!finished_after_loop(item.kind)) continue;
    const Eqn& e = j.eqns[item.eqn];
    frames_.back().eqn = static_cast<int>(item.eqn);
    const ArrayType rt = type_of(e.outs[0]).array;
    const Value result = result_buffer(e.outs[0]);
    in_eqn_body(
        j, item.eqn, result,
        [&](const Jaxpr& in, const std::vector<size_t>& m) {
          const Eqn& root = in.eqns[m.back()];
          if (item.kind == RowItemKind::partial)
            store(combine_partials(*this, root, dst[k], loop.rows), result, rt.dtype, {});
          else
            combine_block_partials(*this, root, dst[k], blocks, result);
        },
        /*with_operands=*/false);
  }
  frames_.back().eqn = saved;
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

void register_row_loop_lowerings(LowerTable& t) {
  t.set(Prim::row_loop, [](LowerCtx& c, const Eqn& e) { c.lower_row_loop(e); });
}

}  // namespace refjit::backend
