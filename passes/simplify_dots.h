// Algebraic rewrites of dot_general, for the shapes reverse mode makes (pipeline pass
// `simplify-dots`, docs/pipeline.md):
//  - transpose(dot_general(x, y)) that swaps the result's two free groups is
//    dot_general(y, x): no transpose pass over the product (the transpose rule of dot_general
//    emits one for every gradient with respect to its right operand);
//  - dot_general(broadcast_in_dim(s), y), s a scalar, is s * reduce_sum(y over the contracted
//    dims), broadcast to the result: the gradient of sum(x @ y) multiplies by a matrix of ones.
// The first applies only where the product has no other reader; what is left unread is
// removed by dce. Recurses into scan and jit bodies.
#pragma once

#include "refjit/ir/jaxpr.h"

namespace refjit {

// The rewritten program; `changes` (if given) receives the number of rewrites.
Jaxpr simplify_dots(const Jaxpr& jaxpr, int* changes = nullptr);

}  // namespace refjit
