// Lowering of the host call: the operands are handed to the runtime one by one
// (runtime/host_callbacks.h), which copies them, then calls the process's handler.

#include "backend/lowering.h"
#include "runtime/host_callbacks.h"

namespace refjit::backend {

namespace {

void lower_debug_callback(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "a host call (jax.debug.print, jax.debug.callback)");
  c.call_runtime("refjit_host_call_begin", {c.index(e.params.get<int64_t>("callback"))});
  for (const Atom& a : e.ins) {
    const DType dtype = c.type_of(a).array.dtype;
    // One declaration per element type: each takes its own unranked memref type.
    c.call_runtime(typed_runtime_symbol("refjit_host_call_arg", dtype),
                   {c.index(static_cast<int64_t>(dtype)), unranked_memref(c, c.buffer(a))});
  }
  c.call_runtime("refjit_host_call_end", {});
}

}  // namespace

void register_host_lowerings(LowerTable& t) { t.set(Prim::debug_callback, lower_debug_callback); }

}  // namespace refjit::backend
