// Canonicalisation: local rewrites that undo the detours of how programs are written (JAX's
// printouts above all), so that the passes after it see one spelling of each computation.
// Each is a named pattern applied by the pattern driver (passes/pattern_rewriter.h); the
// list, in order, is in canonicalize.cpp and docs/pipeline.md "canonicalize":
//
//   - an eqn whose result is its operand is dropped: a slice of everything, a reduce_sum over
//     no axes, a mul by one or by a broadcast one (reverse mode's `cotangent * 1.0`), a pad
//     by nothing;
//   - a sum over size-1 dims is a reshape; a reshape of a reshape is one reshape;
//   - a sum of a broadcast scalar is the scalar times the count;
//   - a slice of a concatenate that falls within one operand is a slice of that operand (the
//     operand itself when it covers it): JAX builds the [n, 2] index matrix of `x.at[i, j]`
//     by concatenating columns, and reading it back column by column is the columns;
//   - a reshape that only drops or inserts the size-1 dims a broadcast_in_dim added is a
//     broadcast of the same operand (the columns above are [n, 1] broadcasts of [n] vectors);
//     a broadcast of a broadcast is one broadcast;
//   - an add / sub / mul of broadcast scalars and scalar literals is a broadcast of the scalar
//     result (`row * 1000` where row is a broadcast row index), so index vectors read as
//     "one iota plus scalars" (unit_run.h);
//   - a scan const computed from nothing (an iota, a broadcast literal) is computed inside the
//     body instead, where the body's index arithmetic can see it;
//   - an eqn that computes what an earlier one computed (same primitive, operands and params;
//     a pure eqn) reuses the earlier results: differentiation computes `sin x` once for the
//     value and again for the derivative of `cos x`.
// Before the patterns, a zero ref only added into by static windows, then frozen, becomes the
// sum of the added values padded to their windows (passes/simplify/window_sums.h, counted as
// "window-sums"): the transpose of a convolution's im2col. Applied in nested scan bodies, cond
// branches and jit bodies too; results nobody reads are removed.
#pragma once

#include <span>

#include "passes/pattern_rewriter.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// `stats`, when given, counts the rewrites made by pattern name.
Jaxpr canonicalize(const Jaxpr& jaxpr, RewriteStats* stats = nullptr);

// The patterns, in the order they are tried on an eqn of their primitive.
std::span<const RewritePattern> canonicalize_patterns();

}  // namespace refjit
