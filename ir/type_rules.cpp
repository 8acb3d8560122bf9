#include "ir/type_rules.h"

namespace refjit {

void register_type_rules(TypeRuleTable& table) {
  register_elementwise_type_rules(table);
  register_shape_type_rules(table);
  register_reduce_type_rules(table);
  register_window_type_rules(table);
  register_ref_type_rules(table);
  register_structured_type_rules(table);
  register_collective_type_rules(table);
  register_linalg_type_rules(table);
  register_host_type_rules(table);
}

}  // namespace refjit
