// Pass `accumulate-products`: a decision of the lowering, made as IR. `addupdate r p` over the
// whole ref, where p = dot_general(x, y) is read by nothing else and has the ref's float type,
// becomes `dot_accumulate r x y` at the addupdate: the matrix kernel adds the product into the
// ref's buffer (C += A B), so p needs no buffer and no pass adds it. This is how a gradient
// ref sums the weight gradients of a scan's steps.
//
// Taken only when every eqn between the product and the addupdate is pure and reads neither x
// nor y: moving the product's reads of x and y later then keeps no buffer live longer than an
// eqn in between could need it (no in-place update of x or y is pushed into a copy, no ref
// write meets a live view of its ref). One named pattern, `addupdate-of-product`, applied by
// the pattern driver (passes/pattern_rewriter.h) in every body. It runs after autodiff and
// the simplifications, just before buffer assignment (docs/pipeline.md).
#pragma once

#include <span>

#include "passes/pattern_rewriter.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// The patterns, for with_patterns (passes/pattern_rewriter.h).
std::span<const RewritePattern> accumulate_products_patterns();

}  // namespace refjit
