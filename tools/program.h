// Reading FILE (or standard input) and turning it into a verified Jaxpr.
#pragma once

#include <string>

#include "refjit/ir/error.h"
#include "refjit/ir/jaxpr.h"
#include "tools/cli_options.h"
#include "tools/timings.h"

namespace refjit::cli {

// FILE could not be read (missing, a directory, unreadable). Exit code 1.
class InputError : public Error {
 public:
  using Error::Error;
};

struct Source {
  std::string name;  // the path as given, or "<stdin>" for "-"; used in error locations
  std::string text;
};

// Reads a path, or standard input for "-". Throws InputError.
Source read_source(const std::string& file);

// Parses and verifies; throws ParseError ("FILE:LINE:COL: error: ...") or TypeError/RefError.
// With --primal-derivatives, custom_vjp functions whose rules the text lacks are marked as
// differentiable through their primal; when the command differentiates, a custom_jvp function
// whose rule the text lacks gets a warning on standard error.
Jaxpr load_program(const Source& source, const Options& options, StageTimings& timings);

// How messages and output name binder `v`: the name it had in the input text, or, for a
// binder without one, "constvar 0" / "invar 2".
std::string binder_name(const Jaxpr& jaxpr, Var v);

}  // namespace refjit::cli
