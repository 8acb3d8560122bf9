// The geometry of windowed reductions (reduce_window_sum/max/min,
// select_and_gather_add, select_and_scatter_add; docs/primitives.md "Windows"), shared by
// their type rules, the interpreter, the autodiff rules and the lowering.
//
// The operand is dilated (base_dilation - 1 holes between elements), then padded
// (padding[d] = (low, high), either may be negative); windows of window_dimensions elements,
// window_dilation apart, start every window_strides elements of that. A window position
// that falls on padding or a hole holds no operand element.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "refjit/ir/params.h"
#include "refjit/ir/type.h"

namespace refjit {

struct Window {
  IntList dims, strides, base_dilation, window_dilation;
  std::vector<std::pair<int64_t, int64_t>> padding;

  // From an eqn's params; base_dilation and window_dilation default to ones (select_and_
  // scatter_add has neither).
  static Window of(const Params& p);
  // The params of the window, as JAX prints them (only the dilations `with_dilations` says).
  Params params(bool with_dilations = true) const;

  int rank() const { return static_cast<int>(dims.size()); }
  // The result shape for an operand of shape `in`; throws TypeError naming `prim` when the
  // params do not fit the operand (a rank mismatch, a non-positive stride, ...).
  Shape out_shape(const Shape& in, std::string_view prim) const;
  // The operand coordinate along dim d of window offset w of output index o, or nullopt for
  // padding and dilation holes.
  std::optional<int64_t> source(int d, int64_t o, int64_t w, int64_t in_size) const;
  // The same window over one more leading dim of size 1 (a vmap batch dim).
  Window with_leading_dim() const;
};

}  // namespace refjit
