// Internal: the type-rule table, filled by one register function per primitive family.
#pragma once

#include <array>

#include "refjit/ir/primitive.h"

namespace refjit {

using TypeRuleTable = std::array<TypeRule, kNumPrims>;

// Fills one entry per primitive (ir/type_rules_*.cpp).
void register_type_rules(TypeRuleTable& table);

// One per family; each sets the entries of the primitives it defines.
void register_elementwise_type_rules(TypeRuleTable& table);  // type_rules_elementwise.cpp
void register_shape_type_rules(TypeRuleTable& table);        // type_rules_shape.cpp
void register_reduce_type_rules(TypeRuleTable& table);       // type_rules_reduce.cpp
void register_window_type_rules(TypeRuleTable& table);       // type_rules_window.cpp
void register_ref_type_rules(TypeRuleTable& table);          // type_rules_ref.cpp
void register_structured_type_rules(TypeRuleTable& table);   // type_rules_structured.cpp
void register_collective_type_rules(TypeRuleTable& table);   // type_rules_collective.cpp
void register_linalg_type_rules(TypeRuleTable& table);       // type_rules_linalg.cpp
void register_host_type_rules(TypeRuleTable& table);         // type_rules_host.cpp

}  // namespace refjit
