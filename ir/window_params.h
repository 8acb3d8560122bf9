// Typed view of `move_windows`'s operands (primitives.def), which depend on the rank of the
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

}  // namespace refjit
