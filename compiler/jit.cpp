// Non-template helpers of refjit/jit.h.
#include "refjit/jit.h"

namespace refjit {

std::string signature_key(std::span<const Operand> flat) {
  std::string key;
  for (const Operand& x : flat) {
    key += type_of(x).str();
    key += ';';
  }
  return key;
}

bool all_concrete(std::span<const Operand> consts) {
  for (const Operand& c : consts) {
    bool concrete = std::visit([](const auto& v) { return v.is_concrete(); }, c);
    if (!concrete) return false;
  }
  return true;
}

}  // namespace refjit
