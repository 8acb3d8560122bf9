// Type rule of the host call (docs/primitives.md "Host calls").
#include "ir/type_rule_support.h"
#include "ir/type_rules.h"

namespace refjit {

namespace {

using type_rules::Checker;

// debug_callback[callback=N] x...: arrays of any type in, nothing out.
std::vector<Type> debug_callback_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::debug_callback, in, params);
  for (size_t k = 0; k < in.size(); ++k) (void)c.array(k);
  if (c.param<int64_t>("callback") < 0)
    c.fail("callback {} is negative; it numbers a host function", c.param<int64_t>("callback"));
  return {};
}

}  // namespace

void register_host_type_rules(TypeRuleTable& table) {
  table[static_cast<size_t>(Prim::debug_callback)] = debug_callback_rule;
}

}  // namespace refjit
