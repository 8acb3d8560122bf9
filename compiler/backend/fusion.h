// Elementwise fusion, decided on the Jaxpr (MLIR-free).
//
// A fusion group is a chain (or tree/diamond) of elementwise eqns that the lowering turns
// into ONE loop nest: every member is computed per element in registers and only the
// group's root is stored. An eqn joins the group of its consumers when
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
// never feeds a view, a view never roots a group or reads a value a swap took out of a ref
// (the cotangent shifts below read those), and a group whose root writes a buffer a view
// reads keeps no views (docs/backend.md). Members are
// evaluated at the root's position. With a buffer assignment, buffers are reused in place,
// so moving a member later is only safe while its operands' buffers are not overwritten in
// between: an eqn also joins only if no eqn between it and the root (outside the group)
// writes the buffer of one of its operands (an in-place update, a merged result, a ref
// write, a structured eqn's results or refs). Within the group, loads of an element
// precede the root's store of that element, so the root may overwrite an operand's buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/backend/row_loops.h"
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

// ---- queries the planners share
// A static slice, or a pad without interior padding: each element of its result is one
// element of its operand (or the padding value), at an index computed from its own.
bool is_view(const Jaxpr& j, const Eqn& e);
// Elementwise with operands of the result's shape or rank 0, a broadcast_in_dim (each
// element of its result is one load of its operand), or a view.
bool fusible(const Jaxpr& j, const Eqn& e);
// A reduction whose operand a group may compute element by element inside its loops, so
// that `sum(f(x))` keeps no array of f(x).
bool reduction_root(const Jaxpr& j, const Eqn& e);
// The buffer `a` lives in under `p`; -1 for a literal or a var without one.
int buffer_of(const JaxprBuffers& p, const Atom& a);

// Groups the top-level eqns of `jaxpr` (sub-jaxprs are planned when they are lowered).
// `buffers`: the buffer assignment of this jaxpr (nullptr: every value owns its buffer).
FusionPlan plan_fusion(const Jaxpr& jaxpr, const JaxprBuffers* buffers = nullptr);

}  // namespace refjit

namespace refjit {

// Cotangent shifts: the transpose of a row segment shifted inside a ref leaves
//   v, R[w1] <- R[w1], zeros      (zeros: a literal 0, or a broadcast_in_dim of one)
//   [v' = slice v[a:a+L]]          (optional static slice of the run, stride 1)
//   [v'' = reshape v']             (optional: the run's elements in the same order)
//   R[w2] += v'                    (same ref var)
// where w1 and w2 are contiguous row-major runs of R (M and L elements, dynamic starts
// clamped like dynamic_slice). Per element p of R the result is
//   R'[p] = (p in w1 ? 0 : R[p]) + (p in w2 ? R[p - s2 + s1 + a] : 0)
// (s1, s2 the flat clamped starts), which the lowering computes at the addupdate in one pass
// over w2 (backward when the run moves up, forward when it moves down, so every read of
// R[p - s2 + s1 + a] sees the old value) plus zeroing w1 minus w2, instead of copying the
// run out, writing zeros, and adding the copy back. Conditions: v (and v') is read only by
// the next eqn of the pattern and is not returned; no eqn between the swap and the
// addupdate reads or writes R's buffer or writes the buffer of the swap's start operands;
// none of the eqns are fused. The zero broadcast is folded too when the swap is its only
// reader.
// v may have other readers besides the one leading to the addupdate (the transpose of
// `x[1:] = x[:-1]` keeps the cotangent v[0:1] and shifts v[1:]): each must be a static slice of a
// run of v placed between the swap and the addupdate. Such a "side slice" is lowered at its own
// position as a copy straight out of R's window (R still holds the old values there: the swap
// is only carried out at the addupdate).
struct CotangentShift {
  int32_t swap = -1;                 // the folded swap eqn
  int32_t slice = -1;                // the folded static slice of its old value, or -1
  int32_t reshape = -1;              // the folded reshape of the added run, or -1
  int32_t zeros = -1;                // the folded broadcast of the zero literal, or -1
  Literal zero;                      // the value the swap writes
  int64_t offset = 0;                // the first element of the swapped-out run that is added (a)
  int64_t length = 0;                // elements added (L)
  std::vector<int32_t> side_slices;  // other static slices of v, read from R's window
};

struct CotangentShiftPlan {
  // folded_into[eqn] = the addupdate eqn that computes it, or -1.
  std::vector<int32_t> folded_into;
  // shift_of[eqn]: index into `shifts` for an addupdate lowered as a shift, or -1.
  std::vector<int32_t> shift_of;
  // side_of[eqn]: index into `shifts` for a side slice copied out of the shift's window, or -1.
  std::vector<int32_t> side_of;
  std::vector<CotangentShift> shifts;
};

// Whether indexer `idx` of a ref of shape `ref_shape` addresses one contiguous row-major run
// (no index arrays, unit strides, every dim before the first one of size > 1 has size 1 and
// every dim after it is taken whole); its element count goes to `size`.
bool contiguous_window(const Indexer& idx, const Shape& ref_shape, int64_t& size);

// Cotangent shifts of the top-level eqns of `jaxpr` (none without a buffer assignment).
CotangentShiftPlan plan_cotangent_shifts(const Jaxpr& jaxpr, const JaxprBuffers* buffers,
                                         const FusionPlan& fusion);

}  // namespace refjit

namespace refjit {

// Every lowering decision about the eqns of one jaxpr: which are fused, which are folded
// into a cotangent shift or an epilogue. The pipeline's `fusion` pass takes them once, for
// every jaxpr of the buffer plan; `refjit dump --emit=fusion` prints them and the lowering
// only follows them.
// Matrix-product epilogues: a float dot_general (or im2col_dot) whose result p is read only by
// one elementwise
// consumer (a fusion group with an elementwise root, or a single elementwise eqn lowered on
// its own), each read of p an operand of an elementwise member, is computed together with
// that consumer: the matrix kernel calls the consumer's loops on rows of the product as soon
// as they are final (runtime/kernels/gemm.h, Epilogue), so `relu(x @ w + b)` makes no
// separate pass over the product. The consumer then runs at the product's position, before
// the other eqns between the two (which keep theirs): it must not read their results or the
// buffers they write, they must not read or write the buffer it writes, and none of them may
// have a body. Its root's result must have p's type, and the root's buffer must be neither an
// operand buffer of the product (the kernel still reads them while the epilogue writes) nor
// the buffer of an operand of another shape (read by rows in any order). Where the product
// does not go to the kernel (small, integer, or code that must stand alone), the product and
// then the group are lowered at the product's position.
struct EpiloguePlan {
  std::vector<int32_t> root_of_dot;  // [dot_general eqn] the root of its epilogue, or -1
  std::vector<int32_t> dot_of_root;  // [root eqn] the dot_general it is the epilogue of, or -1
};

struct LoweringDecisions {
  FusionPlan fusion;
  CotangentShiftPlan shifts;
  EpiloguePlan epilogues;
  // The eqns computing eqn `root`'s epilogue (EpiloguePlan): its group, or the root alone.
  std::vector<size_t> epilogue_members(size_t root) const;
  // index_run[eqn]: a gather, scatter, get or swap indexing with a unit run
  // (passes/simplify/unit_run.h indexes_with_run), lowered as one window when the run's first index
  // is in range at run time.
  std::vector<bool> index_run;
  // Consecutive groups and reductions computed row by row in one loop (row_loops.h).
  RowLoopPlan row_loops;
};

// Whether eqn `i` is folded into no cotangent shift or epilogue (it may be in a fusion
// group).
bool folded_into_nothing(const LoweringDecisions& d, size_t i);
// Whether eqn `i` is lowered by its own rule: in no fusion group, and folded into nothing.
bool lowered_by_itself(const LoweringDecisions& d, size_t i);

// The decisions for `jaxpr`'s own eqns under `buffers` (nullptr: no buffer plan).
LoweringDecisions decide_lowering(const Jaxpr& jaxpr, const JaxprBuffers* buffers);

// The decisions for every jaxpr of `assignment`, indexed like assignment.jaxprs.
std::vector<LoweringDecisions> decide_lowering(const BufferAssignment& assignment);

// The text of `refjit dump --emit=fusion` (format in docs/backend.md): per jaxpr of the plan
// that has decisions, one line per fusion group, cotangent shift and epilogue, naming eqns
// by the values print_jaxpr gives them.
std::string print_lowering_decisions(const Jaxpr& top, const BufferAssignment& assignment,
                                     const std::vector<LoweringDecisions>& decisions);

}  // namespace refjit
