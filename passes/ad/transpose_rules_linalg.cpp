// Transpose rules of the linear solves, linear in their right-hand side (JAX's): a triangular
// solve's cotangent is the solve with op(a) transposed; a tridiagonal solve's the solve with
// the transposed matrix (its sub- and superdiagonals swapped and shifted).
#include "passes/ad/transpose_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

void register_linalg_transpose_rules(TransposeRuleTable& t) {
  t.set(Prim::triangular_solve, [](Emitter& e, TransposeArgs& a) {
    if (a.linear(0))
      throw Error("transpose: `triangular_solve` is not linear in its matrix (operand 0)");
    if (!a.wants(1) || !a.ct[0]) return;
    Params p = a.eqn.params;
    p.set("transpose_a", !a.eqn.params.get_or<bool>("transpose_a", false));
    a.acc[1]->add(e, e.emit1(Prim::triangular_solve, {a.val[0], *a.ct[0]}, std::move(p)));
  });
  t.set(Prim::tridiagonal_solve, [](Emitter& e, TransposeArgs& a) {
    for (size_t i = 0; i < 3; ++i)
      if (a.linear(i)) throw Error("transpose: `tridiagonal_solve` is not linear in its diagonals");
    if (!a.wants(3) || !a.ct[0]) return;
    const ArrayType dt = e.array_type_of(a.val[1]);
    const int64_t m = dt.shape.back(), last = dt.rank() - 1;
    if (m == 0) {
      a.acc[3]->add(e, *a.ct[0]);
      return;
    }
    // A^T's subdiagonal is A's superdiagonal moved down a row, its superdiagonal A's
    // subdiagonal moved up: (0, du[:-1]) and (dl[1:], 0).
    auto part = [&](Atom v, int64_t from, int64_t to) {
      IntList start(static_cast<size_t>(dt.rank()), 0), limit(dt.shape.begin(), dt.shape.end());
      start.back() = from;
      limit.back() = to;
      return e.emit1(
          Prim::slice, {v},
          Params{{"start_indices", start}, {"limit_indices", limit}, {"strides", NoneParam{}}});
    };
    Shape one = dt.shape;
    one.back() = 1;
    const Atom zero = e.zeros(ArrayType{dt.dtype, one});
    const Atom sub =
        e.emit1(Prim::concatenate, {zero, part(a.val[2], 0, m - 1)}, Params{{"dimension", last}});
    const Atom super =
        e.emit1(Prim::concatenate, {part(a.val[0], 1, m), zero}, Params{{"dimension", last}});
    a.acc[3]->add(e,
                  e.emit1(Prim::tridiagonal_solve, {sub, a.val[1], super, *a.ct[0]}, a.eqn.params));
  });
}

}  // namespace refjit
