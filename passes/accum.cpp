#include "passes/accum.h"

#include <fmt/format.h>

#include "refjit/ir/error.h"

namespace refjit {

namespace {

Atom reshaped(Emitter& e, const Atom& x, const Shape& shape) {
  if (e.array_type_of(x).shape == shape) return x;
  return e.emit1(Prim::reshape, {x},
                 Params{{"new_sizes", IntList(shape)}, {"dimensions", NoneParam{}}});
}

}  // namespace

Accum Accum::value(ArrayType type) {
  Accum a;
  a.type_ = std::move(type);
  return a;
}

Accum Accum::dont_want(ArrayType type) {
  Accum a = value(std::move(type));
  a.wanted_ = false;
  return a;
}

Accum Accum::into_ref(ArrayType type, Atom ref) {
  Accum a = value(std::move(type));
  a.ref_ = ref;
  a.user_ref_ = true;
  return a;
}

Accum Accum::for_ref_value(ArrayType type) {
  Accum a = value(std::move(type));
  a.ref_valued_ = true;
  return a;
}

void Accum::ensure_buffer(Emitter& e) {
  if (ref_) return;
  ref_ = e.new_ref(value_ ? *value_ : e.zeros(type_));
  value_.reset();
  flush_pending(e);
}

void Accum::flush_pending(Emitter& e) {
  std::vector<Sparse> pending = std::move(pending_);
  pending_.clear();
  for (const Sparse& s : pending) ref_addupdate(e, s.ct, s.idx, s.dyn);
}

bool Accum::view_indexer(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn, Indexer& out,
                         std::vector<Atom>& out_dyn) const {
  // Supported: one index array on a rank-1 view (a flattened buffer, e.g. a scatter on
  // reshape(carry, [n])). The flat index is clamped into [0, n-1] first, as the view's own
  // index array would be, so the split indices are in range and name the same entry. A
  // rank-0 buffer (a [1] view of a scalar, e.g. squeeze's operand aliasing a scalar carry's
  // cotangent) has no dim to put an index array on: no indexer on it selects the index
  // array's shape, so the caller copies the single element into a ref of the view's shape.
  if (type_.rank() != 1 || view_->empty() || idx.dims.size() != 1 ||
      idx.dims[0].kind != IndexerDim::Kind::index_array || dyn.size() != 1)
    return false;
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

void Accum::materialize_view(Emitter& e) {
  Atom whole = borrowed_ ? e.get(*ref_, Indexer{}, {}) : e.freeze(*ref_);
  ref_ = e.new_ref(reshaped(e, whole, type_.shape));
  view_.reset();
  borrowed_ = false;
}

Atom Accum::ref_get(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn) {
  if (view_) {
    if (idx.is_whole()) return reshaped(e, e.get(*ref_, idx, dyn), type_.shape);
    Indexer ri;
    std::vector<Atom> rd;
    if (view_indexer(e, idx, dyn, ri, rd)) return e.get(*ref_, ri, rd);
    materialize_view(e);
  }
  return e.get(*ref_, idx, dyn);
}

Atom Accum::ref_swap(Emitter& e, const Atom& g, const Indexer& idx, const std::vector<Atom>& dyn) {
  if (view_) {
    if (idx.is_whole())
      return reshaped(e, e.swap(*ref_, reshaped(e, g, *view_), idx, dyn), type_.shape);
    Indexer ri;
    std::vector<Atom> rd;
    if (view_indexer(e, idx, dyn, ri, rd)) return e.swap(*ref_, g, ri, rd);
    materialize_view(e);
  }
  return e.swap(*ref_, g, idx, dyn);
}

void Accum::ref_addupdate(Emitter& e, const Atom& ct, const Indexer& idx,
                          const std::vector<Atom>& dyn) {
  if (view_) {
    if (idx.is_whole()) return e.addupdate(*ref_, reshaped(e, ct, *view_), idx, dyn);
    Indexer ri;
    std::vector<Atom> rd;
    if (view_indexer(e, idx, dyn, ri, rd)) return e.addupdate(*ref_, ct, ri, rd);
    materialize_view(e);
  }
  e.addupdate(*ref_, ct, idx, dyn);
}

void Accum::add(Emitter& e, const Atom& ct) {
  if (!wanted_) return;
  if (!pending_.empty()) ensure_buffer(e);
  if (ref_) {
    ref_addupdate(e, ct, Indexer{}, {});
  } else if (ref_valued_) {
    ref_ = e.new_ref(ct);
  } else {
    value_ = value_ ? e.add(*value_, ct) : ct;
  }
}

void Accum::add_at(Emitter& e, const Atom& ct, const Indexer& idx, const std::vector<Atom>& dyn) {
  if (!wanted_) return;
  if (can_alias()) {  // nothing but sparse contributions so far: keep them pending
    pending_.push_back(Sparse{ct, idx, dyn});
    return;
  }
  ensure_buffer(e);
  ref_addupdate(e, ct, idx, dyn);
}

Atom Accum::swap_out(Emitter& e, const Atom& g, const Indexer& idx, const std::vector<Atom>& dyn) {
  ensure_buffer(e);
  return ref_swap(e, g, idx, dyn);
}

MaybeAtom Accum::read_at(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn) {
  if (ref_) return ref_get(e, idx, dyn);
  if (!value_ && pending_.empty()) return std::nullopt;
  if (value_ && idx.is_whole()) return value_;
  ensure_buffer(e);
  return ref_get(e, idx, dyn);
}

Atom Accum::buffer(Emitter& e) {
  ensure_buffer(e);
  if (view_) materialize_view(e);  // a structured eqn needs a ref of this value's type
  return *ref_;
}

MaybeAtom Accum::freeze(Emitter& e) {
  if (!wanted_) return std::nullopt;
  if (!pending_.empty()) ensure_buffer(e);
  if (ref_ && !user_ref_) {
    value_ = borrowed_ ? e.get(*ref_, Indexer{}, {}) : e.freeze(*ref_);
    if (view_) value_ = reshaped(e, *value_, type_.shape);
    ref_.reset();
    view_.reset();
    borrowed_ = false;
  }
  if (user_ref_) throw Error("internal: freezing a user's gradient ref");
  return value_;
}

Atom Accum::freeze_instantiated(Emitter& e) {
  MaybeAtom v = freeze(e);
  return v ? *v : e.zeros(type_);
}

Accum Accum::held_in(ArrayType type, Atom ref) {
  Accum a = value(std::move(type));
  a.ref_ = ref;
  a.borrowed_ = true;
  return a;
}

void Accum::alias_of(Emitter& e, Accum& from) {
  if (!can_alias() || !from.can_hand_over() || !from.pending_.empty())
    throw Error("internal: Accum::alias_of between accumulators that cannot alias");
  const Shape from_shape = from.view_ ? *from.view_ : from.type_.shape;
  if (from.type_.dtype != type_.dtype || num_elements(from_shape) != num_elements(type_.shape))
    throw Error(fmt::format("internal: Accum::alias_of of a {} buffer by a {} accumulator",
                            from.type_.str(), type_.str()));
  ref_ = from.ref_;
  borrowed_ = from.borrowed_;
  if (from_shape != type_.shape) view_ = from_shape;
  split_.reset();
  from.ref_.reset();
  from.view_.reset();
  from.value_.reset();
  from.borrowed_ = false;
  flush_pending(e);
}

void Accum::adopt(Emitter& e, Atom ref) {
  if (!can_alias()) throw Error("internal: Accum::adopt on an accumulator that cannot alias");
  ref_ = ref;
  view_.reset();
  borrowed_ = false;
  flush_pending(e);
}

bool Accum::holds_in(const Atom& ref) const {
  return ref_ && !view_ && is_var(*ref_) && is_var(ref) && as_var(*ref_) == as_var(ref);
}

Atom Accum::take_buffer(Emitter& e) {
  if (!pending_.empty()) ensure_buffer(e);
  if (can_hand_over() && !borrowed_ && !view_) {
    Atom r = *ref_;
    ref_.reset();
    return r;
  }
  Atom r = e.new_ref(freeze_instantiated(e));
  value_.reset();
  return r;
}

}  // namespace refjit
