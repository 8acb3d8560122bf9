// Pass `concat-windows`: a decision of the lowering, made as IR. A concatenate whose operands
// are static slices read by nothing else becomes `concat_windows`, which copies each slice's
// window straight from the slice's operand: every element is copied once instead of twice
// (into the slice's buffer, then into the concatenate's), and the slices need no buffers.
// This is how a convolution's im2col, when it is not multiplied implicitly, is built from the
// nine windows of its input.
//
// A slice is folded only when reading its operand later changes no buffer decision:
//   - the operand is a value, not a ref;
//   - every eqn between the slice and the concatenate that reads the operand is another slice
//     (no in-place update of the operand is pushed into a copy by the longer life).
// It runs after `move-windows` (passes/simplify/move_windows.h), which writes the pieces of a
// dynamic_update_slice's update straight into the result where it can.
// One named pattern, `concatenate-of-slices`, applied by the pattern driver
// (passes/pattern_rewriter.h) in every body, after autodiff and the simplifications, just
// before buffer assignment (docs/pipeline.md).
#pragma once

#include <span>

#include "passes/pattern_rewriter.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// The patterns, for with_patterns (passes/pattern_rewriter.h).
std::span<const RewritePattern> concat_windows_patterns();

}  // namespace refjit
