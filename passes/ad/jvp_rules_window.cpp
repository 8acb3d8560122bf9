// JVP rules of the windowed reductions (docs/primitives.md "Windows"), JAX's: a window sum's
// tangent is the window sum of the tangent; a window max (min) passes on the tangent of each
// window's first maximum (minimum), select_and_gather_add; the two selecting ops are linear
// in their first operand, their selection piecewise constant in the second.
#include "passes/ad/jvp_rules.h"

namespace refjit {

namespace {

using Tangents = std::vector<MaybeAtom>;

// The same eqn applied to the tangent of operand 0; operand 1 (if any) as it is.
JvpRule linear_in_first() {
  return {[](JvpCtx& c, JvpArgs& a) -> Tangents {
    if (!a.tangents[0]) return {std::nullopt};
    std::vector<Atom> ins{*a.tangents[0]};
    if (a.primals.size() > 1) ins.push_back(a.primals[1]);
    return {c.t.emit1(a.eqn.prim, std::move(ins), a.eqn.params)};
  }};
}

JvpRule chooser(const char* select_prim) {
  return {[select_prim](JvpCtx& c, JvpArgs& a) -> Tangents {
    if (!a.tangents[0]) return {std::nullopt};
    Params p = a.eqn.params;
    p.set("select_prim", std::string(select_prim));
    return {c.t.emit1(Prim::select_and_gather_add, {*a.tangents[0], a.primals[0]}, std::move(p))};
  }};
}

}  // namespace

void register_window_jvp_rules(JvpRuleTable& t) {
  t.set(Prim::reduce_window_sum, linear_in_first());
  t.set(Prim::reduce_window_max, chooser("ge"));
  t.set(Prim::reduce_window_min, chooser("le"));
  t.set(Prim::select_and_gather_add, linear_in_first());
  t.set(Prim::select_and_scatter_add, linear_in_first());
}

}  // namespace refjit
