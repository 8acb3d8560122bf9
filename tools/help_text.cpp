// The text `refjit --help` and `refjit COMMAND --help` print (docs/cli.md has the details).
#include <fmt/format.h>

#include "driver/pipeline.h"
#include "tools/cli_options.h"

namespace refjit::cli {

std::string help_text(std::optional<Command> command) {
  if (!command) {
    return fmt::format(R"(refjit {} - a tracing JIT compiler for jaxprs with mutable array refs

Usage:
  refjit dump    [OPTIONS] FILE             parse, verify and print a program (or a stage of it)
  refjit run     [OPTIONS] FILE [VALUE...]  run a program on the given values
  refjit bench   [OPTIONS] FILE [VALUE...]  time a program's calls (random VALUEs by default)
  refjit compile [OPTIONS] FILE -o OUT.o    write an object file and a C header
  refjit --help | refjit COMMAND --help | refjit --version

FILE is a jaxpr text file, or - for standard input. Options come before FILE;
everything after FILE is a VALUE, so `-3` is a number.

Exit codes: 0 success, 1 error in the program or the values, 2 usage error,
3 internal error. See docs/cli.md.
)",
                       REFJIT_VERSION_STRING);
  }
  switch (*command) {
    case Command::dump: {
      std::string passes;
      for (const PassInfo& p : pipeline_passes())
        passes += fmt::format("  {:<20} {}\n", p.name, p.summary);
      return fmt::format(R"(Usage: refjit dump [OPTIONS] FILE

Parses and verifies the jaxpr in FILE (- for standard input) and prints it, or
the program after one pass of the compilation pipeline.

Options:
  --emit=STAGE       what to print: jaxpr (default: the program as read), the
                     autodiff views jvp, linearize and vjp, the program with its
                     refs discharged into values (discharged), or the program
                     after one of the passes below
  --print-after-all  the program after every pass, each headed `# after NAME`
  --verify-each      verify the program after every pass (on in debug builds)
  --grad             work on the gradient program: d(scalar output)/d(arguments)
  --wrt=I,J,...      0-based invar positions to differentiate (with --grad);
                     default: every float, non-ref invar
  --primal-derivatives
                     differentiate a custom_vjp whose rules JAX's text names
                     but leaves out through its primal (refused otherwise)
  --fail-on-copy     fail if the buffer plan copies a whole buffer inside a loop
  --exact-math       call libm for every f32 transcendental function instead of
                     the vectorised approximations (docs/backend.md)
  --timings          print per-stage times on standard error
  -h, --help         print this help

The pipeline's passes, in order (docs/pipeline.md):
{})",
                         passes);
    }
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
  --primal-derivatives
                  differentiate a custom_vjp whose rules JAX's text names but
                  leaves out through its primal (refused otherwise)
  --fail-on-copy  fail if the buffer plan copies a whole buffer inside a loop
  --interpret     run on the reference interpreter instead of native code
  --exact-math    call libm for every f32 transcendental function instead of
                  the vectorised approximations (docs/backend.md)
  --print-after-all
                  print the program after every pass on standard error, each
                  headed `# after NAME` (constvars' values are known here)
  --verify-each   verify the program after every pass (on in debug builds)
  --timings       print per-stage times on standard error
  -h, --help      print this help
)";
    case Command::bench:
      return R"(Usage: refjit bench [OPTIONS] FILE [VALUE...]

Compiles the jaxpr in FILE (- for standard input) once, calls it once to warm
up, then times --runs calls. VALUEs are given as for `refjit run`, one per
constvar then invar (then tangent, with --jvp); the ones not given are seeded
random data of the binder's type: floats uniform in [-1, 1), integers in
[0, 8). Ref arguments keep their updates from call to call.

Output: the file, mode and tier, then `compile MS ms` (every pass from the
program as read to machine code), `median MS ms` and `min MS ms` per call;
with --json one JSON object with the same numbers instead.

Options:
  --runs=N        timed calls (default 20)
  --min-time=MS   more calls, until they took MS milliseconds in all (default
                  0); "runs" in the output counts them
  --background-load=N
                  keep N cores busy with spinning child processes while the
                  calls are timed (a machine shared with other work)
  --tier=T        fast (LLVM -O0, jit's first tier) or optimized (-O3, the
                  default)
  --seed=S        seed of the random values (default 0)
  --json          print {"file", "mode", "tier", "runs", "compile_ms",
                  "median_ms", "min_ms"} as one JSON object (and
                  "background_load" with --background-load)
  --grad          time the gradient program (output and gradient)
  --wrt=I,J,...   0-based invar positions to differentiate (with --grad)
  --jvp           time the forward-mode program (outputs and tangents)
  --primal-derivatives
                  as for `refjit run`
  --fail-on-copy  fail if the buffer plan copies a whole buffer inside a loop
  --interpret     time the reference interpreter instead of native code
  --exact-math    libm for every f32 transcendental function
  --print-after-all, --verify-each, --timings
                  as for `refjit run`
  -h, --help      print this help
)";
    case Command::compile:
      return R"(Usage: refjit compile [OPTIONS] FILE -o OUT.o [--header OUT.h] [--name SYMBOL]
                      [--cpu=host|generic|NAME] [--grad [--wrt=...] | --vjp [--accum=K,...] | --jvp]
                      [--exact-math]

Compiles the jaxpr in FILE (- for standard input) ahead of time into a
relocatable object with plain C entry points that needs only libc and libm
(link with `cc main.c OUT.o -lm`). Options may come before or after FILE.

Options:
  -o OUT.o              the object file to write (required)
  --header OUT.h        also write a C header declaring the entry points
  --name SYMBOL         the entry point's C name (default: FILE's stem)
  --cpu=CPU             host (default: this machine's CPU and features), generic
                        (any CPU of the architecture) or an LLVM CPU name
  --grad                compile the gradient program: SYMBOL returns the scalar
                        output, then d(output)/d(argument) per --wrt position
  --wrt=I,J,...         0-based invar positions to differentiate (with --grad);
                        default: every float, non-ref invar
  --vjp                 two entry points: SYMBOL_fwd (outputs + residual struct)
                        and SYMBOL_bwd (residuals + output cotangents -> gradients)
  --accum=K,K,...       with --vjp, one accumulator per invar: value (an output
                        pointer), ref (an in/out pointer added into), dontwant;
                        default: value for float non-ref invars, else dontwant
  --jvp                 forward mode: SYMBOL takes one tangent per float invar and
                        returns the outputs and their tangents
  --primal-derivatives  differentiate a custom_vjp whose rules JAX's text names
                        but leaves out through its primal (refused otherwise)
  --exact-math          call libm for every f32 transcendental function instead of
                        the vectorised approximations (docs/backend.md)
  -h, --help            print this help

Entry points return 0 on success; see docs/aot.md for the header's conventions.
)";
  }
  return {};
}

}  // namespace refjit::cli
