// Where every value of a jaxpr lives, as the native backend sees it. MLIR-free.
//
// By default the backend follows the buffer assignment (passes/buffers/buffer_assignment.h,
// docs/buffers.md): each value is computed into the buffer the assignment gives it, so
// in-place updates, views, ref moves and loop carries cost no copy, and the only copies
// are the ones the assignment lists (`refjit dump --emit=buffers` shows what runs).
// The `naive` plan gives every value a buffer of its own instead (updates copy their
// operand first, carries are copied back every iteration): the reference the in-place
// lowering is tested against.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "passes/buffers/buffer_assignment.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// What the lowering emitted, for tests: every copy of a whole memref (carry copies, copies
// before an update, whole ref reads and writes, ys into their rows, outputs) and every fill
// of a literal the plan lists, counted once per place in the code.
struct LoweringCounts {
  int copies_in_loops = 0;  // inside a scan body: run once per iteration
  int64_t bytes_in_loops = 0;
  int copies_outside = 0;
  int64_t bytes_outside = 0;
  int fused_groups = 0;
};

struct BufferPlan {
  // The buffer assignment the lowering follows (shared: plans are copied with the options).
  std::shared_ptr<const BufferAssignment> assignment;
  // Every value in its own buffer; the assignment is ignored. output_slot[var id] = k: the
  // value is computed straight into the caller's k-th output array (-1: a buffer of its own).
  bool naive = false;
  std::vector<int32_t> output_slot;
  // Fresh buffers live in one workspace that the compiled function owns and reuses across
  // calls (each at a static offset; scopes stack-allocate, so loop-body and branch buffers
  // reuse the same bytes), instead of a malloc/free per buffer and call.
  bool use_workspace = true;
  // Debug hook: when set, the lowering adds what it emitted to it.
  std::shared_ptr<LoweringCounts> counts;
  // jaxpr_signature() of the jaxpr the assignment was computed for: a plan applies to any
  // jaxpr with the same structure (e.g. the same text parsed twice), and no other.
  uint64_t signature = 0;

  // Whether this plan was computed for a jaxpr (an empty plan means "compute the default").
  bool empty() const { return !assignment && !naive; }
  int32_t output_slot_of(Var v) const { return v.id < output_slot.size() ? output_slot[v.id] : -1; }
};

// A hash of a jaxpr's structure (var types, eqn primitives and operands, sub-jaxprs).
uint64_t jaxpr_signature(const Jaxpr& jaxpr);

// The default plan: the buffer assignment of `jaxpr` with `options` (donated inputs are
// updated in place; the runtime still hands them in read-only, so a donated input returned
// as an output is copied into that output once, on entry, and updated there).
BufferPlan default_buffer_plan(const Jaxpr& jaxpr, const BufferOptions& options = {});

// Every value in its own buffer, except that a value computed by a top-level eqn and
// returned is written straight into its output array (first occurrence only).
BufferPlan naive_buffer_plan(const Jaxpr& jaxpr);

}  // namespace refjit
