// The non-template part of refjit/checkpoint.h.
#include "refjit/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refjit/ir/error.h"

namespace refjit {

std::string policy_name(RematPolicy p, const std::vector<std::string>& names) {
  switch (p) {
    case RematPolicy::save_only_these_names:
    case RematPolicy::save_any_names_but_these: {
      for (const std::string& n : names)
        if (n.empty() || n.find_first_of(", []=") != std::string::npos)
          throw Error(
              fmt::format("checkpoint: the name '{}' cannot be saved by name (names are "
                          "non-empty, without spaces, commas, brackets or '=')",
                          n));
      return fmt::format("{}:{}",
                         p == RematPolicy::save_only_these_names ? "save_only_these_names"
                                                                 : "save_any_names_but_these",
                         fmt::join(names, ","));
    }
    case RematPolicy::nothing_saveable: return "nothing_saveable";
    case RematPolicy::dots_saveable: return "dots_saveable";
    case RematPolicy::dots_with_no_batch_dims_saveable: return "dots_with_no_batch_dims_saveable";
    case RematPolicy::everything_saveable: return "everything_saveable";
  }
  throw Error("checkpoint: unknown remat policy");
}

Value checkpoint_name(const Value& x, const std::string& name) {
  if (name.empty() || name.find_first_of(", []=") != std::string::npos)
    throw Error(
        fmt::format("checkpoint_name: '{}' is not a usable name (non-empty, without "
                    "spaces, commas, brackets or '=')",
                    name));
  return bind_prim1(Prim::checkpoint_name, std::vector<Operand>{x}, Params{{"name", name}});
}

namespace flat {

std::vector<Operand> checkpoint(const TraceBody& f, const std::vector<Operand>& args,
                                const std::string& policy, const std::string& name) {
  TracedFunction fn = trace_function(f, types_of(args), name);
  if (!is_tracing()) return bind_jaxpr(name, fn, args);  // evaluated now: nothing to keep
  check_ref_aliasing(args, fn.consts, fmt::format("checkpointed function `{}`", name));
  std::vector<Operand> operands = fn.consts;
  operands.insert(operands.end(), args.begin(), args.end());
  auto body = std::make_shared<const Jaxpr>(consts_to_invars(*fn.jaxpr));
  return bind_prim(Prim::jit, operands,
                   Params{{"name", name}, {"jaxpr", JaxprPtr(body)}, {"policy", policy}});
}

}  // namespace flat

}  // namespace refjit
