// Internal: JAX primitives that the parser reads by rewriting them into refjit's own
// (docs/ir.md "JAX primitives read as rewrites"). Each rewrite takes the eqn's operands and
// params and appends refjit eqns computing the same values, so no later layer needs a rule
// for them: `square` is integer_pow y=2, `split` is slices, JAX's general gather/scatter is
// refjit's one-axis gather/scatter on a flattened operand, and so on.
#pragma once

#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "ir/text_params.h"
#include "refjit/ir/builder.h"

namespace refjit::text {

struct RewriteArgs {
  JaxprBuilder& b;
  std::vector<Atom> ins;
  const Params& params;
  std::span<const Type> out_types;  // the binders' types as written
};

struct JaxRewrite {
  std::string_view name;
  std::vector<ParamSpec> params;          // params read (the rest must be listed in `ignored`)
  std::vector<std::string_view> ignored;  // params JAX prints that the rewrite does not need
  // Appends the rewrite; returns one atom per output. Throws TypeError for a form it does not
  // handle, naming what is missing.
  std::function<std::vector<Atom>(RewriteArgs&)> expand;
};

// The rewrite for the JAX primitive `name`, or nullptr.
const JaxRewrite* find_jax_rewrite(std::string_view name);

// reduce_max / reduce_min [axes] of a complex operand, in JAX's lexicographic order (real
// part, then imaginary part), with JAX's derivative: the tangents of the elements equal to the
// result, averaged.
std::vector<Atom> complex_extremum(RewriteArgs& a, bool max);

// The names of every rewrite.
std::vector<std::string_view> jax_rewrite_names();

}  // namespace refjit::text
