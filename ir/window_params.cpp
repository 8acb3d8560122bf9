#include "ir/window_params.h"

#include <fmt/format.h>

#include <utility>

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

ShiftAddParams ShiftAddParams::of(const Eqn& shift) {
  if (shift.prim != Prim::shift_add)
    throw Error(fmt::format("expected a shift_add eqn, got {}", prim_name(shift.prim)));
  ShiftAddParams p;
  p.write_sizes = &shift.params.get<IntList>("write_sizes");
  p.add_sizes = &shift.params.get<IntList>("add_sizes");
  p.offset = shift.params.get<int64_t>("offset");
  p.side_offsets = &shift.params.get<IntList>("side_offsets");
  p.side_lengths = &shift.params.get<IntList>("side_lengths");
  p.rank = p.write_sizes->size();
  if (p.add_sizes->size() != p.rank)
    throw Error(fmt::format("shift_add: write_sizes has {} entries but add_sizes has {}", p.rank,
                            p.add_sizes->size()));
  if (p.side_offsets->size() != p.side_lengths->size() ||
      p.side_offsets->size() != shift.outs.size())
    throw Error(fmt::format(
        "shift_add: side_offsets ({}) and side_lengths ({}) need one entry per result ({})",
        p.side_offsets->size(), p.side_lengths->size(), shift.outs.size()));
  if (shift.ins.size() != operand_count(p.rank))
    throw Error(fmt::format("shift_add: windows of rank {} need {} operands, got {}", p.rank,
                            operand_count(p.rank), shift.ins.size()));
  return p;
}

namespace {

int64_t product(const IntList& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

}  // namespace

int64_t ShiftAddParams::write_length() const { return product(*write_sizes); }
int64_t ShiftAddParams::add_length() const { return product(*add_sizes); }

bool contiguous_run(const IntList& sizes, const Shape& shape) {
  if (sizes.size() != shape.size()) return false;
  size_t k = 0;
  while (k < sizes.size() && sizes[k] == 1) ++k;
  for (size_t d = k + 1; d < sizes.size(); ++d)
    if (sizes[d] != shape[d]) return false;
  return true;
}

namespace {

constexpr std::pair<std::string_view, Prim> kCombines[] = {
    {"set", Prim::scatter},     {"add", Prim::scatter_add}, {"mul", Prim::scatter_mul},
    {"min", Prim::scatter_min}, {"max", Prim::scatter_max},
};

}  // namespace

int64_t indexed_dims(const Params& params) { return params.get_or<int64_t>("dims", 1); }

std::optional<Prim> scatter_of_combine(std::string_view combine) {
  for (const auto& [word, scatter] : kCombines)
    if (word == combine) return scatter;
  return std::nullopt;
}

std::string_view combine_of_scatter(Prim scatter) {
  for (const auto& [word, p] : kCombines)
    if (p == scatter) return word;
  throw Error(fmt::format("{} is not a scatter", prim_name(scatter)));
}

}  // namespace refjit
