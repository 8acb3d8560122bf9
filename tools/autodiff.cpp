#include "tools/autodiff.h"

#include <fmt/format.h>

#include "passes/ad/linearize.h"
#include "passes/discharge.h"
#include "passes/dump.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"

namespace refjit::cli {

std::vector<int> gradient_positions(const Jaxpr& program,
                                    const std::optional<std::vector<int>>& wrt) {
  if (wrt) return *wrt;
  std::vector<int> positions;
  for (size_t i = 0; i < program.invars.size(); ++i) {
    const Type& t = program.type_of(program.invars[i]);
    if (!t.is_ref && is_float(t.dtype())) positions.push_back(static_cast<int>(i));
  }
  if (positions.empty())
    throw Error(
        "--grad: the program has no float, non-ref invar to differentiate (constvars "
        "are not differentiated; gradients with respect to refs go through the C++ "
        "API's vjp(...).with_refs(...))");
  return positions;
}

PipelineOptions pipeline_options(const Options& o, const Jaxpr& program) {
  PipelineOptions p;
  if (o.grad) {
    p.derivative = Derivative::grad;
    p.wrt = gradient_positions(program, o.wrt);
  } else if (o.jvp) {
    p.derivative = Derivative::jvp;
  }
  p.buffers.fail_on_copy = o.fail_on_copy;
  p.verify_each = p.verify_each || o.verify_each;
  p.compile.exact_math = p.compile.exact_math || o.exact_math;
  return p;
}

std::string program_view(std::string_view view, const Jaxpr& program) {
  if (view == "jvp") return dump_jvp(program);
  if (view == "linearize") {
    // CLI.md: the primal jaxpr, a blank line, then the linear jaxpr.
    Linearized l = linearize_jaxpr(program, float_inputs(program));
    return print_jaxpr(l.primal) + "\n\n" + print_jaxpr(l.linear);
  }
  if (view == "vjp") return dump_vjp(program);
  if (view == "discharged") return print_jaxpr(discharge_state(program));
  throw Error(fmt::format("--emit={} is not a view of the program", view));
}

}  // namespace refjit::cli
