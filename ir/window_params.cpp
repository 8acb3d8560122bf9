#include "ir/window_params.h"

#include <fmt/format.h>

#include "refjit/ir/error.h"

namespace refjit {

MoveWindowsParams MoveWindowsParams::of(const Eqn& move) {
  if (move.prim != Prim::move_windows)
    throw Error(fmt::format("expected a move_windows eqn, got {}", prim_name(move.prim)));
  MoveWindowsParams p;
  p.dimension = move.params.get<int64_t>("dimension");
  p.slice_sizes = &move.params.get<IntListList>("slice_sizes");
  if (p.slice_sizes->empty()) throw Error("move_windows: slice_sizes lists no window");
  p.rank = p.slice_sizes->front().size();
  for (size_t k = 0; k < p.num_windows(); ++k)
    if (p.sizes(k).size() != p.rank)
      throw Error(fmt::format("move_windows: window {} has {} sizes, window 0 has {}", k,
                              p.sizes(k).size(), p.rank));
  if (p.rank == 0) throw Error("move_windows: its windows have rank 0");
  if (p.dimension < 0 || p.dimension >= static_cast<int64_t>(p.rank))
    throw Error(
        fmt::format("move_windows: dimension {} is out of range for rank {}", p.dimension, p.rank));
  const size_t want = operand_count(p.rank, p.num_windows());
  if (move.ins.size() != want)
    throw Error(
        fmt::format("move_windows: {} windows of rank {} need {} operands (the array, its {} start "
                    "indices, then each window's source and start indices), got {}",
                    p.num_windows(), p.rank, want, p.rank, move.ins.size()));
  return p;
}

std::optional<size_t> MoveWindowsParams::window_of_source(size_t operand) const {
  if (operand < 1 + rank || (operand - 1 - rank) % (1 + rank) != 0) return std::nullopt;
  const size_t k = (operand - 1 - rank) / (1 + rank);
  return k < num_windows() ? std::optional(k) : std::nullopt;
}

bool MoveWindowsParams::contiguous_run(size_t k) const {
  const IntList& s = sizes(k);
  for (size_t d = 0; d + 1 < s.size(); ++d)
    if (s[d] != 1) return false;
  return true;
}

}  // namespace refjit
