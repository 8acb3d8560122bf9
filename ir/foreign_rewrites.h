// Primitives of another system's jaxpr text that the parser reads by rewriting them into
// refjit's own: the parser's one door for an importer. The parser (ir/parser*.cpp) reads
// refjit's primitives itself and asks a ForeignRewrites table for any other name; the JAX
// importer (import/jax/rewrites.h) is the table every public entry point passes
// (parse_jaxpr, import/jax/parse.cpp). ir/ itself knows no JAX primitive.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/text_params.h"
#include "refjit/ir/builder.h"
#include "refjit/ir/text.h"

namespace refjit::text {

struct RewriteArgs {
  JaxprBuilder& b;
  std::vector<Atom> ins;
  const Params& params;
  std::span<const Type> out_types;  // the binders' types as written
};

// One foreign primitive: the params it reads and how it is written in refjit's primitives.
struct ForeignRewrite {
  std::string_view name;
  std::vector<ParamSpec> params;          // params read (the rest must be listed in `ignored`)
  std::vector<std::string_view> ignored;  // params the foreign printer adds that it does not need
  // Appends the rewrite; returns one atom per output. Throws TypeError for a form it does not
  // handle, naming what is missing.
  std::function<std::vector<Atom>(RewriteArgs&)> expand;
};

struct ForeignRewrites {
  // The rewrite for the primitive `name`, or nullptr.
  std::function<const ForeignRewrite*(std::string_view name)> find;
  // Every name `find` knows.
  std::function<std::vector<std::string_view>()> names;
  // reduce_max / reduce_min of a complex operand (refjit's reductions take real numbers), in
  // the foreign system's order of complex numbers; nullptr refuses such a reduction.
  std::function<std::vector<Atom>(RewriteArgs&, bool max)> complex_extremum;
};

// Parses jaxpr text whose primitives are refjit's and those `foreign` rewrites (nullptr:
// refjit's only), then verifies it: what parse_jaxpr does with the JAX importer's table.
// `known`: as parse_jaxpr's (nullptr: none).
Jaxpr parse_text(std::string_view source, const std::string& filename,
                 const ForeignRewrites* foreign, const NamedJaxprs* known = nullptr);

// refjit's primitive names and those of `foreign`, sorted (readable_primitives()).
std::vector<std::string> primitive_names(const ForeignRewrites* foreign);

}  // namespace refjit::text
