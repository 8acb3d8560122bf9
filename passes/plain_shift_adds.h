// The plain eqns a shift_add stands for. The transpose writes the cotangent of a window moved
// inside an array as one shift_add (passes/ad/window_shift.h), a decision of the lowering made
// by the rule itself; the transforms have no rules of their own for it. A derived program that
// is transformed again (a second derivative, a vmap of a gradient, a gradient inside a loop
// whose program is differentiated) is read with each shift_add written out as what it does:
//
//   v, r[w1] <- r[w1], broadcast(zero)     (w1: write_sizes at i)
//   side_k = slice(reshape(v), side run k) (its results)
//   r[w2] += reshape(slice(reshape(v), offset run), add_sizes)   (w2: add_sizes at j)
//
// which the interpreter runs with the same numbers (runtime/eval_ref.cpp).
#pragma once

#include <optional>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// `j` with every shift_add, at any depth, written as plain eqns. Returns `j` itself when it
// holds none; else the copy, kept in `storage`.
const Jaxpr& plain_shift_adds(const Jaxpr& j, std::optional<Jaxpr>& storage);

}  // namespace refjit
