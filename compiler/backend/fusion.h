// Elementwise fusion, decided on the Jaxpr (MLIR-free).
//
// A fusion group is a chain (or tree/diamond) of elementwise eqns that the lowering turns
// into ONE loop nest: every member is computed per element in registers and only the
// group's root is stored. An eqn joins the group of its consumers when
//  - it is elementwise (has an elementwise lowering: unary/binary/compare/select_n/
//    convert_element_type/integer_pow/...), with every operand either of the result's
//    shape or rank 0 (a broadcast scalar),
//  - its result has the same shape as the group's root,
//  - every use of its result is an operand of an eqn of that one group, and the result
//    is not an output of the jaxpr.
// So no member but the root is ever observable outside the loop nest. Members are
// evaluated at the root's position. With a buffer assignment, buffers are reused in place,
// so moving a member later is only safe while its operands' buffers are not overwritten in
// between: an eqn also joins only if no eqn between it and the root (outside the group)
// writes the buffer of one of its operands (an in-place update, a merged result, a ref
// write, a structured eqn's results or refs). Within the group, loads of an element
// precede the root's store of that element, so the root may overwrite an operand's buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "passes/buffer_assignment.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

struct FusionPlan {
  // group_of[eqn index] = index into `groups`, or -1 for an eqn lowered on its own.
  std::vector<int32_t> group_of;
  // Each group's eqn indices in program order; the last one is the root. Only groups of
  // two or more eqns are listed.
  std::vector<std::vector<size_t>> groups;

  bool is_root(size_t eqn) const {
    return group_of.at(eqn) >= 0 && groups[group_of[eqn]].back() == eqn;
  }
};

// Whether `p` has an elementwise lowering rule (defined by the backend's rule table).
bool has_elementwise_lowering(Prim p);

// Groups the top-level eqns of `jaxpr` (sub-jaxprs are planned when they are lowered).
// `buffers`: the buffer assignment of this jaxpr (nullptr: every value owns its buffer).
FusionPlan plan_fusion(const Jaxpr& jaxpr, const JaxprBuffers* buffers = nullptr);

}  // namespace refjit
