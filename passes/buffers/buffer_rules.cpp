#include "passes/buffers/buffer_rules.h"

#include <optional>

namespace refjit {
namespace {

using B = BufferBehaviour;
using Table = RuleTable<std::optional<B>>;  // optional: RuleTable tests entries for presence

Table make_table() {
  Table t;
  // Default for everything: a fresh buffer (registered first, refined below).
#define PRIM(id, name, ad, kind, effect) t.set(Prim::id, B::fresh);
#include "refjit/ir/primitives.def"
#undef PRIM
  // Elementwise primitives (primitives.def's elementwise kind) may overwrite a dead operand of
  // the result's type; so may the collectives that combine ranks element by element.
  for (int k = 0; k < kNumPrims; ++k)
    if (prim_info(static_cast<Prim>(k)).elementwise) t.set(static_cast<Prim>(k), B::elementwise);
  for (Prim p : {Prim::psum, Prim::psum_invariant, Prim::psum_start, Prim::broadcast_from})
    t.set(p, B::elementwise);
  // Values are immutable, so an identity is a second name for the same bytes.
  for (Prim p : {Prim::reshape, Prim::squeeze, Prim::expand_dims, Prim::copy, Prim::checkpoint_name,
                 Prim::stop_gradient, Prim::pvary, Prim::psum_wait})
    t.set(p, B::view);
  for (Prim p : {Prim::slice, Prim::dynamic_slice, Prim::gather, Prim::gather_run})
    t.set(p, B::read);
  for (Prim p : {Prim::dynamic_update_slice, Prim::move_windows, Prim::scatter, Prim::scatter_add,
                 Prim::scatter_mul, Prim::scatter_min, Prim::scatter_max, Prim::scatter_run})
    t.set(p, B::update);
  for (Prim p : {Prim::new_ref, Prim::get, Prim::swap, Prim::addupdate, Prim::dot_accumulate,
                 Prim::shift_add, Prim::get_flat_run, Prim::swap_flat_run, Prim::freeze})
    t.set(p, B::ref_op);
  for (Prim p :
       {Prim::jit, Prim::scan, Prim::cond, Prim::while_, Prim::custom_vjp_call, Prim::linear_solve})
    t.set(p, B::structured);
  t.set(Prim::fused, B::fused);
  return t;
}

}  // namespace

BufferBehaviour buffer_behaviour(Prim p) {
  static const Table table = make_table();
  const std::optional<B>* b = table.find(p);
  return b ? **b : B::fresh;
}

}  // namespace refjit
