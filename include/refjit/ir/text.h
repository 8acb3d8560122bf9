// The jaxpr text format (docs/ir.md): printing and parsing.
#pragma once

#include <string>
#include <string_view>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// Prints in the syntax `jax.make_jaxpr` prints. Variables are renamed a, b, ..., z, ba, ...
// in order of first binding (shared by nested jaxprs), so print(parse(s)) == s.
std::string print_jaxpr(const Jaxpr& jaxpr);

// Parses jaxpr text (ours, or as JAX prints it). Throws ParseError with
// "FILE:LINE:COL: error: ..." naming the offending token. The result is verified.
Jaxpr parse_jaxpr(std::string_view text, const std::string& filename = "<input>");

}  // namespace refjit
