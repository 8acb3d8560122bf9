#include "passes/ad/accum.h"

#include <fmt/format.h>

#include "refjit/ir/error.h"

namespace refjit {

Accum Accum::value(ArrayType type) { return Accum(std::move(type), Kind::value); }
Accum Accum::dont_want(ArrayType type) { return Accum(std::move(type), Kind::dont_want); }
Accum Accum::for_ref_value(ArrayType type) { return Accum(std::move(type), Kind::tangent_ref); }

Accum Accum::into_ref(ArrayType type, Atom ref) {
  Accum a(std::move(type), Kind::user_ref);
  a.buf_.emplace(ref, a.type_);
  return a;
}

Accum Accum::held_in(ArrayType type, Atom ref) {
  Accum a(std::move(type), Kind::value);
  a.buf_.emplace(ref, a.type_, std::nullopt, /*borrowed=*/true);
  return a;
}

void Accum::ensure_buffer(Emitter& e) {
  if (buf_) return;
  buf_.emplace(e.new_ref(value_ ? *value_ : e.zeros(type_)), type_);
  value_.reset();
  flush_pending(e);
}

void Accum::flush_pending(Emitter& e) {
  std::vector<Sparse> pending = std::move(pending_);
  pending_.clear();
  for (const Sparse& s : pending) buf_->addupdate(e, s.ct, s.idx, s.dyn);
}

void Accum::add(Emitter& e, const Atom& ct) {
  if (!wanted()) return;
  if (!pending_.empty()) ensure_buffer(e);
  if (buf_) {
    buf_->addupdate(e, ct, Indexer{}, {});
  } else if (kind_ == Kind::tangent_ref) {
    buf_.emplace(e.new_ref(ct), type_);
  } else {
    value_ = value_ ? e.add(*value_, ct) : ct;
  }
}

void Accum::add_at(Emitter& e, const Atom& ct, const Indexer& idx, const std::vector<Atom>& dyn) {
  if (!wanted()) return;
  if (can_alias()) {  // nothing but sparse contributions so far: keep them pending
    pending_.push_back(Sparse{ct, idx, dyn});
    return;
  }
  ensure_buffer(e);
  buf_->addupdate(e, ct, idx, dyn);
}

Atom Accum::swap_out(Emitter& e, const Atom& g, const Indexer& idx, const std::vector<Atom>& dyn) {
  ensure_buffer(e);
  return buf_->swap(e, g, idx, dyn);
}

MaybeAtom Accum::read_at(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn) {
  if (buf_) return buf_->get(e, idx, dyn);
  if (!value_ && pending_.empty()) return std::nullopt;
  if (value_ && idx.is_whole()) return value_;
  ensure_buffer(e);
  return buf_->get(e, idx, dyn);
}

Atom Accum::buffer(Emitter& e) {
  ensure_buffer(e);
  if (buf_->is_view()) buf_->materialize(e);  // a structured eqn needs a ref of this type
  return buf_->ref();
}

MaybeAtom Accum::freeze(Emitter& e) {
  if (!wanted()) return std::nullopt;
  if (kind_ == Kind::user_ref) throw Error("internal: freezing a user's gradient ref");
  if (!pending_.empty()) ensure_buffer(e);
  if (buf_) {
    value_ = buf_->read_out(e);
    buf_.reset();
  }
  return value_;
}

Atom Accum::freeze_instantiated(Emitter& e) {
  MaybeAtom v = freeze(e);
  return v ? *v : e.zeros(type_);
}

void Accum::alias_of(Emitter& e, Accum& from) {
  if (!can_alias() || !from.can_hand_over() || !from.pending_.empty())
    throw Error("internal: Accum::alias_of between accumulators that cannot alias");
  const Shape from_shape = from.buf_->ref_shape();
  if (from.type_.dtype != type_.dtype || num_elements(from_shape) != num_elements(type_.shape))
    throw Error(fmt::format("internal: Accum::alias_of of a {} buffer by a {} accumulator",
                            from.type_.str(), type_.str()));
  buf_.emplace(from.buf_->ref(), type_, from_shape, from.buf_->borrowed());
  from.buf_.reset();
  from.value_.reset();
  flush_pending(e);
}

void Accum::adopt(Emitter& e, Atom ref) {
  if (!can_alias()) throw Error("internal: Accum::adopt on an accumulator that cannot alias");
  buf_.emplace(ref, type_);
  flush_pending(e);
}

bool Accum::holds_in(const Atom& ref) const {
  return buf_ && !buf_->is_view() && is_var(buf_->ref()) && is_var(ref) &&
         as_var(buf_->ref()) == as_var(ref);
}

Atom Accum::take_buffer(Emitter& e) {
  if (!pending_.empty()) ensure_buffer(e);
  if (can_hand_over() && !buf_->borrowed() && !buf_->is_view()) {
    Atom r = buf_->ref();
    buf_.reset();
    return r;
  }
  Atom r = e.new_ref(freeze_instantiated(e));
  value_.reset();
  return r;
}

}  // namespace refjit
