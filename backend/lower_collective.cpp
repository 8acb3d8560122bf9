// Lowering of the collectives: calls into the runtime (runtime/collectives.h), which runs
// them on the group the axis is bound to when the code runs. The array is handed over as an
// unranked memref (unranked_memref), as the matrix kernel takes its operands.

#include "backend/lowering.h"
#include "runtime/collectives.h"

namespace refjit::backend {

namespace {

Value axis_of(LowerCtx& c, const Eqn& e) {
  return c.index(axis_id(e.params.get<std::string>("axis_name")));
}

// A contiguous buffer holding `v`'s value for the call, and where the result goes afterwards:
// the result's own buffer when it is contiguous (the operand copied in unless it is already
// there), else a fresh one copied back by finish().
struct InPlace {
  Value call_buffer;
  Value result;
  ArrayType type;
  void finish(LowerCtx& c) const {
    if (call_buffer != result) c.copy(call_buffer, result, type);
  }
};

InPlace in_place(LowerCtx& c, const Eqn& e) {
  const ArrayType t = c.type_of(e.outs[0]).array;
  const Value result = c.result_buffer(e.outs[0]);
  const Value call = is_contiguous(result) ? result : c.alloc(t);
  if (!c.shares_buffer(e.ins[0], e.outs[0]) || call != result) c.copy(c.buffer(e.ins[0]), call, t);
  return {call, result, t};
}

void lower_psum(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "a collective");
  InPlace p = in_place(c, e);
  c.call_runtime(typed_runtime_symbol("refjit_psum", p.type.dtype),
                 {axis_of(c, e), c.index(static_cast<int64_t>(p.type.dtype)),
                  unranked_memref(c, p.call_buffer), c.index(p.type.num_elements())});
  p.finish(c);
}

// psum_start: the sum runs in the result's own buffer until psum_wait. A strided result buffer
// (which the buffer plan does not give a fresh or in-place result) is summed at once, in a
// contiguous copy, as psum does; psum_wait then finds nothing started there.
void lower_psum_start(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "a collective");
  InPlace p = in_place(c, e);
  const bool in_result = p.call_buffer == p.result;
  c.call_runtime(
      typed_runtime_symbol(in_result ? "refjit_psum_start" : "refjit_psum", p.type.dtype),
      {axis_of(c, e), c.index(static_cast<int64_t>(p.type.dtype)),
       unranked_memref(c, p.call_buffer), c.index(p.type.num_elements())});
  if (!in_result) p.finish(c);
}

// psum_wait: the started sum, complete in the same buffer.
void lower_psum_wait(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "a collective");
  const Value started = c.buffer(e.ins[0]);
  const ArrayType t = c.type_of(e.ins[0]).array;
  if (is_contiguous(started))
    c.call_runtime(typed_runtime_symbol("refjit_psum_wait", t.dtype),
                   {c.index(static_cast<int64_t>(t.dtype)), unranked_memref(c, started)});
  c.bind(e.outs[0], started);
}

void lower_broadcast_from(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "a collective");
  InPlace p = in_place(c, e);
  c.call_runtime(typed_runtime_symbol("refjit_broadcast_from", p.type.dtype),
                 {axis_of(c, e), c.index(static_cast<int64_t>(p.type.dtype)),
                  c.index(e.params.get<int64_t>("root")), unranked_memref(c, p.call_buffer),
                  c.index(p.type.num_elements())});
  p.finish(c);
}

void lower_all_gather(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "a collective");
  const ArrayType in_t = c.type_of(e.ins[0]).array;
  const ArrayType out_t = c.type_of(e.outs[0]).array;
  Value in = c.buffer(e.ins[0]);
  if (!is_contiguous(in)) {
    Value dense = c.alloc(in_t);
    c.copy(in, dense, in_t);
    in = dense;
  }
  const Value result = c.result_buffer(e.outs[0]);
  const Value out = is_contiguous(result) ? result : c.alloc(out_t);
  c.call_runtime(typed_runtime_symbol("refjit_all_gather", in_t.dtype),
                 {axis_of(c, e), c.index(static_cast<int64_t>(in_t.dtype)), c.index(out_t.shape[0]),
                  unranked_memref(c, in), unranked_memref(c, out), c.index(in_t.num_elements())});
  if (out != result) c.copy(out, result, out_t);
}

void lower_axis_index(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "a collective");
  const Value result = c.result_buffer(e.outs[0]);
  if (e.params.find("axis_size"))
    c.call_runtime(
        "refjit_axis_index_checked",
        {axis_of(c, e), c.index(e.params.get<int64_t>("axis_size")), unranked_memref(c, result)});
  else
    c.call_runtime("refjit_axis_index", {axis_of(c, e), unranked_memref(c, result)});
}

// pvary: the operand's value, under a second name (only its transpose communicates).
void lower_pvary(LowerCtx& c, const Eqn& e) { c.bind(e.outs[0], c.buffer(e.ins[0])); }

}  // namespace

void register_collective_lowerings(LowerTable& t) {
  t.set(Prim::psum, lower_psum);
  t.set(Prim::psum_invariant, lower_psum);
  t.set(Prim::psum_start, lower_psum_start);
  t.set(Prim::psum_wait, lower_psum_wait);
  t.set(Prim::pvary, lower_pvary);
  t.set(Prim::broadcast_from, lower_broadcast_from);
  t.set(Prim::all_gather, lower_all_gather);
  t.set(Prim::all_gather_invariant, lower_all_gather);
  t.set(Prim::axis_index, lower_axis_index);
}

}  // namespace refjit::backend
