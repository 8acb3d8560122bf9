// Internal: the transpose rule table, one entry per linear primitive, filled by the
// transpose_rules_<family>.cpp files.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "passes/ad/accum.h"
#include "passes/ad/transpose.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// What a rule may ask of the linear jaxpr beyond its own eqn: how an operand was made
// (transpose_window_shift looks at the update of a dynamic_update_slice).
class LinearProgram {
 public:
  // The eqn of the linear jaxpr defining `a`, or nullptr (an input, a literal).
  virtual const Eqn* definition(const Atom& a) const = 0;
  // `a`'s accumulator if `a` is linear, else nullptr.
  virtual Accum* accumulator(const Atom& a) = 0;
  // A non-linear atom of the linear jaxpr as the transposed program holds it.
  virtual Atom value(const Atom& a) const = 0;
  // The linear jaxpr's eqns, in order (definition() and a rule's own eqn point into them).
  virtual std::span<const Eqn> eqns() const = 0;

 protected:
  ~LinearProgram() = default;
};

struct TransposeArgs {
  const Eqn& eqn;
  std::vector<Accum*> acc;           // per operand: its accumulator, nullptr if not linear
  std::vector<Atom> val;             // per operand: its value if not linear (mapped)
  std::vector<MaybeAtom> ct;         // per array output: the cotangent (nullopt = zero)
  std::vector<Accum*> out_acc;       // per output: its accumulator (new_ref reads the ref's)
  LinearProgram* program = nullptr;  // the linear jaxpr the eqn belongs to

  bool linear(size_t i) const { return acc.at(i) != nullptr; }
  bool wants(size_t i) const { return acc.at(i) && acc[i]->wanted(); }
  // The first output's cotangent, when it is known to be nonzero.
  const Atom& ct0() const { return *ct.at(0); }
  // Dynamic operands (indices) from position `first` on; they are never linear.
  std::vector<Atom> dyn(size_t first) const {
    return std::vector<Atom>(val.begin() + static_cast<long>(first), val.end());
  }
};

// The indexer of x[..., idx, ...] on `axis` (gather's and scatter's access), whole dims
// before it.
Indexer axis_indexer(const ArrayType& x, int64_t axis);

using TransposeRule = std::function<void(Emitter&, TransposeArgs&)>;
using TransposeRuleTable = RuleTable<TransposeRule>;

void register_elementwise_transpose_rules(TransposeRuleTable& t);
void register_shape_transpose_rules(TransposeRuleTable& t);
void register_window_transpose_rules(TransposeRuleTable& t);  // transpose_rules_window.cpp
void register_ref_transpose_rules(TransposeRuleTable& t);
void register_control_transpose_rules(TransposeRuleTable& t);
void register_collective_transpose_rules(TransposeRuleTable& t);
void register_linalg_transpose_rules(TransposeRuleTable& t);  // transpose_rules_linalg.cpp

// Primitives whose rules receive their outputs' accumulators unfrozen (args.ct is all
// nullopt, out_acc is set): they may hand an output's buffer to an operand
// (Accum::alias_of) or pass it into a loop by reference instead of reading it densely.
using LazyCotangentTable = RuleTable<bool>;
// scan (passes/ad/transpose_rules_scan.cpp).
void register_scan_transpose_rules(TransposeRuleTable& t, LazyCotangentTable& lazy);
// dynamic_update_slice, reshape/squeeze/expand_dims, scatter and scatter-add
// (passes/ad/transpose_rules_scatter.cpp).
void register_aliasing_transpose_rules(TransposeRuleTable& t, LazyCotangentTable& lazy);

const TransposeRuleTable& transpose_rules();
const LazyCotangentTable& lazy_cotangent_rules();

// transpose_jaxpr for a loop body whose cotangents live in refs across iterations: output k
// with held[k] >= 0 has no cotangent argument; instead, on entry, its cotangent is held in
// the ref accumulator of linear input held[k] (whose kind must be `ref`), and on exit that
// ref holds the cotangent of that input. Inside, the output's accumulator is the ref itself,
// so sparse contributions stay sparse (Accum::held_in, Accum::alias_of).
Jaxpr transpose_jaxpr_holding(const Jaxpr& linear, int num_nonlinear,
                              const std::vector<AccumKind>& kinds, const std::vector<int>& held);

}  // namespace refjit
