// Internal: the type-rule table, filled by one register function per primitive family.
#pragma once

#include <array>

#include "refjit/ir/primitive.h"

namespace refjit {

using TypeRuleTable = std::array<TypeRule, kNumPrims>;

// Fills one entry per primitive (ir/type_rules_*.cpp).
void register_type_rules(TypeRuleTable& table);

}  // namespace refjit
