// Transpose rules of the collectives, as JAX defines them for values every member holds its
// own copy of: psum is its own transpose; all_gather's is this member's row of the psum of
// the cotangent (JAX's psum_scatter); broadcast_from's is the psum of the cotangent at the
// root and zero elsewhere. The shard_map forms (primitives.def) follow JAX's check_vma
// rules instead: psum_invariant and pvary are each other's transpose, and the transpose of
// all_gather_invariant takes this member's row of the cotangent every member shares.
#include "passes/ad/transpose_rules.h"

namespace refjit {

namespace {

Atom psum_of(Emitter& e, const Atom& x, const Params& params) {
  return e.emit1(Prim::psum, {x}, Params{{"axis_name", params.get<std::string>("axis_name")}});
}

Atom axis_index_of(Emitter& e, const Params& params) {
  return e.emit1(Prim::axis_index, {}, Params{{"axis_name", params.get<std::string>("axis_name")}});
}

// Row axis_index of `stacked` (an all_gather's cotangent), in the gathered operand's shape.
Atom own_row(Emitter& e, const Atom& stacked, const Params& params) {
  const ArrayType all = e.array_type_of(stacked);
  IntList sizes{1};
  std::vector<Atom> ins{stacked, axis_index_of(e, params)};
  for (size_t d = 1; d < all.shape.size(); ++d) {
    sizes.push_back(all.shape[d]);
    ins.push_back(e.scalar(DType::i32, 0));
  }
  const Atom row = e.emit1(Prim::dynamic_slice, ins, Params{{"slice_sizes", sizes}});
  return e.reshape(row, Shape(all.shape.begin() + 1, all.shape.end()));
}

}  // namespace

void register_collective_transpose_rules(TransposeRuleTable& t) {
  t.set(Prim::psum, [](Emitter& e, TransposeArgs& a) {
    if (a.wants(0) && a.ct[0]) a.acc[0]->add(e, psum_of(e, *a.ct[0], a.eqn.params));
  });
  t.set(Prim::all_gather, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0) || !a.ct[0]) return;
    a.acc[0]->add(e, own_row(e, psum_of(e, *a.ct[0], a.eqn.params), a.eqn.params));
  });
  t.set(Prim::all_gather_invariant, [](Emitter& e, TransposeArgs& a) {
    if (a.wants(0) && a.ct[0]) a.acc[0]->add(e, own_row(e, *a.ct[0], a.eqn.params));
  });
  // Each is the other's transpose.
  for (auto [p, transpose] :
       {std::pair{Prim::psum_invariant, Prim::pvary}, std::pair{Prim::pvary, Prim::psum_invariant}})
    t.set(p, [transpose](Emitter& e, TransposeArgs& a) {
      if (!a.wants(0) || !a.ct[0]) return;
      a.acc[0]->add(e, e.emit1(transpose, {*a.ct[0]},
                               Params{{"axis_name", a.eqn.params.get<std::string>("axis_name")}}));
    });
  t.set(Prim::broadcast_from, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0) || !a.ct[0]) return;
    const Atom summed = psum_of(e, *a.ct[0], a.eqn.params);
    const ArrayType ty = e.array_type_of(summed);
    const Atom at_root = e.emit1(
        Prim::eq, {axis_index_of(e, a.eqn.params),
                   e.scalar(DType::i32, static_cast<double>(a.eqn.params.get<int64_t>("root")))});
    const Atom keep = e.broadcast_to(e.convert(at_root, ty.dtype), ty.shape);
    a.acc[0]->add(e, e.mul(summed, keep));
  });
}

}  // namespace refjit
