// Elementwise fusion, decided on the Jaxpr (MLIR-free).
//
// A fusion group is a chain (or tree/diamond) of elementwise eqns that the pipeline's `fusion`
// pass writes as ONE `fused` eqn (primitives.def) at its root, its members in the body; native
// code computes every member per element in registers in one loop nest and stores only the
// root. An eqn joins the group of its consumers when
//  - it is elementwise (has an elementwise lowering: unary/binary/compare/select_n/
//    convert_element_type/integer_pow/...), with every operand either of the result's
//    shape or rank 0 (a broadcast scalar), or it is a broadcast_in_dim (read from its
//    operand at the mapped index, so `x - mean[:, None]` makes no array of the mean),
//  - its result has the same shape as the group's root,
//  - every use of its result is an operand of an eqn of that one group, and the result
//    is not an output of the jaxpr.
// So no member but the root is ever observable outside the loop nest. A cheap eqn (add, sub,
// mul, neg, max, min, a broadcast or a conversion) whose readers are all in groups of its
// shape is duplicated into each of them instead of being stored once and read back: JAX's
// softmax computes `x - max` once and reads it twice, and a pass over memory costs more than
// the subtraction. A reduction
// (reduce_sum/max/min) may also root a group: the members then have its operand's shape and
// the reduction's loops compute each operand element in registers (no array of f(x) for
// sum(f(x))). A static slice or a pad without interior padding joins as a view: it is
// evaluated where it is read, at the index its reader asks for (a view of a view composes the
// index maps), so it may have another shape when only views read it; an elementwise member
// never feeds a view, and a view never roots a group. (A fused eqn whose body reads an operand
// through a view, or ends in a reduction, never writes its result over that operand: the
// buffer rule, ir/fused_body.h.) Members are
// evaluated at the root's position. Planned under a buffer assignment of the unfused program,
// an eqn also joins only if no eqn between it and the root (outside the group) writes the
// buffer of one of its operands there (an in-place update, a merged result, a ref write, a
// structured eqn's results or refs): in the fused program that operand would live on to the
// root, and the update would need a copy. A write by an eqn fused away itself (a member of
// another group but its root, or a duplicated eqn) does not count: it does not happen. The
// fused program is assigned buffers again, with a
// fused eqn as one eqn, so the plan is a choice, not a condition of correctness.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/fused_body.h"
#include "passes/buffers/buffer_assignment.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

struct FusionPlan {
  // group_of[eqn index] = index into `groups`, kDuplicated for a cheap eqn computed again
  // inside each of its consumers' groups (listed in each), or -1 for an eqn lowered on its own.
  static constexpr int32_t kDuplicated = -2;
  std::vector<int32_t> group_of;
  // Each group's eqn indices in program order; the last one is the root. Only groups of
  // two or more eqns are listed.
  std::vector<std::vector<size_t>> groups;

  // Whether the eqn is lowered at its own position, by its own rule.
  bool lowered_alone(size_t eqn) const { return group_of.at(eqn) == -1; }

  bool is_root(size_t eqn) const {
    return group_of.at(eqn) >= 0 && groups[group_of[eqn]].back() == eqn;
  }
};

// Whether `p` has an elementwise lowering rule (defined by the backend's rule table).
bool has_elementwise_lowering(Prim p);

// ---- queries the planners share (and is_view_eqn, ir/fused_body.h: the views)
// Elementwise with operands of the result's shape or rank 0, a broadcast_in_dim (each
// element of its result is one load of its operand), or a view.
bool fusible(const Jaxpr& j, const Eqn& e);
// A reduction whose operand a group may compute element by element inside its loops, so
// that `sum(f(x))` keeps no array of f(x).
bool reduction_root(const Jaxpr& j, const Eqn& e);
// The buffer `a` lives in under `p`; -1 for a literal or a var without one.
int buffer_of(const JaxprBuffers& p, const Atom& a);
// Per eqn of `j`, the buffers whose contents it (over)writes under the assignment `p`.
std::vector<std::vector<int>> written_buffers(const Jaxpr& j, const JaxprBuffers& p);

// Groups the top-level eqns of `jaxpr` (fuse_elementwise does the sub-jaxprs).
// `buffers`: the buffer assignment of this jaxpr (nullptr: every value owns its buffer).
FusionPlan plan_fusion(const Jaxpr& jaxpr, const JaxprBuffers* buffers = nullptr);

// The pipeline's `fusion` pass: every group plan_fusion finds, in `program` and in every jaxpr
// its eqns hold, becomes one `fused` eqn at its root's position, whose body holds the members
// (a duplicated member is copied into each group that computes it). `assignment`, when given,
// is a buffer assignment of `program` that the groups are planned under (a member is not moved
// past an eqn that overwrites one of its operands there); the program is assigned buffers
// again afterwards, and a fused eqn is one eqn to that assignment, so the groups are a
// choice, never a condition of correctness. Without one, every value owns its buffer.
Jaxpr fuse_elementwise(const Jaxpr& program, const BufferAssignment* assignment);

// The same with an assignment made with `options` first (what the pipeline runs).
Jaxpr fuse_elementwise(const Jaxpr& program, const BufferOptions& options);

}  // namespace refjit
