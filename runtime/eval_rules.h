// Internal: the interpreter's eval rules, one per primitive, kept in a RuleTable filled by one
// register function per family (eval_elementwise.cpp, eval_shape.cpp, eval_reduce.cpp,
// eval_ref.cpp, eval_structured.cpp).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "refjit/ir/jaxpr.h"
#include "refjit/ir/primitive.h"
#include "runtime/interpreter.h"

namespace refjit {

// What a rule may ask of the interpreter: the declared types of the eqn's outputs and the
// evaluation of a sub-jaxpr (for jit, scan, cond, custom_vjp_call).
class EvalContext {
 public:
  explicit EvalContext(const Jaxpr& jaxpr) : jaxpr_(jaxpr) {}

  const Jaxpr& jaxpr() const { return jaxpr_; }
  // The declared type of output i of e (the jaxpr holds it).
  const Type& out_type(const Eqn& e, size_t i) const;
  // Evaluates a sub-jaxpr of e with one value per constvar then invar; refs are passed by
  // reference. `role` names the sub-jaxpr in errors ("scan body", "cond branch 1").
  std::vector<RtValue> call(const Eqn& e, const Jaxpr& sub, const std::vector<RtValue>& args,
                            std::string_view role) const;

 private:
  const Jaxpr& jaxpr_;
};

using EvalRule = std::vector<RtValue> (*)(const EvalContext& cx, const Eqn& e,
                                          std::span<const RtValue> ins);
using EvalRuleTable = RuleTable<EvalRule>;

void register_elementwise_eval_rules(EvalRuleTable& t);
void register_shape_eval_rules(EvalRuleTable& t);
void register_reduce_eval_rules(EvalRuleTable& t);
void register_window_eval_rules(EvalRuleTable& t);  // eval_window.cpp
void register_ref_eval_rules(EvalRuleTable& t);
void register_structured_eval_rules(EvalRuleTable& t);
void register_collective_eval_rules(EvalRuleTable& t);
void register_linalg_eval_rules(EvalRuleTable& t);  // eval_linalg.cpp
void register_host_eval_rules(EvalRuleTable& t);    // eval_host.cpp

// The complete table (built once).
const EvalRuleTable& eval_rules();

// ---- helpers shared by the rules ----

// Throws refjit::Error "<prim>: <message>".
[[noreturn]] void eval_fail(const Eqn& e, const std::string& message);
// Checks the operand count (exact, or at least `n` when `at_least`).
void expect_operands(const Eqn& e, std::span<const RtValue> ins, size_t n, bool at_least = false);
// Operand i as an array (error if it is a ref or missing).
const Array& array_in(const Eqn& e, std::span<const RtValue> ins, size_t i);
// Operand i as a live ref (error if it is an array; RefError E12 if frozen).
const RefBufferPtr& ref_in(const Eqn& e, std::span<const RtValue> ins, size_t i);
// Operand i as an integer scalar (i32/i64/bool array of rank 0).
int64_t int_scalar_in(const Eqn& e, std::span<const RtValue> ins, size_t i);
// The start indices (operands first, first + 1, ..., the last ones of `ins`) of a window of
// `size` in an array of `shape`, clamped into the array as XLA clamps dynamic starts.
std::vector<int64_t> clamped_starts(const Eqn& e, std::span<const RtValue> ins, size_t first,
                                    const Shape& shape, const Shape& size);
// The indices of a run (gather_run, scatter_run, get_flat_run, swap_flat_run): start + k for
// k < n, an array of start's integer dtype, each sum wrapping in that dtype as the add chain
// the run replaced wraps. `start` must be an integer scalar.
Array run_indices(const Eqn& e, const Array& start, int64_t n);
// Throws: operand i has a dtype the primitive does not accept.
[[noreturn]] void bad_dtype(const Eqn& e, size_t i, DType got, std::string_view allowed);

}  // namespace refjit
