// Transpose rules of the ref primitives (REFS.md 2.3). A ref's cotangent is a ref holding,
// at each point of the backward pass, the cotangent of the ref's value at the matching point
// of the forward pass: get <-> addupdate, swap <-> swap, new_ref <-> freeze.
#include <fmt/format.h>

#include "passes/ad/last_write_mask.h"
#include "passes/ad/transpose_rules.h"
#include "passes/ad/window_shift.h"
#include "refjit/ir/error.h"
#include "refjit/ir/indexing.h"

namespace refjit {

namespace {

Accum& ref_accum(const TransposeArgs& a) {
  if (!a.acc[0])
    throw Error(
        fmt::format("transpose: `{}` on a ref that is not linear inside a linear "
                    "jaxpr (primal ref effects belong to the primal jaxpr)",
                    prim_name(a.eqn.prim)));
  return *a.acc[0];
}

bool has_index_array(const Indexer& ix) {
  for (const IndexerDim& d : ix.dims)
    if (d.kind == IndexerDim::Kind::index_array) return true;
  return false;
}

// For a write through index arrays (`r[..., i, ..., j, ...] <- v`): a bool of v's shape, true
// where the written element is not overwritten by a later one (row-major over the index
// arrays' broadcast shape; the index arrays clamp). The key of a position is its clamped
// indices flattened over the index-array dims; last_write_mask compares the keys.
Atom surviving_writes(Emitter& e, const ArrayType& ref_type, const Indexer& ix,
                      const std::vector<Atom>& dyn) {
  std::vector<Type> dyn_types;
  for (const Atom& d : dyn) dyn_types.push_back(e.type_of(d));
  const IndexedLayout layout = indexed_layout(ref_type, ix, dyn_types);
  const Shape& bshape = layout.array_shape;
  int64_t range = 1;
  for (size_t d = 0; d < ix.dims.size(); ++d)
    if (ix.dims[d].kind == IndexerDim::Kind::index_array) range *= ref_type.shape[d];
  const DType kt = range > (int64_t{1} << 30) ? DType::i64 : DType::i32;
  MaybeAtom key;
  int64_t stride = range;
  size_t next = 0;
  for (size_t d = 0; d < ix.dims.size(); ++d) {
    const IndexerDim& id = ix.dims[d];
    if (!id.dynamic) continue;
    const Atom& arr = dyn.at(next++);
    if (id.kind != IndexerDim::Kind::index_array) continue;
    const int64_t n = ref_type.shape[d];
    stride /= n;
    const ArrayType at = e.array_type_of(arr);
    Atom c = e.emit1(Prim::max, {arr, e.scalar(at.dtype, 0.0)});
    c = e.convert(e.emit1(Prim::min, {c, e.scalar(at.dtype, static_cast<double>(n - 1))}), kt);
    if (at.shape != bshape) {  // NumPy broadcasting: trailing dims aligned
      IntList dims;
      for (size_t j = 0; j < at.shape.size(); ++j)
        dims.push_back(static_cast<int64_t>(bshape.size() - at.shape.size() + j));
      c = e.broadcast_in_dim(c, bshape, dims);
    }
    if (stride != 1) c = e.mul(c, e.scalar(kt, static_cast<double>(stride)));
    key = key ? e.emit1(Prim::add, {*key, c}) : c;
  }
  Atom keep = last_write_mask(e, *key, range);
  if (bshape == layout.shape) return keep;
  IntList dims;
  for (size_t j = 0; j < bshape.size(); ++j)
    dims.push_back(layout.array_position + static_cast<int64_t>(j));
  return e.broadcast_in_dim(keep, layout.shape, dims);
}

// swap through index arrays, which may repeat: the forward pass reads every old value
// before writing, and where positions repeat the last write wins. So the written value's
// cotangent is the slice's cotangent where that write survives (zero where a later
// duplicate overwrote it), the slice's cotangent is then replaced by zeros, and the old
// values' cotangents are added (duplicates accumulate, as for `get`).
void swap_index_array_transpose(Emitter& e, TransposeArgs& a, Accum& r, const Indexer& ix,
                                const ArrayType& vt) {
  const std::vector<Atom> dyn = a.dyn(2);
  if (r.has_buffer()) {
    Atom x_bar = r.swap_out(e, e.zeros(vt), ix, dyn);
    if (a.wants(1)) {
      Atom keep = surviving_writes(e, r.type(), ix, dyn);
      a.acc[1]->add(e, e.select(keep, {e.zeros(vt), x_bar}));
    }
  }
  if (a.ct[0]) r.add_at(e, *a.ct[0], ix, dyn);
}

}  // namespace

void register_ref_transpose_rules(TransposeRuleTable& t) {
  // get: the read value's cotangent flows into the ref's cotangent at the same index.
  t.set(Prim::get, [](Emitter& e, TransposeArgs& a) {
    if (!a.ct[0]) return;
    const Indexer& ix = a.eqn.params.get<Indexer>("indexer");
    if (ix.is_whole())
      ref_accum(a).add(e, *a.ct[0]);
    else
      ref_accum(a).add_at(e, *a.ct[0], ix, a.dyn(1));
  });
  // swap: the written value's cotangent is the slice's cotangent, which is replaced by the
  // old value's cotangent (zeros if the old value was unused). Through index arrays, which
  // may repeat, see swap_index_array_transpose.
  t.set(Prim::swap, [](Emitter& e, TransposeArgs& a) {
    Accum& r = ref_accum(a);
    if (!r.has_buffer() && !a.ct[0]) return;
    if (transpose_ref_shift(e, a)) return;  // a read of the same ref written back: one shift_add
    const Indexer& ix = a.eqn.params.get<Indexer>("indexer");
    const ArrayType vt = a.acc[1] ? a.acc[1]->type() : e.array_type_of(a.val[1]);
    if (has_index_array(ix)) return swap_index_array_transpose(e, a, r, ix, vt);
    Atom g = a.ct[0] ? *a.ct[0] : e.zeros(vt);
    Atom x_bar = r.swap_out(e, g, ix, a.dyn(2));
    if (a.wants(1)) a.acc[1]->add(e, x_bar);
  });
  t.set(Prim::addupdate, [](Emitter& e, TransposeArgs& a) {
    Accum& r = ref_accum(a);
    if (!a.wants(1) || !r.has_buffer()) return;
    a.acc[1]->add(e, r.read_at(e, a.eqn.params.get<Indexer>("indexer"), a.dyn(2)));
  });
  t.set(Prim::freeze, [](Emitter& e, TransposeArgs& a) { ref_accum(a).add(e, a.ct[0]); });
  t.set(Prim::new_ref, [](Emitter& e, TransposeArgs& a) {
    MaybeAtom ct = a.out_acc[0]->freeze(e);
    if (a.wants(0)) a.acc[0]->add(e, ct);
  });
}

}  // namespace refjit
