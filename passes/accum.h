// Gradient accumulators (REFS.md 2.3-2.4, DESIGN.md "Core interfaces"): a transpose rule
// emits the cotangents of its linear operands only through their Accum.
#pragma once

#include <optional>

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

  bool wanted() const { return wanted_; }
  const ArrayType& type() const { return type_; }
  bool has_buffer() const { return ref_.has_value(); }
  // The cotangent of a Ref-typed value (or a user's gradient ref): always ref-backed.
  bool is_ref_like() const { return ref_valued_ || user_ref_; }

  // acc += ct (dense).
  void add(Emitter& e, const Atom& ct);
  void add(Emitter& e, const MaybeAtom& ct) {
    if (ct) add(e, *ct);
  }
  // acc[idx] += ct, touching only the indexed entries. A value accumulator moves its sum
  // into an internal ref first (new_ref of the current sum, or of zeros), so a sparse
  // contribution costs O(|ct|) however many follow.
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

 private:
  void ensure_buffer(Emitter& e);
  ArrayType type_;
  bool wanted_ = true;
  bool user_ref_ = false;    // ref_ is the caller's, never frozen
  bool ref_valued_ = false;  // the cotangent of a Ref-typed value
  MaybeAtom value_;          // functional sum
  MaybeAtom ref_;            // buffer (internal or the user's)
};

}  // namespace refjit
