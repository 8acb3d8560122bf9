#include "passes/ad/cotangent_ref.h"

#include <algorithm>

#include "passes/simplify/unit_run.h"

namespace refjit {

CotangentRef::CotangentRef(Atom ref, ArrayType type, std::optional<Shape> view, bool borrowed)
    : ref_(std::move(ref)), type_(std::move(type)), borrowed_(borrowed) {
  if (view && *view != type_.shape) view_ = std::move(view);
}

bool CotangentRef::one_flat_index(const Indexer& idx, const std::vector<Atom>& dyn) const {
  return view_ && type_.rank() == 1 && !view_->empty() && idx.dims.size() == 1 &&
         idx.dims[0].kind == IndexerDim::Kind::index_array && dyn.size() == 1;
}

std::optional<Atom> CotangentRef::flat_run_start(Emitter& e, const Indexer& idx,
                                                 const std::vector<Atom>& dyn) {
  if (!one_flat_index(idx, dyn) || !is_var(dyn[0])) return std::nullopt;
  const uint32_t id = as_var(dyn[0]).id;
  if (run_start_ && run_start_->first == id) return run_start_->second;
  const std::optional<UnitRun> run = as_unit_run(e.builder().jaxpr(), dyn[0]);
  if (!run || run->length < 1) return std::nullopt;
  const Atom start = sum_of_terms(run->terms, e.array_type_of(dyn[0]).dtype,
                                  [&](Prim p, std::vector<Atom> ins) { return e.emit1(p, ins); });
  run_start_.emplace(id, start);
  return start;
}

std::optional<CotangentRef::Run> CotangentRef::window_run(Emitter& e, const Indexer& idx,
                                                          const std::vector<Atom>& dyn) const {
  if (!view_ || type_.rank() != 1 || view_->empty() || idx.dims.size() != 1) return std::nullopt;
  const IndexerDim& d = idx.dims[0];
  if (d.kind != IndexerDim::Kind::slice || (d.stride != 1 && d.size > 1)) return std::nullopt;
  // A slice start is clamped into [0, n - size] (as dynamic_slice clamps), so the run's
  // positions are all in range and the run's own clamp never applies.
  const int64_t last = type_.shape[0] - d.size;
  if (!d.dynamic)
    return Run{Literal::of_int(DType::i32, std::clamp<int64_t>(d.start, 0, last)), d.size};
  const DType it = e.array_type_of(dyn.at(0)).dtype;
  const Atom low = e.emit1(Prim::max, {dyn[0], e.scalar(it, 0.0)});
  return Run{e.emit1(Prim::min, {low, e.scalar(it, static_cast<double>(last))}), d.size};
}

std::optional<CotangentRef::Run> CotangentRef::run_of(Emitter& e, const Indexer& idx,
                                                      const std::vector<Atom>& dyn) {
  if (std::optional<Atom> start = flat_run_start(e, idx, dyn))
    return Run{*start, e.array_type_of(dyn[0]).shape.at(0)};
  return window_run(e, idx, dyn);
}

Atom CotangentRef::flat_run(Emitter& e, Prim p, std::vector<Atom> ins, int64_t length) const {
  // The run is clamped into the view, as the index array's access clamps each index.
  return e.emit1(p, std::move(ins), Params{{"bound", type_.shape[0] - 1}, {"length", length}});
}

bool CotangentRef::view_indexer(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn,
                                Indexer& out, std::vector<Atom>& out_dyn) {
  // Supported: one index array on a rank-1 view (a flattened buffer, e.g. a scatter on
  // reshape(carry, [n])). The flat index is clamped into [0, n-1] first, as the view's own
  // index array would be, so the split indices are in range and name the same entry. A
  // rank-0 buffer (a [1] view of a scalar, e.g. squeeze's operand aliasing a scalar carry's
  // cotangent) has no dim to put an index array on: no indexer on it selects the index
  // array's shape, so the caller copies the single element into a ref of the view's shape.
  if (!one_flat_index(idx, dyn)) return false;
  const Shape& s = *view_;
  out.dims.assign(s.size(), IndexerDim{IndexerDim::Kind::index_array, 0, 0, 1, true});
  if (split_ && is_var(dyn[0]) && split_->first == as_var(dyn[0]).id &&
      split_->second.size() == s.size()) {
    out_dyn = split_->second;
    return true;
  }
  const DType it = e.array_type_of(dyn[0]).dtype;
  Atom flat = e.emit1(Prim::max, {dyn[0], e.scalar(it, 0.0)});
  flat = e.emit1(Prim::min, {flat, e.scalar(it, static_cast<double>(type_.shape[0] - 1))});
  out_dyn.clear();
  int64_t stride = type_.shape[0];
  MaybeAtom prev;  // flat / stride of the previous (outer) dim
  for (int64_t d : s) {
    stride /= d;
    Atom q = stride == 1 ? flat : e.div(flat, e.scalar(it, static_cast<double>(stride)));
    Atom comp = prev ? e.sub(q, e.mul(*prev, e.scalar(it, static_cast<double>(d)))) : q;
    prev = q;
    out_dyn.push_back(comp);
  }
  if (is_var(dyn[0])) split_.emplace(as_var(dyn[0]).id, out_dyn);
  return true;
}

void CotangentRef::materialize(Emitter& e) {
  Atom whole = borrowed_ ? e.get(ref_, Indexer{}, {}) : e.freeze(ref_);
  ref_ = e.new_ref(e.reshape(whole, type_.shape));
  view_.reset();
  borrowed_ = false;
  split_.reset();
  run_start_.reset();
}

Atom CotangentRef::get(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn) {
  if (view_) {
    if (idx.is_whole()) return e.reshape(e.get(ref_, idx, dyn), type_.shape);
    if (std::optional<Run> run = run_of(e, idx, dyn))
      return flat_run(e, Prim::get_flat_run, {ref_, run->start}, run->length);
    Indexer ri;
    std::vector<Atom> rd;
    if (view_indexer(e, idx, dyn, ri, rd)) return e.get(ref_, ri, rd);
    materialize(e);
  }
  return e.get(ref_, idx, dyn);
}

Atom CotangentRef::swap(Emitter& e, const Atom& g, const Indexer& idx,
                        const std::vector<Atom>& dyn) {
  if (view_) {
    if (idx.is_whole()) return e.reshape(e.swap(ref_, e.reshape(g, *view_), idx, dyn), type_.shape);
    if (std::optional<Run> run = run_of(e, idx, dyn))
      return flat_run(e, Prim::swap_flat_run, {ref_, run->start, g}, run->length);
    Indexer ri;
    std::vector<Atom> rd;
    if (view_indexer(e, idx, dyn, ri, rd)) return e.swap(ref_, g, ri, rd);
    materialize(e);
  }
  return e.swap(ref_, g, idx, dyn);
}

void CotangentRef::addupdate(Emitter& e, const Atom& ct, const Indexer& idx,
                             const std::vector<Atom>& dyn) {
  if (view_) {
    if (idx.is_whole()) return e.addupdate(ref_, e.reshape(ct, *view_), idx, dyn);
    if (std::optional<Run> run = window_run(e, idx, dyn)) {
      // The run read, added to and written back: the positions of a window are distinct.
      const Atom now = flat_run(e, Prim::get_flat_run, {ref_, run->start}, run->length);
      flat_run(e, Prim::swap_flat_run, {ref_, run->start, e.add(now, ct)}, run->length);
      return;
    }
    Indexer ri;
    std::vector<Atom> rd;
    if (view_indexer(e, idx, dyn, ri, rd)) return e.addupdate(ref_, ct, ri, rd);
    materialize(e);
  }
  e.addupdate(ref_, ct, idx, dyn);
}

Atom CotangentRef::read_out(Emitter& e) {
  Atom whole = borrowed_ ? e.get(ref_, Indexer{}, {}) : e.freeze(ref_);
  return view_ ? e.reshape(whole, type_.shape) : whole;
}

}  // namespace refjit
