// Lowering of reductions (reduce_sum/max/min, argmax).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "backend/lowering.h"
#include "backend/parallel_loops.h"

namespace refjit::backend {

Value reducer_identity(LowerCtx& c, DType d, Reducer r) {
  if (r == Reducer::sum) return c.constant(d, 0);
  const double inf = std::numeric_limits<double>::infinity();
  if (is_float(d)) return c.constant(d, r == Reducer::max ? -inf : inf);
  // An integer dtype's extreme values (int_constant keeps the low bits: all ones is -1 or
  // UINT_MAX). Complex and wider types never get here: their max/min are rejected earlier.
  const int bits = std::min(bit_width(d), 64);
  const int64_t all_ones = -1;
  const int64_t smin =
      bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
  const int64_t smax =
      bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1;
  if (r == Reducer::max) return c.int_constant(d, is_unsigned(d) ? 0 : smin);
  return c.int_constant(d, is_unsigned(d) ? all_ones : smax);
}

Value combine(LowerCtx& c, DType d, Reducer r, Value a, Value b, bool reassociate) {
  if (is_float(d) && reassociate) {
    auto fm = arith::FastMathFlagsAttr::get(c.b.getContext(), arith::FastMathFlags::reassoc);
    switch (r) {
      case Reducer::sum: return c.b.create<arith::AddFOp>(c.loc, a, b, fm);
      case Reducer::max: return c.b.create<arith::MaximumFOp>(c.loc, a, b, fm);
      case Reducer::min: return c.b.create<arith::MinimumFOp>(c.loc, a, b, fm);
    }
  }
  const bool f = is_float(d);
  switch (r) {
    case Reducer::sum: return c.add(d, a, b);
    case Reducer::max:  // NaN propagates
      if (f) return c.b.create<arith::MaximumFOp>(c.loc, a, b);
      if (is_unsigned(d)) return c.b.create<arith::MaxUIOp>(c.loc, a, b);
      return c.b.create<arith::MaxSIOp>(c.loc, a, b);
    case Reducer::min:
      if (f) return c.b.create<arith::MinimumFOp>(c.loc, a, b);
      if (is_unsigned(d)) return c.b.create<arith::MinUIOp>(c.loc, a, b);
      return c.b.create<arith::MinSIOp>(c.loc, a, b);
  }
  return {};
}

Value sort_key_less(LowerCtx& c, DType d, Value x, Value y) {
  if (is_float(d)) {
    Value x_num = c.b.create<arith::CmpFOp>(c.loc, arith::CmpFPredicate::ORD, x, x);
    Value y_nan = c.b.create<arith::CmpFOp>(c.loc, arith::CmpFPredicate::UNO, y, y);
    Value lt = c.b.create<arith::CmpFOp>(c.loc, arith::CmpFPredicate::OLT, x, y);
    return c.b.create<arith::OrIOp>(c.loc, c.b.create<arith::AndIOp>(c.loc, x_num, y_nan), lt);
  }
  auto pred =
      d == DType::bool_ || is_unsigned(d) ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt;
  return c.b.create<arith::CmpIOp>(c.loc, pred, x, y);
}

namespace {

// Whether `axes` are the dims [first, first + axes.size()), in any order.
bool consecutive_axes(const IntList& axes, int64_t first) {
  std::vector<int64_t> sorted(axes.begin(), axes.end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != first + static_cast<int64_t>(i)) return false;
  return true;
}

// A full reduction of a large operand sums fixed blocks of its leading dim (the first one
// longer than 1, so a [1, n] operand splits too) into partial results (in parallel when the options
// allow: parallel_loops.h), then the partials in order. The blocks depend only on the shape, so the
// result is the same bits on any thread count.
constexpr int64_t kReduceBlockElements = int64_t{1} << 14;

// The reduction of operand dims [dim, rank) at the leading indices `ivs` (size dim), folded
// into `acc`; the innermost loop reassociates (so it vectorises).
Value reduce_dims(LowerCtx& c, const Eqn& e, Reducer r, std::vector<Value>& ivs, size_t dim,
                  Value acc) {
  const ArrayType xt = c.type_of(e.ins[0]).array;
  const DType d = c.type_of(e.outs[0]).array.dtype;
  if (dim == static_cast<size_t>(xt.rank()))
    return combine(c, d, r, acc, c.load(e.ins[0], ivs), /*reassociate=*/true);
  return c.loop_with_carry(xt.shape[dim], {acc}, [&](Value iv, const std::vector<Value>& cur) {
    ivs.resize(dim);
    ivs.push_back(iv);
    return std::vector<Value>{reduce_dims(c, e, r, ivs, dim + 1, cur[0])};
  })[0];
}

// [first, end) of block `block` of `total` items cut into blocks of `per_block`.
std::pair<Value, Value> block_bounds(LowerCtx& c, Value block, int64_t per_block, int64_t total) {
  Value first = c.b.create<arith::MulIOp>(c.loc, block, c.index(per_block));
  Value end = c.b.create<arith::MinSIOp>(
      c.loc, c.b.create<arith::AddIOp>(c.loc, first, c.index(per_block)), c.index(total));
  return {first, end};
}

// The blocked full reduction (see kReduceBlockElements); false when the operand is too small
// to split.
bool lower_reduce_all_blocked(LowerCtx& c, const Eqn& e, Reducer r) {
  const ArrayType xt = c.type_of(e.ins[0]).array;
  const ArrayType rt = c.type_of(e.outs[0]).array;
  if (xt.rank() == 0 || xt.num_elements() < 2 * kReduceBlockElements) return false;
  size_t split = 0;  // the dim the blocks split; the dims before it have extent 1
  while (split + 1 < static_cast<size_t>(xt.rank()) && xt.shape[split] == 1) ++split;
  const int64_t rows = xt.shape[split];
  const int64_t row_elements = xt.num_elements() / rows;
  const int64_t rows_per_block = std::max<int64_t>(1, kReduceBlockElements / row_elements);
  const int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
  if (blocks < 2) return false;
  Value partial = c.alloc(ArrayType{rt.dtype, {blocks}});
  mlir::Operation* loop = c.loop_nest({blocks}, [&](Ivs block) {
    auto [first, end] = block_bounds(c, block[0], rows_per_block, rows);
    auto over_rows = c.b.create<mlir::scf::ForOp>(
        c.loc, first, end, c.index(1), mlir::ValueRange{reducer_identity(c, rt.dtype, r)},
        [&](mlir::OpBuilder& nested, mlir::Location, Value row, mlir::ValueRange acc) {
          std::vector<Value> ivs(split, c.index(0));
          ivs.push_back(row);
          Value next = reduce_dims(c, e, r, ivs, split + 1, acc[0]);
          nested.create<mlir::scf::YieldOp>(c.loc, next);
        });
    c.store(over_rows.getResult(0), partial, rt.dtype, {block[0]});
  });
  c.mark_parallel(loop, blocks, rows_per_block * row_elements);
  c.store(combine_partials(c, e, partial, blocks), c.result_buffer(e.outs[0]), rt.dtype, {});
  return true;
}

// Reducing the trailing dims (a full reduction, or each row): per result element, loops
// over the reduced dims carry the running result in a register. Rows are independent, so
// the loops over them may run in parallel.
void lower_reduce_trailing(LowerCtx& c, const Eqn& e, Reducer r) {
  const ArrayType xt = c.type_of(e.ins[0]).array;
  const ArrayType rt = c.type_of(e.outs[0]).array;
  const size_t kept = static_cast<size_t>(rt.rank());
  if (kept == 0 && lower_reduce_all_blocked(c, e, r)) return;
  Value dst = c.result_buffer(e.outs[0]);
  mlir::Operation* loop = c.loop_nest(rt.shape, [&](Ivs outer) {
    std::vector<Value> ivs(outer.begin(), outer.end());
    c.store(reduce_dims(c, e, r, ivs, kept, reducer_identity(c, rt.dtype, r)), dst, rt.dtype,
            outer);
  });
  if (kept > 0)
    c.mark_parallel(loop, rt.shape[0], xt.num_elements() / std::max<int64_t>(1, rt.shape[0]));
}

// Columns of the first kept dim per block of a leading-axes reduction (below): a block's slice
// of the result stays in L1 while the reduced rows stream past.
constexpr int64_t kColumnBlockElements = 256;
constexpr int64_t kMinColumnBlocks = 8;

// Reducing the leading dims of a large operand (column sums: the gradient of a matrix-vector
// product, a bias's gradient): the first kept dim is split into blocks of columns, each
// reduced over every row in row-major order. Blocks write disjoint parts of the result, so
// they run on the runtime's threads, and each element sums its rows in the same order as the
// serial pass below. False when the operand is too small for threads.
bool lower_reduce_leading_blocked(LowerCtx& c, const Eqn& e, Reducer r, const IntList& axes) {
  const ArrayType xt = c.type_of(e.ins[0]).array;
  const ArrayType rt = c.type_of(e.outs[0]).array;
  const size_t p = axes.size();
  if (rt.rank() == 0 || xt.num_elements() < kParallelMinElements || xt.shape[p] < 2) return false;
  const int64_t columns = xt.shape[p];
  const Shape reduced(xt.shape.begin(), xt.shape.begin() + static_cast<std::ptrdiff_t>(p));
  const Shape inner(xt.shape.begin() + static_cast<std::ptrdiff_t>(p) + 1, xt.shape.end());
  const int64_t inner_elements = ArrayType{rt.dtype, inner}.num_elements();
  // At most kColumnBlockElements per block, and at least kMinColumnBlocks blocks where the
  // columns allow it (the blocks depend only on the shape; no element's order depends on them).
  const int64_t per_block =
      std::max<int64_t>(1, std::min(kColumnBlockElements / inner_elements,
                                    (columns + kMinColumnBlocks - 1) / kMinColumnBlocks));
  const int64_t blocks = (columns + per_block - 1) / per_block;
  Value dst = c.result_buffer(e.outs[0]);
  c.fill(dst, rt, reducer_identity(c, rt.dtype, r));
  mlir::Operation* loop = c.loop_nest({blocks}, [&](Ivs block) {
    auto [first, end] = block_bounds(c, block[0], per_block, columns);
    c.loop_nest(reduced, [&](Ivs rows) {
      c.b.create<mlir::scf::ForOp>(
          c.loc, first, end, c.index(1), mlir::ValueRange{},
          [&](mlir::OpBuilder& nested, mlir::Location, Value column, mlir::ValueRange) {
            c.loop_nest(inner, [&](Ivs rest) {
              std::vector<Value> in(rows.begin(), rows.end());
              std::vector<Value> out{column};
              out.insert(out.end(), rest.begin(), rest.end());
              in.insert(in.end(), out.begin(), out.end());
              Value acc = c.load_mem(dst, rt.dtype, out);
              c.store(combine(c, rt.dtype, r, acc, c.load(e.ins[0], in)), dst, rt.dtype, out);
            });
            nested.create<mlir::scf::YieldOp>(c.loc);
          });
    });
  });
  c.mark_parallel(loop, blocks,
                  per_block * inner_elements * ArrayType{rt.dtype, reduced}.num_elements());
  return true;
}

Reducer reducer_of(const Eqn& e) {
  switch (e.prim) {
    case Prim::reduce_sum: return Reducer::sum;
    case Prim::reduce_max: return Reducer::max;
    case Prim::reduce_min: return Reducer::min;
    default: fail_eqn(e, "is not a sum, max or min reduction");
  }
}

// Result initialised to the identity, then one pass over the operand in row-major order
// accumulating into the result element the operand element maps to (the innermost loop then
// runs along kept, contiguous elements of both, and vectorises without reassociation).
void lower_reduce(LowerCtx& c, const Eqn& e, Reducer r) {
  if (e.ins.size() != 1 || e.outs.size() != 1) fail_eqn(e, "expected one operand");
  ArrayType xt = c.type_of(e.ins[0]).array;
  ArrayType rt = c.type_of(e.outs[0]).array;
  const IntList& axes = e.params.get<IntList>("axes");
  const int64_t trailing_first = xt.rank() - static_cast<int64_t>(axes.size());
  if (!axes.empty() && consecutive_axes(axes, trailing_first))
    return lower_reduce_trailing(c, e, r);
  if (!axes.empty() && consecutive_axes(axes, 0) && lower_reduce_leading_blocked(c, e, r, axes))
    return;
  Value dst = c.result_buffer(e.outs[0]);
  c.fill(dst, rt, reducer_identity(c, rt.dtype, r));
  c.loop_nest(xt.shape, [&](Ivs ivs) {
    std::vector<Value> out;
    for (size_t i = 0; i < ivs.size(); ++i)
      if (!llvm::is_contained(axes, static_cast<int64_t>(i))) out.push_back(ivs[i]);
    Value acc = c.load_mem(dst, rt.dtype, out);
    c.store(combine(c, rt.dtype, r, acc, c.load(e.ins[0], ivs)), dst, rt.dtype, out);
  });
}

// argmax: the first maximal index along the axis; NaN counts as maximal.
void lower_argmax(LowerCtx& c, const Eqn& e) {
  if (e.ins.size() != 1 || e.outs.size() != 1) fail_eqn(e, "expected one operand");
  ArrayType xt = c.type_of(e.ins[0]).array;
  ArrayType rt = c.type_of(e.outs[0]).array;
  const IntList& axes = e.params.get<IntList>("axes");
  if (axes.size() != 1) fail_eqn(e, "argmax needs exactly one axis");
  size_t axis = static_cast<size_t>(axes[0]);
  int64_t n = xt.shape.at(axis);
  Value dst = c.result_buffer(e.outs[0]);
  c.loop_nest(rt.shape, [&](Ivs ivs) {
    if (n == 0) {
      c.store(c.int_constant(rt.dtype, 0), dst, rt.dtype, ivs);
      return;
    }
    auto at = [&](Value k) {
      std::vector<Value> in(ivs.begin(), ivs.begin() + axis);
      in.push_back(k);
      in.insert(in.end(), ivs.begin() + axis, ivs.end());
      return c.load(e.ins[0], in);
    };
    std::vector<Value> init{at(c.index(0)), c.index(0)};
    auto best = c.loop_with_carry(n - 1, init, [&](Value iv, const std::vector<Value>& cur) {
      Value k = c.b.create<arith::AddIOp>(c.loc, iv, c.index(1));
      Value x = at(k);
      // x > best, or x is the first NaN: the best sorts before x.
      Value take = sort_key_less(c, xt.dtype, cur[0], x);
      return std::vector<Value>{c.b.create<arith::SelectOp>(c.loc, take, x, cur[0]),
                                c.b.create<arith::SelectOp>(c.loc, take, k, cur[1])};
    });
    Value idx = c.b.create<arith::IndexCastOp>(c.loc, c.elem_type(rt.dtype), best[1]);
    c.store(idx, dst, rt.dtype, ivs);
  });
}

}  // namespace

Value reduce_row(LowerCtx& c, const Eqn& e, Value row) {
  const Reducer r = reducer_of(e);
  std::vector<Value> ivs{row};
  return reduce_dims(c, e, r, ivs, 1, reducer_identity(c, c.type_of(e.outs[0]).array.dtype, r));
}

void start_block_partial(LowerCtx& c, const Eqn& e, Value partials, Value block) {
  const Reducer r = reducer_of(e);
  const ArrayType rt = c.type_of(e.outs[0]).array;
  Value init = reducer_identity(c, rt.dtype, r);
  c.loop_nest(rt.shape, [&](Ivs ivs) {
    std::vector<Value> at{block};
    at.insert(at.end(), ivs.begin(), ivs.end());
    c.store(init, partials, rt.dtype, at);
  });
}

void fold_row_into_block(LowerCtx& c, const Eqn& e, Value row, Value partials, Value block) {
  const Reducer r = reducer_of(e);
  const ArrayType rt = c.type_of(e.outs[0]).array;
  c.loop_nest(rt.shape, [&](Ivs ivs) {
    std::vector<Value> at{block}, in{row};
    at.insert(at.end(), ivs.begin(), ivs.end());
    in.insert(in.end(), ivs.begin(), ivs.end());
    Value acc = c.load_mem(partials, rt.dtype, at);
    c.store(combine(c, rt.dtype, r, acc, c.load(e.ins[0], in)), partials, rt.dtype, at);
  });
}

void combine_block_partials(LowerCtx& c, const Eqn& e, Value partials, int64_t blocks, Value dst) {
  const Reducer r = reducer_of(e);
  const ArrayType rt = c.type_of(e.outs[0]).array;
  c.fill(dst, rt, reducer_identity(c, rt.dtype, r));
  Shape order{blocks};
  order.insert(order.end(), rt.shape.begin(), rt.shape.end());
  c.loop_nest(order, [&](Ivs ivs) {  // block by block, so each element folds them in order
    std::vector<Value> out(ivs.begin() + 1, ivs.end());
    Value acc = c.load_mem(dst, rt.dtype, out);
    c.store(combine(c, rt.dtype, r, acc, c.load_mem(partials, rt.dtype, ivs)), dst, rt.dtype, out);
  });
}

Value combine_partials(LowerCtx& c, const Eqn& e, Value partials, int64_t n) {
  const Reducer r = reducer_of(e);
  const DType d = c.type_of(e.outs[0]).array.dtype;
  return c.loop_with_carry(
      n, {reducer_identity(c, d, r)}, [&](Value iv, const std::vector<Value>& cur) {
        return std::vector<Value>{combine(c, d, r, cur[0], c.load_mem(partials, d, {iv}))};
      })[0];
}

void register_reduce_lowerings(LowerTable& t) {
  t.set(Prim::reduce_sum, [](LowerCtx& c, const Eqn& e) { lower_reduce(c, e, Reducer::sum); });
  t.set(Prim::reduce_max, [](LowerCtx& c, const Eqn& e) { lower_reduce(c, e, Reducer::max); });
  t.set(Prim::reduce_min, [](LowerCtx& c, const Eqn& e) { lower_reduce(c, e, Reducer::min); });
  t.set(Prim::argmax, &lower_argmax);
}

}  // namespace refjit::backend
