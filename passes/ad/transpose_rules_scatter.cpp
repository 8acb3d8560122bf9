// The aliasing transposes: `dynamic_update_slice`, `scatter`, `scatter-add` and the reshapes
// (reshape, squeeze, expand_dims) alias their operand's accumulator to their result's. Inside a
// transposed scan the carry's cotangent lives in one ref R; a body that writes the carry with
// `x.at[idx].set(u)` on a flattened view of it (reshape -> scatter -> reshape) then costs
// O(|idx|) per step:
//
//   * reshape: the operand's accumulator becomes a reshaped view of the result's buffer
//     (Accum::alias_of), no read;
//   * scatter: ct_u = R[idx] read (clamped, as gather), masked to zero where idx is out of
//     range (scatter drops those updates) or repeated later (the last update wins); the
//     in-range entries of R are set to zero; the operand's accumulator becomes R;
//   * scatter-add: ct_u = the masked read; the operand's accumulator becomes R unchanged.
//
// Duplicate indices: the operand's cotangent is exact (every overwritten entry is zeroed,
// however often it is named). For scatter-add every copy of a duplicated index gets the
// entry's cotangent (they accumulate); for scatter only the last update to an entry survives,
// so ct_u is also masked by last_write_mask (passes/ad/last_write_mask.h: O(k^2) compares for
// small k, else an int scratch of the axis's size), emitted only when ct_u is wanted.
#include <fmt/format.h>

#include <functional>
#include <numeric>

#include "passes/ad/last_write_mask.h"
#include "passes/ad/transpose_rules.h"
#include "passes/ad/window_shift.h"
#include "passes/simplify/unit_run.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

Indexer dynamic_slice_indexer(const Shape& sizes) {
  Indexer ix;
  for (int64_t s : sizes) ix.dims.push_back(IndexerDim{IndexerDim::Kind::slice, 0, s, 1, true});
  return ix;
}

// c_out = dynamic_update_slice(c, u, idx). The cotangent of c is c_out's except on the
// updated slice, which is u's. When c_out's sum lives in a ref it can hand over and c's
// accumulator holds nothing but sparse contributions (reads of c, however placed), the
// slice is swapped out (u's cotangent, zeros left behind) and c's accumulator BECOMES the
// ref, its pending contributions added in place: O(slice), no copy. If c already received a
// dense contribution (e.g. c is also used whole), the ref's contents are added into it:
// dense, but correct. A value sum takes the dense path (dynamic_update_slice of zeros).
void dynamic_update_slice_transpose(Emitter& e, TransposeArgs& a) {
  Accum& out = *a.out_acc[0];
  if (out.is_empty()) return;
  const std::vector<Atom> idx = a.dyn(2);
  const ArrayType ut = a.acc[1] ? a.acc[1]->type() : e.array_type_of(a.val[1]);
  const Indexer ix = dynamic_slice_indexer(ut.shape);
  if (out.can_hand_over()) {
    if (transpose_window_shift(e, a)) return;  // u a window of c moved: one shift_add
    if (a.wants(0)) {
      Atom cu = out.swap_out(e, e.zeros(ut), ix, idx);
      if (a.wants(1)) a.acc[1]->add(e, cu);
      if (a.acc[0]->can_alias())
        a.acc[0]->alias_of(e, out);
      else
        a.acc[0]->add(e, out.freeze(e));  // c read after the update: dense fallback
    } else if (a.wants(1)) {
      a.acc[1]->add(e, out.read_at(e, ix, idx));
    }
    return;
  }
  MaybeAtom ct = out.freeze(e);
  if (!ct) return;
  if (a.wants(0)) {
    std::vector<Atom> ins{*ct, e.zeros(ut)};
    ins.insert(ins.end(), idx.begin(), idx.end());
    a.acc[0]->add(e, e.emit1(Prim::dynamic_update_slice, ins));
  }
  if (a.wants(1)) {
    std::vector<Atom> ins{*ct};
    ins.insert(ins.end(), idx.begin(), idx.end());
    a.acc[1]->add(e, e.emit1(Prim::dynamic_slice, ins, Params{{"slice_sizes", IntList(ut.shape)}}));
  }
}

}  // namespace

Indexer axis_indexer(const ArrayType& x, int64_t axis) {
  Indexer ix;
  for (int64_t d = 0; d < axis; ++d)
    ix.dims.push_back(IndexerDim{IndexerDim::Kind::slice, 0, x.shape[d], 1, false});
  ix.dims.push_back(IndexerDim{IndexerDim::Kind::index_array, 0, 0, 1, true});
  return ix;
}

namespace {

// The index-shaped predicate `p` broadcast to the update's shape s[:axis] + k + s[axis+1:].
Atom widen(Emitter& e, Atom p, const ArrayType& ut, int64_t axis) {
  if (e.array_type_of(p).shape == ut.shape) return p;
  const int64_t k = e.array_type_of(p).rank();
  IntList dims(static_cast<size_t>(k));
  std::iota(dims.begin(), dims.end(), axis);
  return e.broadcast_in_dim(p, ut.shape, dims);
}

// Whether any entry of the bool array `p` is true, as a bool scalar.
Atom any(Emitter& e, Atom p) {
  const int64_t r = e.array_type_of(p).rank();
  if (r == 0) return p;
  IntList axes(static_cast<size_t>(r));
  std::iota(axes.begin(), axes.end(), 0);
  Atom m = e.emit1(Prim::reduce_max, {e.convert(p, DType::i32)}, Params{{"axes", axes}});
  return e.emit1(Prim::gt, {m, e.scalar(DType::i32, 0.0)});
}

struct ScatterSite {
  int64_t axis;
  int64_t dim;    // size of the scattered axis
  Atom idx;       // the index array
  ArrayType ut;   // the update's type
  Indexer ix;     // x[..., idx, ...]
  Atom in_range;  // bool[k]: 0 <= idx < dim
  Atom kept;      // bool[k]: the updates that reach the result (in range; scatter: not
                  // overwritten by a later duplicate)
};

ScatterSite scatter_site(Emitter& e, const TransposeArgs& a) {
  if (a.linear(1))
    throw Error(fmt::format("transpose: `{}` is not linear in its indices", prim_name(a.eqn.prim)));
  ScatterSite s;
  const ArrayType xt = a.out_acc[0]->type();
  s.axis = a.eqn.params.get<int64_t>("axis");
  s.dim = xt.shape[static_cast<size_t>(s.axis)];
  s.idx = a.val[1];
  s.ut = a.acc[2] ? a.acc[2]->type() : e.array_type_of(a.val[2]);
  s.ix = axis_indexer(xt, s.axis);
  const DType it = e.array_type_of(s.idx).dtype;
  s.in_range =
      e.emit1(Prim::and_, {e.emit1(Prim::ge, {s.idx, e.scalar(it, 0.0)}),
                           e.emit1(Prim::lt, {s.idx, e.scalar(it, static_cast<double>(s.dim))})});
  s.kept = s.in_range;
  // A repeated index keeps only its last update; `unique_indices=True` promises none repeat,
  // and a unit run's entries a[0] + i are distinct (fewer of them than the dtype's values).
  const ArrayType index_type = e.array_type_of(s.idx);
  const bool distinct_run = index_type.rank() == 1 && index_type.shape[0] <= (int64_t{1} << 31) &&
                            is_unit_run(e.builder().jaxpr(), s.idx);
  const bool may_repeat = !a.eqn.params.get_or<bool>("unique_indices", false) && !distinct_run;
  if (a.eqn.prim == Prim::scatter && a.wants(2) && may_repeat)
    s.kept = e.emit1(Prim::and_, {s.in_range, last_write_mask(e, s.idx, s.dim)});
  return s;
}

// g where the update reached the result, zero where scatter dropped or overwrote it.
Atom mask_dropped(Emitter& e, const ScatterSite& s, Atom g) {
  return e.select(widen(e, s.kept, s.ut, s.axis), {e.zeros(s.ut), g});
}

// The entry idx[i] of a 1-D index vector, as a scalar.
Atom entry(Emitter& e, Atom idx, int64_t i) {
  Atom one = e.emit1(Prim::slice, {idx},
                     Params{{"start_indices", IntList{i}},
                            {"limit_indices", IntList{i + 1}},
                            {"strides", NoneParam{}}});
  return e.emit1(Prim::squeeze, {one}, Params{{"dimensions", IntList{0}}});
}

// Whether some in-range index equals `at` (an in-range position): any(in_range & idx == at).
// For a unit run (passes/simplify/unit_run.h: idx[i] == idx[0] + i with wrap-around) this is a
// scalar test on its ends, first <= at <= last, or (the run wrapped past the type's maximum) at >=
// first or at <= last; otherwise a reduction over the index vector.
std::function<Atom(double)> hits_fn(Emitter& e, const ScatterSite& s) {
  const ArrayType it = e.array_type_of(s.idx);
  if (it.rank() == 1 && it.shape[0] >= 1 && is_unit_run(e.builder().jaxpr(), s.idx)) {
    const Atom first = entry(e, s.idx, 0), last = entry(e, s.idx, it.shape[0] - 1);
    const Atom straight = e.emit1(Prim::ge, {last, first});
    return [&e, first, last, straight, dt = it.dtype](double at) {
      const Atom p = e.scalar(dt, at);
      Atom inside =
          e.emit1(Prim::and_, {e.emit1(Prim::le, {first, p}), e.emit1(Prim::le, {p, last})});
      Atom around =
          e.emit1(Prim::or_, {e.emit1(Prim::ge, {p, first}), e.emit1(Prim::le, {p, last})});
      return e.select(straight, {around, inside});
    };
  }
  return [&e, &s, dt = it.dtype](double at) {
    return any(e, e.emit1(Prim::and_, {s.in_range, e.emit1(Prim::eq, {s.idx, e.scalar(dt, at)})}));
  };
}

// The values to swap into R[clamp(idx)] so that exactly the in-range entries become zero.
// An out-of-range index clamps to 0 or dim-1; it writes back the old value g there, unless
// an in-range index also names that entry (then it writes zero too), so all writes to one
// entry agree whatever order duplicates are written in.
Atom zeroing_values(Emitter& e, const ScatterSite& s, Atom g) {
  const DType it = e.array_type_of(s.idx).dtype;
  const std::function<Atom(double)> hits = hits_fn(e, s);
  Atom below = e.emit1(Prim::lt, {s.idx, e.scalar(it, 0.0)});
  Atom above = e.emit1(Prim::ge, {s.idx, e.scalar(it, static_cast<double>(s.dim))});
  Atom zero = e.emit1(
      Prim::or_,
      {s.in_range,
       e.emit1(Prim::or_, {e.emit1(Prim::and_, {below, hits(0.0)}),
                           e.emit1(Prim::and_, {above, hits(static_cast<double>(s.dim - 1))})})});
  return e.select(widen(e, zero, s.ut, s.axis), {g, e.zeros(s.ut)});
}

// The operand's accumulator takes over the result's buffer, or (it already holds a dense
// sum) gets the buffer's contents added.
void hand_over(Emitter& e, Accum& to, Accum& from) {
  if (to.can_alias())
    to.alias_of(e, from);
  else
    to.add(e, from.freeze(e));
}

void scatter_transpose(Emitter& e, TransposeArgs& a) {
  Accum& out = *a.out_acc[0];
  if (out.is_empty() || (!a.wants(0) && !a.wants(2))) return;
  const ScatterSite s = scatter_site(e, a);
  if (out.can_hand_over()) {
    const Atom g = *out.read_at(e, s.ix, {s.idx});
    if (a.wants(2)) a.acc[2]->add(e, mask_dropped(e, s, g));
    if (a.wants(0)) {
      out.swap_out(e, zeroing_values(e, s, g), s.ix, {s.idx});
      hand_over(e, *a.acc[0], out);
    }
    return;
  }
  MaybeAtom ct = out.freeze(e);
  if (!ct) return;
  if (a.wants(0))
    a.acc[0]->add(e, e.emit1(Prim::scatter, {*ct, s.idx, e.zeros(s.ut)}, a.eqn.params));
  if (a.wants(2))
    a.acc[2]->add(
        e, mask_dropped(e, s, e.emit1(Prim::gather, {*ct, s.idx}, Params{{"axis", s.axis}})));
}

void scatter_add_transpose(Emitter& e, TransposeArgs& a) {
  Accum& out = *a.out_acc[0];
  if (out.is_empty() || (!a.wants(0) && !a.wants(2))) return;
  const ScatterSite s = scatter_site(e, a);
  if (out.can_hand_over()) {
    if (a.wants(2)) a.acc[2]->add(e, mask_dropped(e, s, *out.read_at(e, s.ix, {s.idx})));
    if (a.wants(0)) hand_over(e, *a.acc[0], out);
    return;
  }
  MaybeAtom ct = out.freeze(e);
  if (!ct) return;
  if (a.wants(0)) a.acc[0]->add(e, *ct);
  if (a.wants(2))
    a.acc[2]->add(
        e, mask_dropped(e, s, e.emit1(Prim::gather, {*ct, s.idx}, Params{{"axis", s.axis}})));
}

// reshape / squeeze / expand_dims: the operand's cotangent is the result's, reshaped.
void reshape_transpose(Emitter& e, TransposeArgs& a) {
  Accum& out = *a.out_acc[0];
  if (!a.wants(0) || out.is_empty()) return;
  Accum& in = *a.acc[0];
  if (out.can_hand_over() && in.can_alias()) {
    in.alias_of(e, out);
    return;
  }
  MaybeAtom ct = out.freeze(e);
  if (!ct) return;
  in.add(e, e.reshape(*ct, in.type().shape));
}

}  // namespace

void register_aliasing_transpose_rules(TransposeRuleTable& t, LazyCotangentTable& lazy) {
  auto aliasing = [&](Prim p, TransposeRule rule) {
    t.set(p, rule);
    lazy.set(p, true);  // the output's accumulator, unfrozen, may become the operand's
  };
  for (Prim p : {Prim::reshape, Prim::squeeze, Prim::expand_dims}) aliasing(p, reshape_transpose);
  aliasing(Prim::dynamic_update_slice, dynamic_update_slice_transpose);
  aliasing(Prim::scatter, scatter_transpose);
  aliasing(Prim::scatter_add, scatter_add_transpose);
}

}  // namespace refjit
