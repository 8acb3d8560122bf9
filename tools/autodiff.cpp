#include "tools/autodiff.h"

#include <fmt/format.h>

#include "passes/dump.h"
#include "passes/jvp.h"
#include "passes/linearize.h"
#include "passes/vjp.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"

namespace refjit::cli {

Jaxpr forward_mode_program(const Jaxpr& program) {
  return jvp_jaxpr(program, std::vector<bool>(program.invars.size(), true));
}

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

Jaxpr gradient_program(const Jaxpr& program, const std::vector<int>& wrt) {
  return grad_jaxpr(program, wrt);
}

std::string autodiff_dump(EmitStage stage, const Jaxpr& program) {
  switch (stage) {
    case EmitStage::jvp: return dump_jvp(program);
    case EmitStage::linearize: {
      // CLI.md: the primal jaxpr, a blank line, then the linear jaxpr.
      Linearized l = linearize_jaxpr(program, float_inputs(program));
      return print_jaxpr(l.primal) + "\n\n" + print_jaxpr(l.linear);
    }
    case EmitStage::vjp: return dump_vjp(program);
    default: break;
  }
  throw Error(fmt::format("--emit={} is not an autodiff stage", emit_stage_name(stage)));
}

}  // namespace refjit::cli
