#include "api/execute.h"

namespace refjit::detail {

namespace {

Executor& executor() {
  static Executor e;
  return e;
}

}  // namespace

std::vector<RtValue> execute(const Jaxpr& jaxpr, const std::vector<RtValue>& consts_then_args) {
  if (const Executor& e = executor()) return e(jaxpr, consts_then_args);
  return interpret(jaxpr, consts_then_args);
}

void set_executor(Executor e) { executor() = std::move(e); }

bool has_executor() { return static_cast<bool>(executor()); }

}  // namespace refjit::detail
