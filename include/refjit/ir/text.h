// The jaxpr text format (docs/ir.md): printing and parsing.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// Prints in the syntax `jax.make_jaxpr` prints. Variables are renamed a, b, ..., z, ba, ...
// in order of first binding (shared by nested jaxprs), so print(parse(s)) == s.
std::string print_jaxpr(const Jaxpr& jaxpr);

// Parses jaxpr text (ours, or as JAX prints it). Throws ParseError with
// "FILE:LINE:COL: error: ..." naming the offending token. The result is verified. (The parser
// is ir/'s; these entry points hand it the JAX importer, import/jax/.)
Jaxpr parse_jaxpr(std::string_view text, const std::string& filename = "<input>");

// Jaxprs a text may name (`jaxpr=NAME`) without defining them in a `let`: programs made
// elsewhere, e.g. the Python package's refjit programs staged into a traced function. A
// `let` of the text itself with the same name is the one used.
using NamedJaxprs = std::map<std::string, JaxprPtr, std::less<>>;
Jaxpr parse_jaxpr(std::string_view text, const std::string& filename, const NamedJaxprs& known);

// The primitive names jaxpr text may use, sorted: refjit's own and the JAX primitives the
// parser reads as rewrites of them (docs/ir.md).
std::vector<std::string> readable_primitives();

}  // namespace refjit
