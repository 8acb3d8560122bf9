// Interpreter rule of the host call (runtime/host_callbacks.h).
#include "runtime/eval_rules.h"
#include "runtime/host_callbacks.h"

namespace refjit {

namespace {

std::vector<RtValue> eval_debug_callback(const EvalContext&, const Eqn& e,
                                         std::span<const RtValue> ins) {
  std::vector<Array> args;
  args.reserve(ins.size());
  for (size_t k = 0; k < ins.size(); ++k) args.push_back(array_in(e, ins, k).clone());
  call_host(e.params.get<int64_t>("callback"), std::move(args));
  return {};
}

}  // namespace

void register_host_eval_rules(EvalRuleTable& t) {
  t.set(Prim::debug_callback, &eval_debug_callback);
}

}  // namespace refjit
