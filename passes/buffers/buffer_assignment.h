// Buffer assignment: which buffer every value of a jaxpr (and of its scan, cond, jit and
// custom_vjp_call bodies) lives in, which updates happen in place, and every copy.
// MLIR-free; the native backend follows the plan mechanically (docs/buffers.md).
//
// Rules (DESIGN.md "Buffer assignment", docs/buffers.md):
//  - dynamic_update_slice / scatter / scatter-add write into operand 0's buffer when that
//    buffer is writable and dead afterwards; else operand 0 is copied once, then updated.
//  - Views (reshape, squeeze, expand_dims, copy, stop_gradient, freeze, a whole `get`) share
//    their source's buffer; liveness is per buffer.
//  - Scan carries live in one buffer for the whole loop; a carry-out not computed in that
//    buffer is copied into it at the end of the iteration (a whole-buffer copy in a loop).
//  - Reads (slice, dynamic_slice, gather, indexed get, swap's old value) get buffers of
//    their own, at the read's size.
//  - A whole get followed by a whole write of the same ref with no access in between is a
//    move: the value borrows the ref's buffer and the write is a no-op.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

struct BufferOptions {
  // donated[k]: the caller gives up top-level invar k, so it may be updated in place and
  // returned as an output. Missing entries are false.
  std::vector<bool> donated;
  // Throw an Error for any whole-buffer copy inside a loop, naming the eqn and the value.
  bool fail_on_copy = false;
};

enum class BufferOrigin : uint8_t {
  input,       // top level: invar `index` (the caller's array or ref)
  constant,    // top level: constvar `index`
  internal,    // created by eqn `index` of this jaxpr (a fresh allocation)
  ref,         // created by the new_ref at eqn `index` (a fresh allocation)
  carry,       // scan body: carry `index`, the same memory as the scan's result `index`
  scan_const,  // scan body: const `index`, the scan operand's buffer
  x_row,       // scan body: row t of xs `index` (a view)
  y_row,       // scan body: row t of the stacked output ys `index` (a view)
  operand,     // cond branch / call body: operand `index` of the eqn, the operand's buffer
  result,      // top level / cond branch: the home of outvar `index` (output array, cond
               // result); only a copy destination
  temp,        // a staging buffer for permuted scan carries
};

std::string_view origin_name(BufferOrigin o);

struct Buffer {
  ArrayType type;  // type of the value that created it (views may reshape it)
  int64_t bytes = 0;
  BufferOrigin origin = BufferOrigin::internal;
  int index = -1;         // see BufferOrigin
  bool writable = false;  // may be updated in place
  int outer = -1;         // the parent jaxpr's buffer with the same memory (sub-jaxprs)
  // This buffer is the home of outvar `home`: at top level the caller's output array `home`
  // (on a donated input: the output aliases that input), in a cond branch the cond's result
  // `home`, in a call body the call's result `home`. -1: none.
  int home = -1;
};

enum class CopyKind : uint8_t {
  whole,  // all of `src` into `dst`: old and new contents are both live
  read,   // a part of `src` (a slice, a row, a scalar) into `dst` of the read's size
  fill,   // a literal written into `dst` (src = -1)
};

struct Copy {
  CopyKind kind = CopyKind::whole;
  int src = -1;  // buffer ids of the jaxpr the copy is listed in
  int dst = -1;
  int64_t bytes = 0;
  bool in_loop = false;      // runs once per iteration of some enclosing scan
  int eqn = -1;              // the eqn it belongs to (-1: the end of the jaxpr)
  std::optional<Var> value;  // the value whose contents are copied
  std::string why;           // what forced it
};

enum class EqnAction : uint8_t {
  fresh,       // results computed into their buffers
  view,        // result 0 is a view of operand 0's buffer: no code
  in_place,    // result 0 (or the ref operand) is updated in its buffer: only the region
  move,        // new_ref takes operand 0's buffer
  no_op,       // a whole write of a value already in the ref's buffer
  structured,  // see sub_plans and in_place
};

struct EqnBuffers {
  EqnAction action = EqnAction::fresh;
  // Per result: the operand whose buffer it occupies (in place, a view, a reused scan carry
  // init, a call result that is its operand), -1 when it has a buffer of its own.
  std::vector<int> in_place;
  // Copies the lowering performs before the eqn (whole / fill), and the eqn's own reads.
  std::vector<Copy> copies;
  // Indices into BufferAssignment::jaxprs of the sub-jaxprs (scan body, cond branches in
  // order, jit / custom_vjp_call body).
  std::vector<int> sub_plans;
  // Buffers of operands handed over to a call body, which may update them in place (their
  // values are dead after the eqn): an eqn moved past this one must not read them.
  std::vector<int> handed_over;
};

struct JaxprBuffers {
  const Jaxpr* jaxpr = nullptr;
  int parent = -1;                 // index of the enclosing plan, -1 at top level
  int parent_eqn = -1;             // the eqn of the parent holding this sub-jaxpr
  std::string where;               // "top level", "body of eqn 2 (scan) of top level", ...
  bool in_loop = false;            // executed once per iteration of some scan
  std::vector<int> buffer_of_var;  // by Var id; -1 for vars without storage (dropped `_`)
  std::vector<Buffer> buffers;
  std::vector<EqnBuffers> eqns;
  // Performed after the last eqn, in this order: ys into their rows, carries staged through
  // temps, carry-outs into the carry buffers, outputs into their homes.
  std::vector<Copy> end_copies;
};

struct CopyStats {
  int whole_in_loop = 0, whole_outside = 0, read = 0, fill = 0;
  int64_t whole_in_loop_bytes = 0, whole_outside_bytes = 0, read_bytes = 0;
};

struct BufferAssignment {
  std::vector<JaxprBuffers> jaxprs;  // [0]: the top level; then sub-jaxprs, depth first

  const JaxprBuffers& top() const { return jaxprs.at(0); }
  // The (first) plan of `j`; throws Error if `j` is not part of the assigned program.
  const JaxprBuffers& of(const Jaxpr& j) const;
  // Every copy (eqn copies and end copies) of every plan.
  std::vector<const Copy*> all_copies() const;
  CopyStats stats() const;
};

// Assigns buffers. Throws Error when `options.fail_on_copy` is set and a whole-buffer copy
// would run inside a loop.
BufferAssignment assign_buffers(const Jaxpr& jaxpr, const BufferOptions& options = {});

// The readable plan for `refjit dump --emit=buffers` (format: docs/buffers.md). Value names
// are the ones print_jaxpr gives.
std::string print_buffer_plan(const Jaxpr& jaxpr, const BufferAssignment& plan);

}  // namespace refjit
