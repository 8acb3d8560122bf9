// Which buffer each top-level value of a jaxpr lives in, as the native backend sees it.
//
// The backend asks the plan, for every value it must materialise, whether the value has a
// designated home; values without one get a fresh buffer of their own. A buffer-assignment
// pass can later fill in more homes (e.g. an operand's buffer for an in-place update)
// without touching the lowering rules. MLIR-free.
#pragma once

#include <cstdint>
#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

struct BufferPlan {
  // output_slot[var id] = k: the value is computed straight into the caller's k-th output
  // array. -1 (or a var id past the end): no designated home, a buffer of its own.
  std::vector<int32_t> output_slot;
  // Values without a home live in one workspace buffer that the compiled function owns
  // and reuses across calls (each at a static offset; scopes stack-allocate, so loop-body
  // and branch buffers reuse the same bytes), instead of a malloc/free per buffer and call.
  bool use_workspace = true;
  // Whether this plan was computed for a jaxpr (an empty plan means "compute the default").
  bool empty() const { return output_slot.empty(); }

  int32_t output_slot_of(Var v) const { return v.id < output_slot.size() ? output_slot[v.id] : -1; }
};

// The default plan: every value owns its buffer, except that a value computed by a
// top-level eqn and returned as an output is written straight into its output array
// (first occurrence only, so a value returned twice is copied once).
BufferPlan default_buffer_plan(const Jaxpr& jaxpr);

}  // namespace refjit
