// Transpose rules of the ref primitives (REFS.md 2.3). A ref's cotangent is a ref holding,
// at each point of the backward pass, the cotangent of the ref's value at the matching point
// of the forward pass: get <-> addupdate, swap <-> swap, new_ref <-> freeze.
#include <fmt/format.h>

#include "passes/transpose_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

Accum& ref_accum(const TransposeArgs& a) {
  if (!a.acc[0])
    throw Error(
        fmt::format("transpose: `{}` on a ref that is not linear inside a linear "
                    "jaxpr (primal ref effects belong to the primal jaxpr)",
                    prim_name(a.eqn.prim)));
  return *a.acc[0];
}

}  // namespace

void register_ref_transpose_rules(TransposeRuleTable& t) {
  // get: the read value's cotangent flows into the ref's cotangent at the same index.
  t.set(Prim::get, [](Emitter& e, TransposeArgs& a) {
    if (!a.ct[0]) return;
    const Indexer& ix = a.eqn.params.get<Indexer>("indexer");
    if (ix.is_whole())
      ref_accum(a).add(e, *a.ct[0]);
    else
      ref_accum(a).add_at(e, *a.ct[0], ix, a.dyn(1));
  });
  // swap: the written value's cotangent is the slice's cotangent, which is replaced by the
  // old value's cotangent (zeros if the old value was unused).
  t.set(Prim::swap, [](Emitter& e, TransposeArgs& a) {
    Accum& r = ref_accum(a);
    if (!r.has_buffer() && !a.ct[0]) return;
    const Indexer& ix = a.eqn.params.get<Indexer>("indexer");
    const ArrayType vt = a.acc[1] ? a.acc[1]->type() : e.array_type_of(a.val[1]);
    Atom g = a.ct[0] ? *a.ct[0] : e.zeros(vt);
    Atom x_bar = r.swap_out(e, g, ix, a.dyn(2));
    if (a.wants(1)) a.acc[1]->add(e, x_bar);
  });
  t.set(Prim::addupdate, [](Emitter& e, TransposeArgs& a) {
    Accum& r = ref_accum(a);
    if (!a.wants(1) || !r.has_buffer()) return;
    a.acc[1]->add(e, r.read_at(e, a.eqn.params.get<Indexer>("indexer"), a.dyn(2)));
  });
  t.set(Prim::freeze, [](Emitter& e, TransposeArgs& a) { ref_accum(a).add(e, a.ct[0]); });
  t.set(Prim::new_ref, [](Emitter& e, TransposeArgs& a) {
    MaybeAtom ct = a.out_acc[0]->freeze(e);
    if (a.wants(0)) a.acc[0]->add(e, ct);
  });
}

}  // namespace refjit
