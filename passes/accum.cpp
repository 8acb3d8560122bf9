#include "passes/accum.h"

#include "refjit/ir/error.h"

namespace refjit {

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
  for (const Sparse& s : pending_) e.addupdate(*ref_, s.ct, s.idx, s.dyn);
  pending_.clear();
}

void Accum::add(Emitter& e, const Atom& ct) {
  if (!wanted_) return;
  if (!pending_.empty()) ensure_buffer(e);
  if (ref_) {
    e.addupdate(*ref_, ct, Indexer{}, {});
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
  e.addupdate(*ref_, ct, idx, dyn);
}

Atom Accum::swap_out(Emitter& e, const Atom& g, const Indexer& idx, const std::vector<Atom>& dyn) {
  ensure_buffer(e);
  return e.swap(*ref_, g, idx, dyn);
}

MaybeAtom Accum::read_at(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn) {
  if (ref_) return e.get(*ref_, idx, dyn);
  if (!value_ && pending_.empty()) return std::nullopt;
  if (value_ && idx.is_whole()) return value_;
  ensure_buffer(e);
  return e.get(*ref_, idx, dyn);
}

Atom Accum::buffer(Emitter& e) {
  ensure_buffer(e);
  return *ref_;
}

MaybeAtom Accum::freeze(Emitter& e) {
  if (!wanted_) return std::nullopt;
  if (!pending_.empty()) ensure_buffer(e);
  if (ref_ && !user_ref_) {
    value_ = borrowed_ ? e.get(*ref_, Indexer{}, {}) : e.freeze(*ref_);
    ref_.reset();
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
  ref_ = from.ref_;
  borrowed_ = from.borrowed_;
  from.ref_.reset();
  from.value_.reset();
  from.borrowed_ = false;
  flush_pending(e);
}

void Accum::adopt(Emitter& e, Atom ref) {
  if (!can_alias()) throw Error("internal: Accum::adopt on an accumulator that cannot alias");
  ref_ = ref;
  borrowed_ = false;
  flush_pending(e);
}

bool Accum::holds_in(const Atom& ref) const {
  return ref_ && is_var(*ref_) && is_var(ref) && as_var(*ref_) == as_var(ref);
}

Atom Accum::take_buffer(Emitter& e) {
  if (!pending_.empty()) ensure_buffer(e);
  if (can_hand_over() && !borrowed_) {
    Atom r = *ref_;
    ref_.reset();
    return r;
  }
  Atom r = e.new_ref(freeze_instantiated(e));
  value_.reset();
  return r;
}

}  // namespace refjit
