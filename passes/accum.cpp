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
}

void Accum::add(Emitter& e, const Atom& ct) {
  if (!wanted_) return;
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
  ensure_buffer(e);
  e.addupdate(*ref_, ct, idx, dyn);
}

Atom Accum::swap_out(Emitter& e, const Atom& g, const Indexer& idx, const std::vector<Atom>& dyn) {
  ensure_buffer(e);
  return e.swap(*ref_, g, idx, dyn);
}

MaybeAtom Accum::read_at(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn) {
  if (ref_) return e.get(*ref_, idx, dyn);
  if (!value_) return std::nullopt;
  if (idx.is_whole()) return value_;
  ensure_buffer(e);
  return e.get(*ref_, idx, dyn);
}

Atom Accum::buffer(Emitter& e) {
  ensure_buffer(e);
  return *ref_;
}

MaybeAtom Accum::freeze(Emitter& e) {
  if (!wanted_) return std::nullopt;
  if (ref_ && !user_ref_) {
    value_ = e.freeze(*ref_);
    ref_.reset();
  }
  if (user_ref_) throw Error("internal: freezing a user's gradient ref");
  return value_;
}

Atom Accum::freeze_instantiated(Emitter& e) {
  MaybeAtom v = freeze(e);
  return v ? *v : e.zeros(type_);
}

}  // namespace refjit
