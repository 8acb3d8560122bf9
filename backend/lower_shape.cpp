// Lowering of shape and data-movement primitives. Each result element is computed from the
// operand element it comes from (a gather formulation), except where a result is an
// operand with parts overwritten (dynamic_update_slice, pad, scatter).
#include <fmt/format.h>

#include <functional>
#include <optional>
#include <span>
#include <string>

#include "backend/lowering.h"
#include "ir/window_params.h"

namespace refjit::backend {
namespace {

Value add_idx(LowerCtx& c, Value a, Value b) { return c.b.create<arith::AddIOp>(c.loc, a, b); }

void expect_ins(const Eqn& e, size_t n) {
  if (e.ins.size() < n || e.outs.size() != 1)
    fail_eqn(e, fmt::format("expected at least {} operand(s) and one result", n));
}

// reshape / squeeze / expand_dims: the row-major data is unchanged, so the result is a view
// of the operand's buffer with the new shape (every buffer is contiguous; a row of a bigger
// buffer keeps its offset).
void lower_reshape(LowerCtx& c, const Eqn& e) {
  expect_ins(e, 1);
  ArrayType rt = c.type_of(e.outs[0]).array;
  if (rt.num_elements() == 0) {
    c.result_buffer(e.outs[0]);
    return;
  }
  c.bind(e.outs[0], c.view_as(c.buffer(e.ins[0]), rt));
}

void lower_broadcast_in_dim(LowerCtx& c, const Eqn& e) {
  expect_ins(e, 1);
  ArrayType rt = c.type_of(e.outs[0]).array;
  ArrayType xt = c.type_of(e.ins[0]).array;
  const IntList& bd = e.params.get<IntList>("broadcast_dimensions");
  if (bd.size() != xt.shape.size()) fail_eqn(e, "broadcast_dimensions does not match the rank");
  Value dst = c.result_buffer(e.outs[0]);
  // Each element written once from the operand (a same-sized broadcast keeps element order).
  c.parallel_loop_nest(rt.shape, [&](Ivs ivs) {
    c.store(c.load(e.ins[0], c.broadcast_operand_index(e, ivs)), dst, rt.dtype, ivs);
  });
}

void lower_transpose(LowerCtx& c, const Eqn& e) {
  expect_ins(e, 1);
  ArrayType rt = c.type_of(e.outs[0]).array;
  const IntList& perm = e.params.get<IntList>("permutation");
  if (perm.size() != rt.shape.size()) fail_eqn(e, "permutation does not match the rank");
  Value dst = c.result_buffer(e.outs[0]);
  c.parallel_loop_nest(rt.shape, [&](Ivs ivs) {  // never in place: a fresh result
    std::vector<Value> in(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) in.at(perm[i]) = ivs[i];
    c.store(c.load(e.ins[0], in), dst, rt.dtype, ivs);
  });
}

// The element of an operand that element `ivs` of its static window (start, strides) is.
std::vector<Value> window_source_index(LowerCtx& c, const IntList& start, const IntList& strides,
                                       Ivs ivs) {
  std::vector<Value> in;
  for (size_t i = 0; i < ivs.size(); ++i)
    in.push_back(c.affine_index(ivs[i], strides.at(i), start.at(i)));
  return in;
}

// One static window of a concatenated operand: none is the whole operand.
struct ConcatWindow {
  const IntList* start = nullptr;
  const IntList* strides = nullptr;
  Shape shape;
};

// One loop nest over the result's dims before `dimension`; inside it each operand's window
// (or the whole operand) has its part of that row copied in turn, so the result is written in
// order, a row at a time. Rows are independent, so a large one runs on the runtime's threads
// (im2col's nine windows).
void lower_concatenation(LowerCtx& c, const Eqn& e, std::span<const ConcatWindow> windows) {
  ArrayType rt = c.type_of(e.outs[0]).array;
  const size_t dim = static_cast<size_t>(e.params.get<int64_t>("dimension"));
  const Shape outer(rt.shape.begin(), rt.shape.begin() + static_cast<std::ptrdiff_t>(dim));
  Value dst = c.result_buffer(e.outs[0]);
  mlir::Operation* loop = c.loop_nest(outer, [&](Ivs row) {
    int64_t offset = 0;
    for (size_t operand = 0; operand < e.ins.size(); ++operand) {
      const ConcatWindow& w = windows[operand];
      const Shape part(w.shape.begin() + static_cast<std::ptrdiff_t>(dim), w.shape.end());
      c.loop_nest(part, [&](Ivs inner) {
        std::vector<Value> in(row.begin(), row.end());
        in.insert(in.end(), inner.begin(), inner.end());
        std::vector<Value> out = in;
        out.at(dim) = add_idx(c, in[dim], c.index(offset));
        const Atom& x = e.ins[operand];
        c.store(
            w.start ? c.load(x, window_source_index(c, *w.start, *w.strides, in)) : c.load(x, in),
            dst, rt.dtype, out);
      });
      offset += w.shape.at(dim);
    }
  });
  if (!outer.empty())
    c.mark_parallel(loop, outer[0], rt.num_elements() / std::max<int64_t>(1, outer[0]));
}

void lower_concatenate(LowerCtx& c, const Eqn& e) {
  expect_ins(e, 1);
  std::vector<ConcatWindow> whole;
  for (const Atom& a : e.ins) whole.push_back({nullptr, nullptr, c.type_of(a).array.shape});
  lower_concatenation(c, e, whole);
}

// concat_windows reads each operand's window in place: one copy of every element.
void lower_concat_windows(LowerCtx& c, const Eqn& e) {
  expect_ins(e, 1);
  const auto& starts = e.params.get<IntListList>("start_indices");
  const auto& limits = e.params.get<IntListList>("limit_indices");
  const auto& strides = e.params.get<IntListList>("strides");
  std::vector<ConcatWindow> windows;
  for (size_t k = 0; k < e.ins.size(); ++k) {
    ConcatWindow w{&starts.at(k), &strides.at(k), {}};
    for (size_t d = 0; d < starts[k].size(); ++d)
      w.shape.push_back((limits.at(k).at(d) - starts[k][d] + strides[k].at(d) - 1) / strides[k][d]);
    windows.push_back(std::move(w));
  }
  lower_concatenation(c, e, windows);
}

void lower_slice(LowerCtx& c, const Eqn& e) {
  expect_ins(e, 1);
  ArrayType rt = c.type_of(e.outs[0]).array;
  Value dst = c.result_buffer(e.outs[0]);
  const IntList& start = e.params.get<IntList>("start_indices");
  const IntList strides = e.params.get_or<IntList>("strides", IntList(rt.shape.size(), 1));
  c.loop_nest(rt.shape, [&](Ivs ivs) {
    c.store(c.load(e.ins[0], window_source_index(c, start, strides, ivs)), dst, rt.dtype, ivs);
  });
}

// Clamped dynamic starts (XLA): start_i in [0, dim_i - size_i], from the index operands `at`.
std::vector<Value> clamped_starts(LowerCtx& c, std::span<const Atom> at, const Shape& dims,
                                  const Shape& sizes) {
  std::vector<Value> starts;
  for (size_t i = 0; i < dims.size(); ++i)
    starts.push_back(c.clamp_to_index(c.load_index_scalar(at[i]), 0, dims[i] - sizes[i]));
  return starts;
}

// The same for operands first, first + 1, ... of `e`, which must be its last ones.
std::vector<Value> clamped_starts(LowerCtx& c, const Eqn& e, size_t first, const Shape& dims,
                                  const Shape& sizes) {
  if (e.ins.size() != first + dims.size())
    fail_eqn(e, fmt::format("expected {} start indices", dims.size()));
  return clamped_starts(c, std::span(e.ins).subspan(first), dims, sizes);
}

void lower_dynamic_slice(LowerCtx& c, const Eqn& e) {
  expect_ins(e, 1);
  ArrayType rt = c.type_of(e.outs[0]).array;
  ArrayType xt = c.type_of(e.ins[0]).array;
  std::vector<Value> starts = clamped_starts(c, e, 1, xt.shape, rt.shape);
  Value dst = c.result_buffer(e.outs[0]);
  c.loop_nest(rt.shape, [&](Ivs ivs) {
    std::vector<Value> in;
    for (size_t i = 0; i < ivs.size(); ++i) in.push_back(add_idx(c, ivs[i], starts[i]));
    c.store(c.load(e.ins[0], in), dst, rt.dtype, ivs);
  });
}

// move_windows: x (copied first unless the result is in its buffer), then each window written
// straight from its source. A window read from the destination buffer itself (buffer
// assignment allows one, a contiguous run) is moved first with memmove, which allows the
// overlap; every other window is read from a buffer the writes do not touch.
void lower_move_windows(LowerCtx& c, const Eqn& e) {
  const MoveWindowsParams p = MoveWindowsParams::of(e);
  const ArrayType rt = c.type_of(e.outs[0]).array;
  Shape update = p.sizes(0);
  for (size_t k = 1; k < p.num_windows(); ++k) update.at(p.dimension) += p.sizes(k)[p.dimension];
  const std::vector<Value> starts = clamped_starts(c, p.starts(e), rt.shape, update);
  Value dst = c.result_buffer(e.outs[0]);
  const bool in_place = c.shares_buffer(e.ins[0], e.outs[0]);
  if (!in_place) c.copy(c.buffer(e.ins[0]), dst, rt);
  std::vector<size_t> order, rest;
  for (size_t k = 0; k < p.num_windows(); ++k)
    (c.shares_buffer(p.source(e, k), e.outs[0]) ? order : rest).push_back(k);
  if (order.size() > 1 || (order.size() == 1 && !p.contiguous_run(order[0])))
    fail_eqn(e,
             "a window that is not one contiguous run, or more than one window, is read from "
             "the buffer it writes (the buffer plan must copy operand 0 first)");
  order.insert(order.end(), rest.begin(), rest.end());
  std::vector<int64_t> offset(p.num_windows(), 0);
  for (size_t k = 1; k < p.num_windows(); ++k)
    offset[k] = offset[k - 1] + p.sizes(k - 1)[p.dimension];
  for (size_t k : order) {
    const Atom& src = p.source(e, k);
    const Shape& sizes = p.sizes(k);
    std::vector<Value> at = starts;
    if (offset[k]) at.at(p.dimension) = add_idx(c, at.at(p.dimension), c.index(offset[k]));
    const std::vector<Value> from =
        clamped_starts(c, p.window_starts(e, k), c.type_of(src).array.shape, sizes);
    if (p.contiguous_run(k)) {
      c.move_elements(dst, at, c.buffer(src), from, sizes.back(), rt.dtype);
      continue;
    }
    c.loop_nest(sizes, [&](Ivs ivs) {
      std::vector<Value> in, out;
      for (size_t i = 0; i < ivs.size(); ++i) {
        in.push_back(add_idx(c, ivs[i], from[i]));
        out.push_back(add_idx(c, ivs[i], at[i]));
      }
      c.store(c.load(src, in), dst, rt.dtype, out);
    });
  }
}

void lower_dynamic_update_slice(LowerCtx& c, const Eqn& e) {
  expect_ins(e, 2);
  ArrayType rt = c.type_of(e.outs[0]).array;
  ArrayType ut = c.type_of(e.ins[1]).array;
  std::vector<Value> starts = clamped_starts(c, e, 2, rt.shape, ut.shape);
  Value dst = c.result_buffer(e.outs[0]);
  // In place (operand 0's buffer is the result's): write only the region.
  if (!c.shares_buffer(e.ins[0], e.outs[0])) c.copy(c.buffer(e.ins[0]), dst, rt);
  c.loop_nest(ut.shape, [&](Ivs ivs) {
    std::vector<Value> out;
    for (size_t i = 0; i < ivs.size(); ++i) out.push_back(add_idx(c, ivs[i], starts[i]));
    c.store(c.load(e.ins[1], ivs), dst, rt.dtype, out);
  });
}

void lower_iota(LowerCtx& c, const Eqn& e) {
  if (e.outs.size() != 1) fail_eqn(e, "expected one result");
  ArrayType rt = c.type_of(e.outs[0]).array;
  int64_t dim = e.params.get<int64_t>("dimension");
  Value dst = c.result_buffer(e.outs[0]);
  c.loop_nest(rt.shape, [&](Ivs ivs) {
    Value i64 = c.b.create<arith::IndexCastOp>(c.loc, c.b.getI64Type(), ivs.at(dim));
    c.store(convert_element(c, i64, DType::i64, rt.dtype), dst, rt.dtype, ivs);
  });
}

// pad: fill with the padding value, then place every operand element at
// lo + i * (interior + 1) when that lands inside the result (lo/hi may be negative).
void lower_pad(LowerCtx& c, const Eqn& e) {
  expect_ins(e, 2);
  ArrayType rt = c.type_of(e.outs[0]).array;
  ArrayType xt = c.type_of(e.ins[0]).array;
  const IntListList& cfg = e.params.get<IntListList>("padding_config");
  if (cfg.size() != xt.shape.size()) fail_eqn(e, "padding_config does not match the rank");
  Value dst = c.result_buffer(e.outs[0]);
  c.fill(dst, rt, c.load(e.ins[1], {}));
  c.loop_nest(xt.shape, [&](Ivs ivs) {
    std::vector<Value> out;
    Value inside;
    for (size_t i = 0; i < ivs.size(); ++i) {
      Value p = c.affine_index(ivs[i], cfg[i].at(2) + 1, cfg[i].at(0));
      out.push_back(p);
      Value ok = c.in_range(p, 0, rt.shape[i] - 1);
      inside = inside ? c.b.create<arith::AndIOp>(c.loc, inside, ok) : ok;
    }
    Value v = c.load(e.ins[0], ivs);
    if (!inside) return c.store(v, dst, rt.dtype, out);
    c.if_then(inside, [&] { c.store(v, dst, rt.dtype, out); });
  });
}

// ---- gather and scatter along one axis
// The indices come from an index array (gather, scatter: operand 1), or are a run
// start + k, k < n (gather_run, scatter_run: operand 1 is the start; passes/simplify/index_runs.h).
// A run with 0 <= start <= dim - n neither wraps nor leaves the axis, so there the access is one
// contiguous block per leading index: a memmove (or a loop without guards), tested at run time.
// Otherwise the per-element code runs, which keeps the clamp / drop semantics exactly.
struct AxisIndices {
  size_t rank = 0;                    // the index array's rank (1 for a run)
  std::optional<int64_t> run_length;  // a run's length; none for an index array
  // The index at `at` (induction variables over the index array's shape), as i64.
  std::function<Value(std::span<const Value> at)> load;
};

AxisIndices axis_indices(LowerCtx& c, const Eqn& e, std::optional<int64_t> run_length) {
  // The pipeline writes indexing of several dims on one (passes/plain_decisions.h).
  if (indexed_dims(e.params) != 1) throw Error("internal: gather/scatter with dims > 1 lowered");
  const Atom index = e.ins.at(1);
  const DType dt = c.type_of(index).array.dtype;
  AxisIndices a;
  if (!run_length) {
    a.rank = static_cast<size_t>(c.type_of(index).array.rank());
    a.load = [&c, index, dt](std::span<const Value> at) {
      return c.index_to_i64(
          c.load(index, mlir::ValueRange(llvm::ArrayRef<Value>(at.data(), at.size()))), dt);
    };
    return a;
  }
  a.rank = 1;
  a.run_length = run_length;
  a.load = [&c, index, dt](std::span<const Value> at) {
    // start + k in the start's dtype: wraps as the add chain the run replaced wraps.
    Value k = c.b.create<arith::IndexCastOp>(c.loc, c.elem_type(dt), at[0]);
    return c.index_to_i64(c.b.create<arith::AddIOp>(c.loc, c.load(index, {}), k), dt);
  };
  return a;
}

Value as_index(LowerCtx& c, Value i64) {
  return c.b.create<arith::IndexCastOp>(c.loc, c.b.getIndexType(), i64);
}

// Emits `fast(start)` (start: the run's first index, an index value) when `indices` are a run
// of 1 to `dim` entries found inside [0, dim) at run time, else `general()`; only `general()`
// for an index array, or when there is nothing to move.
void lower_by_run(LowerCtx& c, const AxisIndices& indices, int64_t dim, int64_t elements,
                  const std::function<void(Value)>& fast, const std::function<void()>& general) {
  const int64_t n = indices.run_length.value_or(0);
  if (n < 1 || n > dim || elements == 0) {
    general();
    return;
  }
  Value start = indices.load(std::vector<Value>{c.index(0)});
  c.if_then(
      c.in_range(start, 0, dim - n), [&] { fast(as_index(c, start)); }, general);
}

// One memmove per leading index: `n` rows of the axis times the trailing elements, from
// `src` at (pre, src_at, 0...) to `dst` at (pre, dst_at, 0...).
void move_runs(LowerCtx& c, const Shape& shape, int64_t axis, int64_t n, Value dst, Value dst_at,
               Value src, Value src_at, DType d) {
  int64_t trailing = n;
  for (size_t i = static_cast<size_t>(axis) + 1; i < shape.size(); ++i) trailing *= shape[i];
  Shape pre(shape.begin(), shape.begin() + axis);
  c.loop_nest(pre, [&](Ivs ivs) {
    std::vector<Value> to(ivs.begin(), ivs.end()), from(ivs.begin(), ivs.end());
    to.push_back(dst_at);
    from.push_back(src_at);
    for (size_t i = static_cast<size_t>(axis) + 1; i < shape.size(); ++i) {
      to.push_back(c.index(0));
      from.push_back(c.index(0));
    }
    c.move_elements(dst, to, src, from, trailing, d);
  });
}

// Gathered rows of at least this many elements are copied whole (one index load and clamp per
// row, then a memmove) instead of element by element.
constexpr int64_t kMinGatherRowElements = 16;

// gather x idx (axis a): out[pre, k, post] = x[pre, clamp(idx[k]), post]; gather_run the same
// with idx[k] = start + k.
void lower_gather(LowerCtx& c, const Eqn& e, std::optional<int64_t> run_length) {
  expect_ins(e, 2);
  ArrayType rt = c.type_of(e.outs[0]).array;
  ArrayType xt = c.type_of(e.ins[0]).array;
  const AxisIndices indices = axis_indices(c, e, run_length);
  int64_t axis = e.params.get<int64_t>("axis");
  size_t k = indices.rank;
  Value dst = c.result_buffer(e.outs[0]);
  int64_t row = 1;  // the elements of x after the gathered axis: one contiguous row
  for (size_t d = static_cast<size_t>(axis) + 1; d < xt.shape.size(); ++d) row *= xt.shape[d];
  const Value src = c.buffer(e.ins[0]);
  auto general = [&] {
    if (row >= kMinGatherRowElements && is_contiguous(src) && is_contiguous(dst)) {
      // An embedding lookup: per index, its clamped row of x, copied whole.
      const Shape outer(rt.shape.begin(), rt.shape.begin() + axis + static_cast<int64_t>(k));
      c.loop_nest(outer, [&](Ivs ivs) {
        Value raw = indices.load(std::span(ivs).subspan(static_cast<size_t>(axis)));
        std::vector<Value> from(ivs.begin(), ivs.begin() + axis);
        from.push_back(c.clamp_to_index(raw, 0, xt.shape.at(axis) - 1));
        std::vector<Value> to(ivs.begin(), ivs.end());
        from.resize(xt.shape.size(), c.index(0));
        to.resize(rt.shape.size(), c.index(0));
        c.move_elements(dst, to, src, from, row, rt.dtype);
      });
      return;
    }
    c.loop_nest(rt.shape, [&](Ivs ivs) {
      Value raw = indices.load(std::span(ivs).subspan(static_cast<size_t>(axis), k));
      std::vector<Value> in(ivs.begin(), ivs.begin() + axis);
      in.push_back(c.clamp_to_index(raw, 0, xt.shape.at(axis) - 1));
      in.insert(in.end(), ivs.begin() + axis + static_cast<int64_t>(k), ivs.end());
      c.store(c.load(e.ins[0], in), dst, rt.dtype, ivs);
    });
  };
  lower_by_run(
      c, indices, xt.shape.at(axis), rt.num_elements(),
      [&](Value start) {
        move_runs(c, rt.shape, axis, *run_length, dst, c.index(0), src, start, rt.dtype);
      },
      general);
}

// scatter / scatter-add / ...: result = x, then for each update element (row-major order, so
// the last duplicate wins) write or combine it at idx; out-of-range indices are dropped.
// scatter_run the same with idx[k] = start + k. `how`: the scatter primitive whose combine it is.
void lower_scatter(LowerCtx& c, const Eqn& e, Prim how, bool run) {
  const bool add = how != Prim::scatter;  // every kind but set reads the old element
  expect_ins(e, 3);
  ArrayType rt = c.type_of(e.outs[0]).array;
  ArrayType ut = c.type_of(e.ins[2]).array;
  int64_t axis = e.params.get<int64_t>("axis");
  const AxisIndices indices =
      axis_indices(c, e, run ? std::optional<int64_t>(ut.shape.at(axis)) : std::nullopt);
  size_t k = indices.rank;
  Value dst = c.result_buffer(e.outs[0]);
  if (!c.shares_buffer(e.ins[0], e.outs[0])) c.copy(c.buffer(e.ins[0]), dst, rt);
  // Adds u to (or stores it at) `out`.
  auto put = [&](Value u, const std::vector<Value>& out) {
    if (add) {
      Value old = c.load_mem(dst, rt.dtype, out);
      const ElemFn* combine = elementwise_rule(how == Prim::scatter_add   ? Prim::add
                                               : how == Prim::scatter_mul ? Prim::mul
                                               : how == Prim::scatter_min ? Prim::min
                                                                          : Prim::max);
      u = (*combine)(c, e, rt.dtype, {old, u});
    }
    c.store(u, dst, rt.dtype, out);
  };
  auto general = [&] {
    c.loop_nest(ut.shape, [&](Ivs ivs) {
      Value raw = indices.load(std::span(ivs).subspan(static_cast<size_t>(axis), k));
      c.if_then(c.in_range(raw, 0, rt.shape.at(axis) - 1), [&] {
        std::vector<Value> out(ivs.begin(), ivs.begin() + axis);
        out.push_back(as_index(c, raw));
        out.insert(out.end(), ivs.begin() + axis + static_cast<int64_t>(k), ivs.end());
        put(c.load(e.ins[2], ivs), out);
      });
    });
  };
  // The run is in range and has no duplicates: a set is a block move, a combine a loop
  // without per-element guards.
  lower_by_run(
      c, indices, rt.shape.at(axis), ut.num_elements(),
      [&](Value start) {
        if (!add) {
          move_runs(c, ut.shape, axis, *indices.run_length, dst, start, c.buffer(e.ins[2]),
                    c.index(0), rt.dtype);
          return;
        }
        c.loop_nest(ut.shape, [&](Ivs ivs) {
          std::vector<Value> out = ivs;
          out.at(axis) = add_idx(c, ivs[axis], start);
          put(c.load(e.ins[2], ivs), out);
        });
      },
      general);
}

// Lanes up to this length are insertion-sorted (no scratch memory, fast on short lanes);
// longer ones are merge-sorted.
constexpr int64_t kInsertionSortMaxLane = 32;

// sort: the operands are copied into the results, then each lane along `dimension` is sorted
// there, all operands moving together, stably: by insertion for short lanes, else by a
// bottom-up merge sort through one scratch lane per operand (O(n log n) comparisons).
void lower_sort(LowerCtx& c, const Eqn& e) {
  const int64_t dim = e.params.get<int64_t>("dimension");
  const size_t num_keys = static_cast<size_t>(e.params.get<int64_t>("num_keys"));
  const ArrayType xt = c.type_of(e.ins.at(0)).array;
  std::vector<Value> bufs;
  std::vector<DType> dtypes;
  for (size_t k = 0; k < e.ins.size(); ++k) {
    ArrayType t = c.type_of(e.outs.at(k)).array;
    Value buf = c.result_buffer(e.outs[k]);
    if (!c.shares_buffer(e.ins[k], e.outs[k])) c.copy(c.buffer(e.ins[k]), buf, t);
    bufs.push_back(buf);
    dtypes.push_back(t.dtype);
  }
  const int64_t n = xt.shape[dim];
  if (n <= 1) return;
  const bool merge = n > kInsertionSortMaxLane;
  std::vector<Value> scratch;  // one lane per operand, for the merge sort
  if (merge)
    for (DType d : dtypes) scratch.push_back(c.alloc(ArrayType{d, {n}}));
  Shape lanes = xt.shape;
  lanes[dim] = 1;
  // Index arithmetic.
  auto add_i = [&](Value a, Value b) { return Value(c.b.create<arith::AddIOp>(c.loc, a, b)); };
  auto sub_i = [&](Value a, Value b) { return Value(c.b.create<arith::SubIOp>(c.loc, a, b)); };
  auto min_i = [&](Value a, Value b) { return Value(c.b.create<arith::MinSIOp>(c.loc, a, b)); };
  auto cmp = [&](arith::CmpIPredicate p, Value a, Value b) {
    return Value(c.b.create<arith::CmpIOp>(c.loc, p, a, b));
  };
  auto sel = [&](Value p, Value a, Value b) {
    return Value(c.b.create<arith::SelectOp>(c.loc, p, a, b));
  };
  c.loop_nest(lanes, [&](LowerCtx::Ivs ivs) {
    auto at = [&](Value i) {
      std::vector<Value> idx(ivs.begin(), ivs.end());
      idx[dim] = i;
      return idx;
    };
    // Whether the element at a sorts before the one at b (keys compared in order).
    auto less = [&](const std::vector<Value>& a, const std::vector<Value>& b) {
      Value r;
      for (size_t k = num_keys; k-- > 0;) {
        Value x = c.load_mem(bufs[k], dtypes[k], a), y = c.load_mem(bufs[k], dtypes[k], b);
        Value lt = sort_key_less(c, dtypes[k], x, y);
        if (!r) {
          r = lt;
          continue;
        }
        Value gt = sort_key_less(c, dtypes[k], y, x);
        Value not_gt = c.b.create<arith::XOrIOp>(c.loc, gt, c.constant(DType::bool_, 1));
        r = c.b.create<arith::OrIOp>(c.loc, lt, c.b.create<arith::AndIOp>(c.loc, not_gt, r));
      }
      return r;
    };
    if (!merge) {
      auto outer = c.b.create<mlir::scf::ForOp>(c.loc, c.index(1), c.index(n), c.index(1));
      mlir::OpBuilder::InsertionGuard guard(c.b);
      c.b.setInsertionPoint(outer.getBody()->getTerminator());
      // Move element i down while it sorts before its left neighbour.
      c.while_loop(
          {outer.getInductionVar()},
          [&](const std::vector<Value>& v) {
            Value positive = cmp(arith::CmpIPredicate::sgt, v[0], c.index(0));
            Value left = sel(positive, sub_i(v[0], c.index(1)), c.index(0));
            return c.b.create<arith::AndIOp>(c.loc, positive, less(at(v[0]), at(left)));
          },
          [&](const std::vector<Value>& v) -> std::vector<Value> {
            Value jl = sub_i(v[0], c.index(1));
            for (Value buf : bufs) {
              Value x = c.b.create<mlir::memref::LoadOp>(c.loc, buf, at(v[0]));
              Value y = c.b.create<mlir::memref::LoadOp>(c.loc, buf, at(jl));
              c.b.create<mlir::memref::StoreOp>(c.loc, x, buf, at(jl));
              c.b.create<mlir::memref::StoreOp>(c.loc, y, buf, at(v[0]));
            }
            return {jl};
          });
      return;
    }
    // Merge sort: runs of `width` merged pairwise into the scratch lane, copied back, width
    // doubled, until one run covers the lane.
    const Value len = c.index(n);
    c.while_loop(
        {c.index(1)},
        [&](const std::vector<Value>& v) { return cmp(arith::CmpIPredicate::slt, v[0], len); },
        [&](const std::vector<Value>& v) -> std::vector<Value> {
          const Value width = v[0];
          const Value two_width = add_i(width, width);
          auto pairs = c.b.create<mlir::scf::ForOp>(c.loc, c.index(0), len, two_width);
          mlir::OpBuilder::InsertionGuard pair_guard(c.b);
          c.b.setInsertionPoint(pairs.getBody()->getTerminator());
          const Value lo = pairs.getInductionVar();
          const Value mid = min_i(add_i(lo, width), len);
          const Value hi = min_i(add_i(lo, two_width), len);
          // (i, j, k): next of the left run, next of the right run, next output slot.
          c.while_loop(
              {lo, mid, lo},
              [&](const std::vector<Value>& at_ijk) {
                return cmp(arith::CmpIPredicate::slt, at_ijk[2], hi);
              },
              [&](const std::vector<Value>& at_ijk) -> std::vector<Value> {
                const Value i = at_ijk[0], j = at_ijk[1], k = at_ijk[2];
                const Value left_left = cmp(arith::CmpIPredicate::slt, i, mid);
                const Value right_left = cmp(arith::CmpIPredicate::slt, j, hi);
                // Loads stay in range; the selects below ignore what an exhausted run would give.
                const Value li = min_i(i, sub_i(mid, c.index(1)));
                const Value rj = min_i(j, sub_i(hi, c.index(1)));
                // Stable: the left element goes first unless the right one sorts strictly before.
                const Value right_first = c.b.create<arith::AndIOp>(
                    c.loc, right_left,
                    c.b.create<arith::OrIOp>(
                        c.loc,
                        c.b.create<arith::XOrIOp>(c.loc, left_left, c.constant(DType::bool_, 1)),
                        less(at(rj), at(li))));
                const Value src = sel(right_first, rj, li);
                for (size_t q = 0; q < bufs.size(); ++q)
                  c.b.create<mlir::memref::StoreOp>(
                      c.loc, c.b.create<mlir::memref::LoadOp>(c.loc, bufs[q], at(src)), scratch[q],
                      mlir::ValueRange{k});
                const Value one = c.index(1), zero = c.index(0);
                return {add_i(i, sel(right_first, zero, one)),
                        add_i(j, sel(right_first, one, zero)), add_i(k, one)};
              });
          c.b.setInsertionPointAfter(pairs);
          c.loop_nest({n}, [&](Ivs i) {  // the merged lane copied back
            for (size_t q = 0; q < bufs.size(); ++q)
              c.b.create<mlir::memref::StoreOp>(
                  c.loc, c.b.create<mlir::memref::LoadOp>(c.loc, scratch[q], i), bufs[q], at(i[0]));
          });
          return {two_width};
        });
  });
}

}  // namespace

void register_shape_lowerings(LowerTable& t) {
  t.set(Prim::reshape, &lower_reshape);
  t.set(Prim::squeeze, &lower_reshape);
  t.set(Prim::expand_dims, &lower_reshape);
  t.set(Prim::broadcast_in_dim, &lower_broadcast_in_dim);
  t.set(Prim::transpose, &lower_transpose);
  t.set(Prim::concatenate, &lower_concatenate);
  t.set(Prim::concat_windows, &lower_concat_windows);
  t.set(Prim::slice, &lower_slice);
  t.set(Prim::dynamic_slice, &lower_dynamic_slice);
  t.set(Prim::dynamic_update_slice, &lower_dynamic_update_slice);
  t.set(Prim::move_windows, &lower_move_windows);
  t.set(Prim::iota, &lower_iota);
  t.set(Prim::pad, &lower_pad);
  t.set(Prim::gather, [](LowerCtx& c, const Eqn& e) { lower_gather(c, e, std::nullopt); });
  t.set(Prim::gather_run,
        [](LowerCtx& c, const Eqn& e) { lower_gather(c, e, e.params.get<int64_t>("length")); });
  t.set(Prim::sort, &lower_sort);
  for (Prim p :
       {Prim::scatter, Prim::scatter_add, Prim::scatter_mul, Prim::scatter_min, Prim::scatter_max})
    t.set(p, [p](LowerCtx& c, const Eqn& e) { lower_scatter(c, e, p, /*run=*/false); });
  t.set(Prim::scatter_run, [](LowerCtx& c, const Eqn& e) {
    const std::string& combine = e.params.get<std::string>("combine");
    const std::optional<Prim> how = scatter_of_combine(combine);
    if (!how)
      throw Error(
          fmt::format("scatter_run: combine '{}' is none of set, add, mul, min, max", combine));
    lower_scatter(c, e, *how, /*run=*/true);
  });
}

}  // namespace refjit::backend
