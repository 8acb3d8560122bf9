// Lowering of the ref primitives. A ref is a memref; an indexer becomes a map from an index
// of the indexed shape v to an index of the ref (computed inside the loop over v), so static
// slices, dynamic starts, integer indices and index arrays all share one code path.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "backend/lowering.h"
#include "ir/window_params.h"
#include "refjit/ir/indexing.h"

namespace refjit::backend {
namespace {

class IndexMap {
 public:
  // `dyn` are the eqn operands holding the dynamic indexer parts, in dim order.
  IndexMap(LowerCtx& c, const Eqn& e, const ArrayType& ref, std::span<const Atom> dyn)
      : c_(c), ref_(ref), idx_(e.params.get<Indexer>("indexer")), dyn_(dyn.begin(), dyn.end()) {
    std::vector<Type> dyn_types;
    for (const Atom& a : dyn_) dyn_types.push_back(c.type_of(a));
    if (static_cast<int>(dyn_.size()) != idx_.num_dynamic())
      fail_eqn(e, fmt::format("the indexer needs {} dynamic operands but the eqn has {}",
                              idx_.num_dynamic(), dyn_.size()));
    layout_ = indexed_layout(ref, idx_, dyn_types);
    // Scalar parts are loaded once, outside the loops.
    size_t k = 0;
    for (size_t d = 0; d < idx_.dims.size(); ++d) {
      const IndexerDim& id = idx_.dims[d];
      Value v;
      if (id.dynamic && id.kind != IndexerDim::Kind::index_array) {
        int64_t hi = id.kind == IndexerDim::Kind::slice ? ref.shape[d] - id.size : ref.shape[d] - 1;
        v = c.clamp_to_index(c.load_index_scalar(dyn_[k]), 0, hi);
      }
      if (id.dynamic)
        dyn_atom_.push_back(dyn_[k++]);
      else
        dyn_atom_.push_back(std::nullopt);
      scalar_.push_back(v);
    }
  }

  const Shape& shape() const { return layout_.shape; }

  // Where the index arrays' block of the indexed shape ends, when every dim after it addresses
  // a ref dim one to one (a unit-stride slice, or a dim the indexer leaves whole): then, for a
  // fixed index before that point, element v of the rest is at the ref index of its first
  // element plus v in those ref dims (`row_dims`). nullopt without index arrays or otherwise.
  std::optional<size_t> rows_after_arrays(std::vector<size_t>& row_dims) const {
    if (layout_.array_position < 0) return std::nullopt;
    const size_t split = static_cast<size_t>(layout_.array_position) + layout_.array_shape.size();
    if (split >= layout_.shape.size()) return std::nullopt;
    std::vector<size_t> basic;  // the ref dims that take a dim of v outside the array block
    for (size_t d = 0; d < ref_.shape.size(); ++d) {
      if (d >= idx_.dims.size()) {
        basic.push_back(d);
        continue;
      }
      const IndexerDim& id = idx_.dims[d];
      if (id.kind != IndexerDim::Kind::slice) continue;
      if (id.stride != 1) return std::nullopt;  // only rows of consecutive elements
      basic.push_back(d);
    }
    const size_t n = layout_.shape.size() - split;
    if (basic.size() < n) return std::nullopt;
    row_dims.assign(basic.end() - static_cast<ptrdiff_t>(n), basic.end());
    return split;
  }

  // The ref index addressed by element `v` of the indexed shape.
  std::vector<Value> operator()(Ivs v) {
    int apos = layout_.array_position;
    size_t alen = layout_.array_shape.size();
    std::vector<Value> basic;  // v dims not produced by index arrays, in order
    for (size_t i = 0; i < v.size(); ++i)
      if (apos < 0 || i < static_cast<size_t>(apos) || i >= apos + alen) basic.push_back(v[i]);
    size_t q = 0;
    std::vector<Value> out;
    for (size_t d = 0; d < ref_.shape.size(); ++d) {
      if (d >= idx_.dims.size()) {
        out.push_back(basic.at(q++));
        continue;
      }
      const IndexerDim& id = idx_.dims[d];
      switch (id.kind) {
        case IndexerDim::Kind::slice: {
          Value i = basic.at(q++);
          if (id.dynamic) {
            out.push_back(c_.b.create<arith::AddIOp>(c_.loc, i, scalar_[d]));
          } else {
            out.push_back(c_.affine_index(i, id.stride, id.start));
          }
          break;
        }
        case IndexerDim::Kind::index:
          out.push_back(id.dynamic ? scalar_[d] : c_.index(id.start));
          break;
        case IndexerDim::Kind::index_array: {
          // The array broadcasts against the others: align it with the block's trailing dims.
          ArrayType at = c_.type_of(*dyn_atom_[d]).array;
          std::vector<Value> ai;
          size_t lead = alen - at.shape.size();
          for (size_t j = 0; j < at.shape.size(); ++j)
            ai.push_back(at.shape[j] == 1 ? c_.index(0) : v.at(apos + lead + j));
          Value raw = c_.load(*dyn_atom_[d], ai);
          raw = c_.index_to_i64(raw, at.dtype);
          out.push_back(c_.clamp_to_index(raw, 0, ref_.shape[d] - 1));
          break;
        }
      }
    }
    return out;
  }

 private:
  LowerCtx& c_;
  ArrayType ref_;
  Indexer idx_;
  std::vector<Atom> dyn_;
  std::vector<std::optional<Atom>> dyn_atom_;
  std::vector<Value> scalar_;
  IndexedLayout layout_;
};

bool whole_indexer(const Eqn& e) {
  const ParamValue* pv = e.params.find("indexer");
  const Indexer* idx = pv ? std::get_if<Indexer>(pv) : nullptr;
  return !idx || idx->is_whole();
}

ArrayType ref_type(LowerCtx& c, const Eqn& e) {
  Type t = c.type_of(e.ins.at(0));
  if (!t.is_ref) fail_eqn(e, "operand 0 must be a ref");
  return t.array;
}

// new_ref: a move takes over the initial value's buffer (the plan found it dead);
// otherwise a buffer of its own, initialised with a copy.
void lower_new_ref(LowerCtx& c, const Eqn& e) {
  if (e.ins.size() != 1 || e.outs.size() != 1) fail_eqn(e, "expected one operand");
  ArrayType t = c.type_of(e.ins[0]).array;
  if (c.shares_buffer(e.ins[0], e.outs[0])) {
    c.bind(e.outs[0], c.buffer(e.ins[0]));
    return;
  }
  Value m = c.buffers() ? c.result_buffer(e.outs[0]) : c.alloc(t);
  c.bind(e.outs[0], m);
  if (is_var(e.ins[0]))
    c.copy(c.buffer(e.ins[0]), m, t);
  else
    c.fill(m, t, c.literal(std::get<Literal>(e.ins[0])));
}

// get: a whole read the plan lets share the ref's buffer is a view; else a copy out.
void lower_get(LowerCtx& c, const Eqn& e) {
  if (e.ins.empty() || e.outs.size() != 1) fail_eqn(e, "expected a ref operand and one result");
  ArrayType rt = ref_type(c, e);
  if (c.shares_buffer(e.ins[0], e.outs[0])) {
    c.bind(e.outs[0], c.view_as(c.buffer(e.ins[0]), c.type_of(e.outs[0]).array));
    return;
  }
  if (whole_indexer(e)) {  // a copy of the whole ref
    c.copy(c.buffer(e.ins[0]), c.result_buffer(e.outs[0]), rt);
    return;
  }
  IndexMap map(c, e, rt, std::span<const Atom>(e.ins).subspan(1));
  Value ref = c.buffer(e.ins[0]);
  Value dst = c.result_buffer(e.outs[0]);
  c.loop_nest(map.shape(),
              [&](Ivs ivs) { c.store(c.load_mem(ref, rt.dtype, map(ivs)), dst, rt.dtype, ivs); });
}

// swap: read every old value first, then write (index arrays may repeat positions).
void lower_swap(LowerCtx& c, const Eqn& e) {
  if (e.ins.size() < 2 || e.outs.size() != 1) fail_eqn(e, "expected a ref, a value, one result");
  ArrayType rt = ref_type(c, e);
  IndexMap map(c, e, rt, std::span<const Atom>(e.ins).subspan(2));
  Value ref = c.buffer(e.ins[0]);
  // The plan gives an unused old value no buffer, and makes the whole write of a value
  // already computed in the ref's buffer a no-op.
  const EqnBuffers* plan = c.eqn_buffers();
  if (whole_indexer(e)) {  // whole copies: old contents out, the new value in
    if (!c.has_no_buffer(e.outs[0])) c.copy(ref, c.result_buffer(e.outs[0]), rt);
    if (plan && plan->action == EqnAction::no_op) return;
    if (is_var(e.ins[1]))
      c.copy(c.buffer(e.ins[1]), ref, rt);
    else
      c.fill(ref, rt, c.literal(std::get<Literal>(e.ins[1])));
    return;
  }
  if (!c.has_no_buffer(e.outs[0])) {
    Value old = c.result_buffer(e.outs[0]);
    c.loop_nest(map.shape(),
                [&](Ivs ivs) { c.store(c.load_mem(ref, rt.dtype, map(ivs)), old, rt.dtype, ivs); });
  }
  c.loop_nest(map.shape(),
              [&](Ivs ivs) { c.store(c.load(e.ins[1], ivs), ref, rt.dtype, map(ivs)); });
}

// ---- get_flat_run / swap_flat_run (primitives.def): the ref seen as rank 1, at positions
// f = clamp(start + k, 0, bound) (the sum wrapping in start's dtype), a position past the
// ref's end folded into dim 0's last block as an index array access clamps it. When
// 0 <= start <= min(bound, |r| - 1) - (n - 1), tested at run time, no entry wraps, is clamped
// or folded: the run is the flat elements [start, start + n), one memmove.

// Emits `fast(flat, start)` under that test and `general(flat, position)` otherwise (only
// `general` when no start passes it); `position(k)` is the flat position of entry k (index).
void lower_flat_run(LowerCtx& c, const Eqn& e, const std::function<void(Value, Value)>& fast,
                    const std::function<void(Value, const std::function<Value(Value)>&)>& general) {
  const ArrayType rt = ref_type(c, e);
  const int64_t total = rt.num_elements();
  const int64_t n = e.params.get<int64_t>("length");
  const int64_t bound = e.params.get<int64_t>("bound");
  if (rt.rank() == 0 || total == 0 || n == 0) return;
  const Atom start = e.ins.at(1);
  const DType dt = c.type_of(start).array.dtype;
  const Value flat = c.view_as(c.buffer(e.ins[0]), ArrayType{rt.dtype, {total}});
  const int64_t block = total / rt.shape[0];
  auto position = [&](Value k) -> Value {
    Value sum = c.b.create<arith::AddIOp>(
        c.loc, c.load(start, {}), c.b.create<arith::IndexCastOp>(c.loc, c.elem_type(dt), k));
    Value f = c.clamp_to_index(c.index_to_i64(sum, dt), 0, bound);
    Value past = c.b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::uge, f, c.index(total));
    Value folded = c.b.create<arith::AddIOp>(c.loc, c.index((rt.shape[0] - 1) * block),
                                             c.b.create<arith::RemUIOp>(c.loc, f, c.index(block)));
    return c.b.create<arith::SelectOp>(c.loc, past, folded, f);
  };
  const int64_t last_start = std::min(bound, total - 1) - (n - 1);
  if (last_start < 0) {
    general(flat, position);
    return;
  }
  Value first = c.index_to_i64(c.load(start, {}), dt);
  c.if_then(
      c.in_range(first, 0, last_start),
      [&] { fast(flat, c.b.create<arith::IndexCastOp>(c.loc, c.b.getIndexType(), first)); },
      [&] { general(flat, position); });
}

void lower_get_flat_run(LowerCtx& c, const Eqn& e) {
  const ArrayType out = c.type_of(e.outs.at(0)).array;
  const Value dst = c.result_buffer(e.outs[0]);
  lower_flat_run(
      c, e,
      [&](Value flat, Value start) {
        c.move_elements(dst, {c.index(0)}, flat, {start}, out.shape[0], out.dtype);
      },
      [&](Value flat, const std::function<Value(Value)>& position) {
        c.loop_nest(out.shape, [&](Ivs k) {
          c.store(c.load_mem(flat, out.dtype, {position(k[0])}), dst, out.dtype, k);
        });
      });
}

// Every old value is read before the first write; the writes go in order (a later duplicate
// wins).
void lower_swap_flat_run(LowerCtx& c, const Eqn& e) {
  const ArrayType run = c.type_of(e.outs.at(0)).array;
  const bool keep_old = !c.has_no_buffer(e.outs[0]);
  const Value old = keep_old ? c.result_buffer(e.outs[0]) : Value();
  const Value v = c.buffer(e.ins.at(2));
  lower_flat_run(
      c, e,
      [&](Value flat, Value start) {
        if (keep_old) c.move_elements(old, {c.index(0)}, flat, {start}, run.shape[0], run.dtype);
        c.move_elements(flat, {start}, v, {c.index(0)}, run.shape[0], run.dtype);
      },
      [&](Value flat, const std::function<Value(Value)>& position) {
        if (keep_old)
          c.loop_nest(run.shape, [&](Ivs k) {
            c.store(c.load_mem(flat, run.dtype, {position(k[0])}), old, run.dtype, k);
          });
        c.loop_nest(run.shape, [&](Ivs k) {
          c.store(c.load_mem(v, run.dtype, {k[0]}), flat, run.dtype, {position(k[0])});
        });
      });
}

void lower_addupdate(LowerCtx& c, const Eqn& e) {
  if (e.ins.size() < 2) fail_eqn(e, "expected a ref and a value");
  ArrayType rt = ref_type(c, e);
  IndexMap map(c, e, rt, std::span<const Atom>(e.ins).subspan(2));
  Value ref = c.buffer(e.ins[0]);
  auto add_at = [&](Ivs ivs, const std::vector<Value>& at) {
    Value old = c.load_mem(ref, rt.dtype, at);
    Value x = c.load(e.ins[1], ivs);
    c.store(c.add(rt.dtype, old, x), ref, rt.dtype, at);
  };
  std::vector<size_t> row_dims;
  if (const std::optional<size_t> split = map.rows_after_arrays(row_dims)) {
    // A scatter-add of rows (an embedding's gradient): the index arrays are read once per row,
    // outside the loop over the row, which then vectorises.
    const Shape& v = map.shape();
    const Shape outer(v.begin(), v.begin() + static_cast<ptrdiff_t>(*split));
    const Shape inner(v.begin() + static_cast<ptrdiff_t>(*split), v.end());
    c.loop_nest(outer, [&](Ivs o) {
      std::vector<Value> first(o.begin(), o.end());
      first.resize(v.size(), c.index(0));
      const std::vector<Value> base = map(first);
      c.loop_nest(inner, [&](Ivs in) {
        std::vector<Value> ivs(o.begin(), o.end());
        ivs.insert(ivs.end(), in.begin(), in.end());
        std::vector<Value> at = base;
        for (size_t k = 0; k < row_dims.size(); ++k)
          at[row_dims[k]] = c.b.create<arith::AddIOp>(c.loc, base[row_dims[k]], in[k]);
        add_at(ivs, at);
      });
    });
    return;
  }
  c.loop_nest(map.shape(), [&](Ivs ivs) { add_at(ivs, map(ivs)); });
}

// The flat row-major position of the first element of the window of `sizes` at `starts`
// (operands, clamped as dynamic_slice clamps them) in an array of `shape`.
Value flat_window_start(LowerCtx& c, std::span<const Atom> starts, const Shape& shape,
                        const IntList& sizes) {
  Value flat = c.index(0);
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    Value start = c.clamp_to_index(c.load_index_scalar(starts[d]), 0, shape[d] - sizes[d]);
    flat = c.b.create<arith::AddIOp>(c.loc, flat,
                                     c.b.create<arith::MulIOp>(c.loc, start, c.index(stride)));
    stride *= shape[d];
  }
  return flat;
}

// shift_add: first the side runs, copied out of w1 while R still holds them. Then, with `zero`
// the value written over w1 (operand 1),
// R'[p] = (p in w1 ? zero : R[p]) + (p in w2 ? R[p - s2 + src] : 0), src = s1 + offset.
// Every source R[p - s2 + src] lies in w1, so: first the part of w2 outside w1 (at most two
// runs; writes there clobber no source), then the part of w2 inside w1 is `zero + source`:
// one memmove (plus, for a +0.0 zero, a pass adding it, which only turns -0.0 into +0.0),
// then zeros on w1 minus w2 (at most two runs).
void lower_shift_add(LowerCtx& c, const Eqn& e) {
  const ShiftAddParams p = ShiftAddParams::of(e);
  ArrayType rt = ref_type(c, e);
  const DType d = rt.dtype;
  Value ref = c.view_as(c.buffer(e.ins[0]), ArrayType{d, {rt.num_elements()}});
  Value s1 = flat_window_start(c, p.write_starts(e), rt.shape, *p.write_sizes);
  Value s2 = flat_window_start(c, p.add_starts(e), rt.shape, *p.add_sizes);
  auto add_i = [&](Value a, Value b) { return c.b.create<arith::AddIOp>(c.loc, a, b).getResult(); };
  for (size_t k = 0; k < e.outs.size(); ++k) {
    const int64_t n = (*p.side_lengths)[k];
    Value dst = c.view_as(c.result_buffer(e.outs[k]), ArrayType{d, {n}});
    c.move_elements(dst, {c.index(0)}, ref, {add_i(s1, c.index((*p.side_offsets)[k]))}, n, d);
  }
  auto min_i = [&](Value a, Value b) {
    return c.b.create<arith::MinSIOp>(c.loc, a, b).getResult();
  };
  auto max_i = [&](Value a, Value b) {
    return c.b.create<arith::MaxSIOp>(c.loc, a, b).getResult();
  };
  auto sum = [&](Value a, Value b) { return c.add(d, a, b); };
  Value e1 = add_i(s1, c.index(p.write_length()));
  Value e2 = add_i(s2, c.index(p.add_length()));
  Value src = add_i(s1, c.index(p.offset));
  Value shift = c.b.create<arith::SubIOp>(c.loc, s2, src);  // p - shift is p's source
  Value zero = c.load(e.ins[1], {});
  // for p in [lo, hi): body(p)
  auto run = [&](Value lo, Value hi, const std::function<void(Value)>& body) {
    auto loop = c.b.create<mlir::scf::ForOp>(c.loc, lo, hi, c.index(1));
    mlir::OpBuilder::InsertionGuard guard(c.b);
    c.b.setInsertionPoint(loop.getBody()->getTerminator());
    body(loop.getInductionVar());
  };
  auto add_source = [&](Value p) {
    Value q = c.b.create<arith::SubIOp>(c.loc, p, shift);
    c.store(sum(c.load_mem(ref, d, {p}), c.load_mem(ref, d, {q})), ref, d, {p});
  };
  run(s2, min_i(e2, s1), add_source);
  run(max_i(s2, e1), e2, add_source);
  // w2 inside w1: [lo, hi), possibly empty.
  Value lo = max_i(s1, s2), hi = min_i(e1, e2);
  Value n = max_i(c.b.create<arith::SubIOp>(c.loc, hi, lo), c.index(0));
  c.move_elements(ref, {lo}, ref, {c.b.create<arith::SubIOp>(c.loc, lo, shift)}, n, d);
  // `zero + source` there; the pass is skipped only where it changes nothing (an integer 0, a
  // float -0.0).
  const Literal* z = std::get_if<Literal>(&e.ins[1]);
  const bool adds_nothing = z && z->equals(0.0) && (!is_float(d) || std::signbit(z->f));
  if (!adds_nothing)
    run(lo, hi, [&](Value p) { c.store(sum(zero, c.load_mem(ref, d, {p})), ref, d, {p}); });
  auto store_zero = [&](Value p) { c.store(zero, ref, d, {p}); };
  run(s1, min_i(e1, s2), store_zero);
  run(max_i(s1, e2), e1, store_zero);
}

// freeze: the ref is dead afterwards, so the value takes over its buffer.
void lower_freeze(LowerCtx& c, const Eqn& e) {
  if (e.ins.size() != 1 || e.outs.size() != 1) fail_eqn(e, "expected one ref operand");
  ref_type(c, e);
  c.bind(e.outs[0], c.buffer(e.ins[0]));
}

}  // namespace

void register_ref_lowerings(LowerTable& t) {
  t.set(Prim::new_ref, &lower_new_ref);
  t.set(Prim::get, &lower_get);
  t.set(Prim::swap, &lower_swap);
  t.set(Prim::get_flat_run, &lower_get_flat_run);
  t.set(Prim::swap_flat_run, &lower_swap_flat_run);
  t.set(Prim::addupdate, &lower_addupdate);
  t.set(Prim::freeze, &lower_freeze);
  t.set(Prim::shift_add, &lower_shift_add);
}

}  // namespace refjit::backend
