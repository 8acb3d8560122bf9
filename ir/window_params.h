// Typed views of the window primitives whose operands depend on a rank (primitives.def).
//
// `move_windows` takes, by the rank of the
// array it updates: the array x, one start index per dim of x, then for each window its source
// and one start index per dim. Every window has x's rank; `slice_sizes` holds one list of
// sizes per window, so the rank and the window count come from the params. `of` checks that
// the operands fit that layout, so a malformed eqn is an error naming it, never an
// out-of-range index later. A view points into the eqn's params: it must not outlive the eqn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "refjit/ir/jaxpr.h"

namespace refjit {

struct MoveWindowsParams {
  int64_t dimension = 0;                     // the axis the windows are laid along
  const IntListList* slice_sizes = nullptr;  // per window, its size in each dim
  size_t rank = 0;

  static MoveWindowsParams of(const Eqn& move);
  // How many operands a move_windows of `windows` windows of rank `rank` takes.
  static size_t operand_count(size_t rank, size_t windows) {
    return 1 + rank + windows * (1 + rank);
  }

  size_t num_windows() const { return slice_sizes->size(); }
  const IntList& sizes(size_t k) const { return (*slice_sizes)[k]; }
  std::span<const Atom> starts(const Eqn& move) const {
    return std::span(move.ins).subspan(1, rank);
  }
  size_t source_operand(size_t k) const { return 1 + rank + k * (1 + rank); }
  const Atom& source(const Eqn& move, size_t k) const { return move.ins[source_operand(k)]; }
  std::span<const Atom> window_starts(const Eqn& move, size_t k) const {
    return std::span(move.ins).subspan(source_operand(k) + 1, rank);
  }
  // The window whose source operand `operand` is, if it is one.
  std::optional<size_t> window_of_source(size_t operand) const;
  // Whether window k is one contiguous run of its row-major source (size 1 in every dim but
  // the last), which one memmove copies even when it overlaps the destination.
  bool contiguous_run(size_t k) const;
};

// `shift_add r zero i... j...`: the ref, the value written over its first window, then the
// start indices of the window written (w1) and of the window added to (w2), one per dim of the
// ref each. Both windows are contiguous row-major runs (the type rule checks it).
struct ShiftAddParams {
  const IntList* write_sizes = nullptr;   // w1's size in each dim
  const IntList* add_sizes = nullptr;     // w2's size in each dim
  int64_t offset = 0;                     // the first element of w1's run that is added
  const IntList* side_offsets = nullptr;  // per result: where its run starts in w1's run
  const IntList* side_lengths = nullptr;  // per result: its element count
  size_t rank = 0;

  static ShiftAddParams of(const Eqn& shift);
  static size_t operand_count(size_t rank) { return 2 + 2 * rank; }

  std::span<const Atom> write_starts(const Eqn& shift) const {
    return std::span(shift.ins).subspan(2, rank);
  }
  std::span<const Atom> add_starts(const Eqn& shift) const {
    return std::span(shift.ins).subspan(2 + rank, rank);
  }
  // Element counts of the two runs.
  int64_t write_length() const;
  int64_t add_length() const;
};

// scatter_run's `combine` param names the scatter whose combining it does: `set` (scatter),
// `add` (scatter-add), `mul`, `min`, `max`; nullopt for any other word.
std::optional<Prim> scatter_of_combine(std::string_view combine);
// The word for `scatter` (one of the five scatter primitives).
std::string_view combine_of_scatter(Prim scatter);

// The `dims` param of gather and the scatters (absent: 1): how many dims, from `axis` on, the
// indices address, each index naming an element of those dims' row-major flattening.
int64_t indexed_dims(const Params& params);

// Whether a window of `sizes` in an array of `shape` is one contiguous row-major run: size 1 in
// every dim before the first one of size > 1, the whole dim in every dim after it.
bool contiguous_run(const IntList& sizes, const Shape& shape);

}  // namespace refjit
