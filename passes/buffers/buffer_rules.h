// How each primitive's results relate to its operands' buffers: the per-primitive table the
// buffer-assignment pass (passes/buffers/buffer_assignment.h) reads. One entry per primitive.
#pragma once

#include <cstdint>

#include "refjit/ir/primitive.h"

namespace refjit {

enum class BufferBehaviour : uint8_t {
  fresh,        // results are computed into buffers of their own (broadcast, dot, ...)
  elementwise,  // result[i] depends only on operands[i]: may overwrite a dead, same-typed operand
  view,         // result is operand 0's bytes reinterpreted (reshape, copy): shares its buffer
  read,         // result is a part of operand 0 (slice, gather): copied out at the read's size
  update,       // result is operand 0 with a region rewritten (dynamic_update_slice, scatter,
                // move_windows): in place when operand 0's buffer is writable and dead
                // afterwards
  ref_op,       // new_ref, get, swap, addupdate, freeze: decided by the ref rules
  structured,   // jit, scan, cond, custom_vjp_call: sub-jaxprs with their own plans
  fused,        // a fused chain (ir/fused_body.h): may overwrite a dead, same-typed operand that
                // its body reads only at the result's own index; its body gets no plan
};

// The table; every primitive has an entry.
BufferBehaviour buffer_behaviour(Prim p);

}  // namespace refjit
