#include "ir/type_rules.h"

namespace refjit {

void register_type_rules(TypeRuleTable& table) { (void)table; }

}  // namespace refjit
