// Algebraic rewrites of dot_general, for the shapes reverse mode makes (pipeline pass
// `simplify-dots`, docs/pipeline.md):
//  - transpose(dot_general(x, y)) that swaps the result's two free groups is
//    dot_general(y, x): no transpose pass over the product (the transpose rule of dot_general
//    emits one for every gradient with respect to its right operand);
//  - dot_general(broadcast_in_dim(s), y), s a scalar, is s * reduce_sum(y over the contracted
//    dims), broadcast to the result: the gradient of sum(x @ y) multiplies by a matrix of ones.
// Named patterns (transpose-of-dot, dot-of-scalar-broadcast) applied by the pattern driver
// (passes/pattern_rewriter.h), which also removes the products left unread. The first applies
// only where the product has no other reader. Recurses into scan, jit and cond bodies.
#pragma once

#include <span>

#include "passes/pattern_rewriter.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// The patterns, in the order they are tried, for with_patterns (passes/pattern_rewriter.h).
std::span<const RewritePattern> simplify_dots_patterns();

}  // namespace refjit
