// Internal: the transpose rule table, one entry per linear primitive, filled by the
// transpose_rules_<family>.cpp files.
#pragma once

#include <functional>
#include <vector>

#include "passes/accum.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

struct TransposeArgs {
  const Eqn& eqn;
  std::vector<Accum*> acc;      // per operand: its accumulator, nullptr if not linear
  std::vector<Atom> val;        // per operand: its value if not linear (mapped)
  std::vector<MaybeAtom> ct;    // per array output: the cotangent (nullopt = zero)
  std::vector<Accum*> out_acc;  // per output: its accumulator (new_ref reads the ref's)

  bool linear(size_t i) const { return acc.at(i) != nullptr; }
  bool wants(size_t i) const { return acc.at(i) && acc[i]->wanted(); }
  // Dynamic operands (indices) from position `first` on; they are never linear.
  std::vector<Atom> dyn(size_t first) const {
    return std::vector<Atom>(val.begin() + static_cast<long>(first), val.end());
  }
};

using TransposeRule = std::function<void(Emitter&, TransposeArgs&)>;
using TransposeRuleTable = RuleTable<TransposeRule>;

void register_elementwise_transpose_rules(TransposeRuleTable& t);
void register_shape_transpose_rules(TransposeRuleTable& t);
void register_ref_transpose_rules(TransposeRuleTable& t);
void register_control_transpose_rules(TransposeRuleTable& t);

const TransposeRuleTable& transpose_rules();

}  // namespace refjit
