// A ref holding a cotangent, read and written in the shape of the value it is the cotangent
// of. Accum (passes/ad/accum.h) keeps its sum in one once a sparse contribution or a loop needs
// a buffer.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "passes/emitter.h"

namespace refjit {

class CotangentRef {
 public:
  // `ref` holds a cotangent of type `type`. `view`: the shape of the ref when it differs
  // from `type`'s (same element count, row-major: a reshaped view of another value's
  // buffer). `borrowed`: the ref was created outside the jaxpr being built, so it is read
  // with `get`, never frozen (a jaxpr may only freeze refs it created).
  CotangentRef(Atom ref, ArrayType type, std::optional<Shape> view = std::nullopt,
               bool borrowed = false);

  const Atom& ref() const { return ref_; }
  bool borrowed() const { return borrowed_; }
  bool is_view() const { return view_.has_value(); }
  // The shape of the ref itself.
  const Shape& ref_shape() const { return view_ ? *view_ : type_.shape; }

  // ref[idx] in the value's shape. A view translates the indexer onto the ref's layout:
  // whole accesses reshape; a stride-1 slice of a rank-1 view (how dynamic_update_slice on a
  // flattened carry addresses it) and an index array on one that is a unit run (iota plus
  // scalars, passes/simplify/unit_run.h: how a scatter on a flattened carry addresses it) are
  // read and swapped as one flat run of the ref (get_flat_run / swap_flat_run, which native
  // code moves as a block); any other index array on a rank-1 view becomes one index array
  // per ref dim (the flat index clamped into range, then split); any other access first
  // copies the ref into one of the value's own shape (materialize: dense, correct).
  Atom get(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn);
  Atom swap(Emitter& e, const Atom& g, const Indexer& idx, const std::vector<Atom>& dyn);
  void addupdate(Emitter& e, const Atom& ct, const Indexer& idx, const std::vector<Atom>& dyn);

  // The whole cotangent as a value of the value's shape; ends an owned ref's life (freeze).
  Atom read_out(Emitter& e);
  // Copies a view (or a borrowed ref) into a new internal ref of the value's own shape.
  void materialize(Emitter& e);

 private:
  // Whether `idx` is one index array (`dyn`) on a rank-1 view of a ref with dims: the
  // accesses a view translates.
  bool one_flat_index(const Indexer& idx, const std::vector<Atom>& dyn) const;
  // The first index of such an index array, if it is a unit run: then the access is one flat
  // run of the ref from there.
  std::optional<Atom> flat_run_start(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn);
  struct Run {
    Atom start;
    int64_t length;
  };
  // The run a stride-1 slice of a rank-1 view names, its start clamped as a slice's is.
  std::optional<Run> window_run(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn) const;
  // The run `idx` names on a rank-1 view: a unit-run index array or a window.
  std::optional<Run> run_of(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn);
  // get_flat_run / swap_flat_run `p` on `ins` (the ref, the start, maybe the values).
  Atom flat_run(Emitter& e, Prim p, std::vector<Atom> ins, int64_t length) const;
  // The indexer on the ref selecting the same entries as `idx` on the view, if supported.
  bool view_indexer(Emitter& e, const Indexer& idx, const std::vector<Atom>& dyn, Indexer& out,
                    std::vector<Atom>& out_dyn);

  Atom ref_;
  ArrayType type_;
  std::optional<Shape> view_;
  bool borrowed_ = false;
  // The last flat index array split by view_indexer and its per-dim indices, and the last
  // unit run's first index (a read and a write of the same entries share them).
  std::optional<std::pair<uint32_t, std::vector<Atom>>> split_;
  std::optional<std::pair<uint32_t, Atom>> run_start_;
};

}  // namespace refjit
