// The text `refjit --help` and `refjit COMMAND --help` print (docs/cli.md has the details).
#include <fmt/format.h>

#include "tools/cli_options.h"

namespace refjit::cli {

std::string help_text(std::optional<Command> command) {
  if (!command) {
    return fmt::format(R"(refjit {} - a tracing JIT compiler for jaxprs with mutable array refs

Usage:
  refjit dump    [OPTIONS] FILE             parse, verify and print a program (or a stage of it)
  refjit run     [OPTIONS] FILE [VALUE...]  run a program on the given values
  refjit compile [OPTIONS] FILE -o OUT.o    write an object file (not implemented yet)
  refjit --help | refjit COMMAND --help | refjit --version

FILE is a jaxpr text file, or - for standard input. Options come before FILE;
everything after FILE is a VALUE, so `-3` is a number.

Exit codes: 0 success, 1 error in the program or the values, 2 usage error,
3 internal error. See docs/cli.md.
)",
                       REFJIT_VERSION_STRING);
  }
  switch (*command) {
    case Command::dump:
      return R"(Usage: refjit dump [OPTIONS] FILE

Parses and verifies the jaxpr in FILE (- for standard input) and prints it.

Options:
  --emit=STAGE    what to print: jaxpr (default), jvp, linearize, vjp, buffers,
                  mlir, llvm, asm
  --grad          work on the gradient program: d(scalar output)/d(arguments)
  --wrt=I,J,...   0-based invar positions to differentiate (with --grad);
                  default: every float, non-ref invar
  --fail-on-copy  fail if the buffer plan copies a whole buffer inside a loop
  --timings       print per-stage times on standard error
  -h, --help      print this help
)";
    case Command::run:
      return R"(Usage: refjit run [OPTIONS] FILE [VALUE...]

Runs the jaxpr in FILE (- for standard input) with one VALUE per constvar, then
one per invar. Everything after FILE is a VALUE.

Values: numbers (3, -2.5, 1e-3, nan, inf, -inf; an integer is fine for a float),
true/false, nested lists matching the shape exactly ([1, 2], [[1.0], [2.0]],
[] for an empty dimension). A Ref{T} binder takes its initial value, of type T.

Output: each program output, then `NAME = VALUE` with the final value of each
ref binder, then `grad NAME = VALUE` (--grad) or `tangent = VALUE` (--jvp).

Options:
  --grad          also print the gradient of the (scalar float) output
  --wrt=I,J,...   0-based invar positions to differentiate (with --grad);
                  default: every float, non-ref invar
  --jvp           forward mode: after the values, one tangent per invar
  --fail-on-copy  fail if the buffer plan copies a whole buffer inside a loop
  --interpret     run on the reference interpreter instead of native code
  --timings       print per-stage times on standard error
  -h, --help      print this help
)";
    case Command::compile:
      return R"(Usage: refjit compile [OPTIONS] FILE -o OUT.o [--header OUT.h] [--name SYMBOL]
                      [--cpu=host|generic|NAME] [--grad [--wrt=...] | --vjp [--accum=K,...] | --jvp]

Writes a relocatable object for one entry point. Not implemented yet: every
invocation other than --help fails with exit code 1.
)";
  }
  return {};
}

}  // namespace refjit::cli
