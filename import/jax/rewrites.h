// Internal: JAX primitives that the parser reads by rewriting them into refjit's own
// (docs/ir.md "JAX primitives read as rewrites"). Each rewrite takes the eqn's operands and
// params and appends refjit eqns computing the same values, so no later layer needs a rule
// for them: `square` is integer_pow y=2, `split` is slices, JAX's general gather/scatter is
// refjit's one-axis gather/scatter on a flattened operand, and so on. The parser reaches them
// through the ForeignRewrites table (ir/foreign_rewrites.h) that jax_rewrites() returns.
#pragma once

#include <string_view>
#include <vector>

#include "ir/foreign_rewrites.h"

namespace refjit::text {

using JaxRewrite = ForeignRewrite;

// The table the public parse_jaxpr passes to the parser (import/jax/parse.cpp).
const ForeignRewrites& jax_rewrites();

// The rewrite for the JAX primitive `name`, or nullptr.
const JaxRewrite* find_jax_rewrite(std::string_view name);

// reduce_max / reduce_min [axes] of a complex operand, in JAX's lexicographic order (real
// part, then imaginary part), with JAX's derivative: the tangents of the elements equal to the
// result, averaged.
std::vector<Atom> complex_extremum(RewriteArgs& a, bool max);

// The names of every rewrite.
std::vector<std::string_view> jax_rewrite_names();

}  // namespace refjit::text
