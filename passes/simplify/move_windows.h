// Pass `move-windows`: a decision of the lowering, made as IR. A dynamic_update_slice whose
// update is a dynamic_slice, or a concatenate of pieces some of which are dynamic_slices,
// becomes `move_windows`, which writes each sliced window straight from the slice's source into
// the result: a row segment shifted inside an array (insert, delete, rotate by one) costs one
// memmove per piece, not three copies (into the slice's buffer, into the concatenation's, into
// the result). The slices and the concatenate need no buffers.
//
// A dynamic_slice piece is folded when it is read nowhere else and
//   - its window is one contiguous run of its row-major source (size 1 in every dim but the
//     last): the lowering moves it with memmove, overlap allowed;
//   - its source is a value, not a ref;
//   - its source is the updated array itself, or every eqn between the slice and the update
//     that reads the source is another slice (no in-place update of the source is pushed into
//     a copy by the longer life).
// At most one folded window may come from the updated array (buffer assignment then updates it
// in place, and the lowering moves that window first); the other pieces keep their values and
// are copied in whole. Whether the update happens in place is still buffer assignment's
// decision (passes/buffers/buffer_assignment.h).
// One named pattern, `update-of-slices`, applied by the pattern driver
// (passes/pattern_rewriter.h) in every body, after autodiff and the simplifications, just
// before buffer assignment (docs/pipeline.md).
#pragma once

#include <span>

#include "passes/pattern_rewriter.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// The patterns, for with_patterns (passes/pattern_rewriter.h).
std::span<const RewritePattern> move_windows_patterns();

}  // namespace refjit
