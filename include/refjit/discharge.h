// discharge_state: a traced function's jaxpr with its refs turned into values, as JAX's
// state discharge (jax._src.state.discharge.discharge_state) does.
//
//   auto closed = refjit::make_jaxpr(f)(x_ref, y);     // reads and writes x_ref
//   auto pure = refjit::discharge_state(closed);       // no refs: x_ref's value in, its
//                                                      // final value out, after f's outputs
//
// Every ref becomes the value it holds: reads are slices, dynamic slices or gathers of it,
// writes build the next value with dynamic_update_slice or scatter, accumulations with
// scatter-add; refs handed to scan, while, cond and jit become carries, xs, operands and
// results of the discharged bodies. The result's invars are the original's with each Ref
// type replaced by its value type, and its outputs are the original's followed by the final
// value of every ref binder (captured refs first, then ref arguments, in order). A captured
// Ref becomes a captured Value: its contents when discharge_state is called.
//
// refjit itself compiles the program with its refs (that is how updates stay in place); the
// discharged form is for reading, testing and handing to tools that want pure programs.
// `refjit dump --emit=discharged FILE` prints the same for a jaxpr file.
#pragma once

#include "refjit/trace.h"

namespace refjit {

// Throws Error for a jaxpr that returns a ref, hands a ref to custom_vjp_call, or has a
// while condition that writes a ref.
ClosedJaxpr discharge_state(const ClosedJaxpr& closed);

}  // namespace refjit
