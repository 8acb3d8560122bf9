// The non-template part of refjit/checkpoint.h.
#include "refjit/checkpoint.h"

#include <fmt/format.h>

#include "refjit/ir/error.h"

namespace refjit {

std::string policy_name(RematPolicy p) {
  switch (p) {
    case RematPolicy::nothing_saveable: return "nothing_saveable";
    case RematPolicy::dots_saveable: return "dots_saveable";
    case RematPolicy::dots_with_no_batch_dims_saveable: return "dots_with_no_batch_dims_saveable";
    case RematPolicy::everything_saveable: return "everything_saveable";
  }
  throw Error("checkpoint: unknown remat policy");
}

namespace detail {

std::vector<Operand> checkpoint_call(const TracedFunction& fn, std::span<const Operand> args,
                                     const std::string& policy, const std::string& name) {
  if (!is_tracing()) return bind_jaxpr(name, fn, args);  // evaluated now: nothing to keep
  check_ref_aliasing(args, fn.consts, fmt::format("checkpointed function `{}`", name));
  std::vector<Operand> operands = fn.consts;
  operands.insert(operands.end(), args.begin(), args.end());
  auto body = std::make_shared<const Jaxpr>(consts_to_invars(*fn.jaxpr));
  return bind_prim(Prim::jit, operands,
                   Params{{"name", name}, {"jaxpr", JaxprPtr(body)}, {"policy", policy}});
}

}  // namespace detail

}  // namespace refjit
