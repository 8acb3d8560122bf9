// The public parsing entry points (refjit/ir/text.h): the parser of ir/ given the JAX
// importer's table, so text as JAX prints it reads as well as refjit's own.
#include "import/jax/rewrites.h"
#include "refjit/ir/text.h"

namespace refjit {

Jaxpr parse_jaxpr(std::string_view text, const std::string& filename) {
  return text::parse_text(text, filename, &text::jax_rewrites());
}

Jaxpr parse_jaxpr(std::string_view text, const std::string& filename, const NamedJaxprs& known) {
  return text::parse_text(text, filename, &text::jax_rewrites(), &known);
}

std::vector<std::string> readable_primitives() {
  return text::primitive_names(&text::jax_rewrites());
}

}  // namespace refjit
