// Transpose rule of triangular_solve, the one linear decomposition primitive (in its
// right-hand side): the cotangent of b is the solve with op(a) transposed, as in JAX.
#include "passes/transpose_rules.h"
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
}

}  // namespace refjit
