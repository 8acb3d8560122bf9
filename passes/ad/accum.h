// Gradient accumulators (REFS.md 2.3-2.4, DESIGN.md "Core interfaces"): a transpose rule
// emits the cotangents of its linear operands only through their Accum.
#pragma once

#include <optional>

#include "passes/ad/cotangent_ref.h"
#include "passes/emitter.h"

namespace refjit {

class Accum {
 public:
  // A functional sum of array cotangents (GradValue, or an intermediate value).
  static Accum value(ArrayType type);
  // Nothing wanted (DontWant): every contribution is dropped, rules may skip their work.
  static Accum dont_want(ArrayType type);
  // Contributions are added in place into an existing ref (a user's gradient ref).
  static Accum into_ref(ArrayType type, Atom ref);
  // The cotangent of a Ref-typed linear value (a tangent ref): a ref buffer, created lazily
  // (no buffer = a zero cotangent).
  static Accum for_ref_value(ArrayType type);

  bool wanted() const { return kind_ != Kind::dont_want; }
  const ArrayType& type() const { return type_; }
  bool has_buffer() const { return buf_.has_value(); }
  // The cotangent of a Ref-typed value (or a user's gradient ref): always ref-backed.
  bool is_ref_like() const { return kind_ == Kind::tangent_ref || kind_ == Kind::user_ref; }
  // The cotangent of a Ref-typed value (a tangent ref), not of an array.
  bool is_ref_value() const { return kind_ == Kind::tangent_ref; }

  // acc += ct (dense).
  void add(Emitter& e, const Atom& ct);
  void add(Emitter& e, const MaybeAtom& ct) {
    if (ct) add(e, *ct);
  }
  // acc[idx] += ct, touching only the indexed entries. A value accumulator moves its sum
  // into an internal ref first (new_ref of the current sum, or of zeros), so a sparse
  // contribution costs O(|ct|) however many follow. An accumulator that has received
  // nothing else keeps sparse contributions pending (no buffer yet): if it then takes over
  // another's buffer (alias_of, adopt) they are added there, still O(|ct|); any other use
  // first makes a zeros buffer and adds them.
  void add_at(Emitter& e, const Atom& ct, const Indexer& idx, const std::vector<Atom>& dyn);
  // Reads acc[idx] and puts g there (the transpose of a write). Needs a ref-like accumulator.
  Atom swap_out(Emitter& e, const Atom& g, const Indexer& idx, const std::vector<Atom>& dyn);
  // acc[idx] if anything was accumulated, else a symbolic zero.
  MaybeAtom read_at(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn);
  // The ref holding the cotangent, created (zeros) if there is none yet: for passing a
  // ref-like accumulator into a structured eqn (cond, scan) that adds into it in place.
  Atom buffer(Emitter& e);
  // The accumulated cotangent (nullopt = symbolic zero). Ends an internal buffer's life.
  MaybeAtom freeze(Emitter& e);
  // The current sum made concrete (zeros if nothing came).
  Atom freeze_instantiated(Emitter& e);

  // --- Aliasing: ref-backed value accumulators handed from one value to another. ---
  // Used by scan's transpose (the carry cotangent lives in ONE ref for the whole loop) and
  // by rules whose output cotangent IS the operand's cotangent outside a slice they move
  // out first (dynamic_update_slice): the operand's accumulator takes over the output's
  // buffer instead of reading it densely, so per-step work stays O(slice).
  //
  // An accumulator whose sum already lives in `ref`, an internal ref created outside the
  // jaxpr being built (passed in as an argument). It is borrowed: freezing it reads the ref
  // with `get` (a jaxpr may only freeze refs it created).
  static Accum held_in(ArrayType type, Atom ref);
  // Nothing has been added yet (a symbolic zero).
  bool is_empty() const { return !value_ && !buf_ && pending_.empty(); }
  // The sum lives in an internal ref that may be handed to another accumulator.
  bool can_hand_over() const { return buf_ && !is_ref_like(); }
  // This accumulator may take over another's buffer: a wanted value accumulator that has
  // received nothing yet but pending sparse contributions (a dense sum would have to be
  // added densely).
  bool can_alias() const { return kind_ == Kind::value && !value_ && !buf_; }
  // `*this` (can_alias) takes over `from`'s buffer (can_hand_over) without a copy: from now
  // on this accumulator's sum is the buffer's contents plus its pending contributions (added
  // in place); `from` is left empty. The buffer may have another shape with the same element
  // count (the transpose of a reshape): this accumulator is then a *reshaped view* of it
  // (row-major, as `reshape`). A view translates its accesses onto the buffer's layout:
  // whole accesses reshape the value, an index array on a rank-1 view becomes one index
  // array per buffer dim (the flat index clamped into range, then split); any other access
  // (a slice of the flat view, an index array on a rank-0 buffer, ...) first copies the
  // buffer into one of the view's own shape (dense, correct).
  void alias_of(Emitter& e, Accum& from);
  // Makes `ref`, an internal ref created in the current jaxpr holding a cotangent, the
  // buffer of this accumulator (can_alias): adopted without a copy, as alias_of.
  void adopt(Emitter& e, Atom ref);
  // Whether the sum lives in `ref`, in `ref`'s own shape (not as a reshaped view).
  bool holds_in(const Atom& ref) const;
  // Moves the sum out as a ref buffer: the buffer itself when it can be handed over, else a
  // new ref of the frozen sum (zeros if none). Leaves this accumulator empty.
  Atom take_buffer(Emitter& e);

 private:
  // What the accumulator is for (JAX's ValAccum / RefAccum / NullAccum, as one type because a
  // value sum moves into a ref when a sparse contribution or a loop needs one).
  enum class Kind : uint8_t {
    value,        // a functional sum; moved into an internal ref when one is needed
    dont_want,    // every contribution dropped
    user_ref,     // added in place into the caller's gradient ref, never frozen
    tangent_ref,  // the cotangent of a Ref-typed value: always a ref, created lazily
  };
  struct Sparse {
    Atom ct;
    Indexer idx;
    std::vector<Atom> dyn;
  };

  Accum(ArrayType type, Kind kind) : kind_(kind), type_(std::move(type)) {}
  void ensure_buffer(Emitter& e);
  void flush_pending(Emitter& e);  // adds pending sparse contributions into the buffer

  Kind kind_ = Kind::value;
  ArrayType type_;
  MaybeAtom value_;                  // the functional sum, while there is no buffer
  std::optional<CotangentRef> buf_;  // the ref holding the sum (internal or the user's)
  std::vector<Sparse> pending_;      // sparse contributions waiting for a buffer
};

}  // namespace refjit
