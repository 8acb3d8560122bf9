// Transpose rules of the collectives, as JAX defines them for values every member holds its
// own copy of: psum is its own transpose; all_gather's is this member's row of the psum of
// the cotangent (JAX's psum_scatter); broadcast_from's is the psum of the cotangent at the
// root and zero elsewhere.
#include "passes/ad/transpose_rules.h"

namespace refjit {

namespace {

Atom psum_of(Emitter& e, const Atom& x, const Params& params) {
  return e.emit1(Prim::psum, {x}, Params{{"axis_name", params.get<std::string>("axis_name")}});
}

Atom axis_index_of(Emitter& e, const Params& params) {
  return e.emit1(Prim::axis_index, {}, Params{{"axis_name", params.get<std::string>("axis_name")}});
}

}  // namespace

void register_collective_transpose_rules(TransposeRuleTable& t) {
  t.set(Prim::psum, [](Emitter& e, TransposeArgs& a) {
    if (a.wants(0) && a.ct[0]) a.acc[0]->add(e, psum_of(e, *a.ct[0], a.eqn.params));
  });
  t.set(Prim::all_gather, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0) || !a.ct[0]) return;
    const Atom summed = psum_of(e, *a.ct[0], a.eqn.params);
    const ArrayType all = e.array_type_of(summed);
    IntList sizes{1};
    std::vector<Atom> ins{summed, axis_index_of(e, a.eqn.params)};
    for (size_t d = 1; d < all.shape.size(); ++d) {
      sizes.push_back(all.shape[d]);
      ins.push_back(e.scalar(DType::i32, 0));
    }
    const Atom row = e.emit1(Prim::dynamic_slice, ins, Params{{"slice_sizes", sizes}});
    a.acc[0]->add(e, e.reshape(row, Shape(all.shape.begin() + 1, all.shape.end())));
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
