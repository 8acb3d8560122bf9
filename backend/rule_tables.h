// Every primitive's rules, held against what primitives.def declares: a type rule, an
// interpreter rule, a lowering, and the JVP / transpose rules its AD column promises (and a
// linearize rule, passes/ad/linearize_rules.h, only beside a JVP rule). The
// tables are filled in their own layers; this is the one place that sees all of them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "refjit/ir/primitive.h"

namespace refjit {

// The rules one primitive has, by concern.
struct PrimRules {
  Prim prim;
  bool type = false, eval = false, jvp = false, transpose = false, lower = false;
  bool linearize = false;  // an entry in either of linearize's tables
};

PrimRules rules_of(Prim p);

// One line per missing or unexpected rule ("scatter-mul: declared no_ad but has a JVP
// rule"); empty when every table agrees with primitives.def.
std::vector<std::string> rule_table_problems();

// Throws Error listing rule_table_problems() if there are any. Runs the check once per
// process (later calls return at once).
void check_rule_tables();

}  // namespace refjit
