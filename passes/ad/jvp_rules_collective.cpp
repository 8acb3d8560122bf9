// JVP rules of the collectives: each is linear in its operand, so the tangent goes through the
// same collective (every member of the group differentiates together).
#include "passes/ad/jvp_rules.h"

namespace refjit {

void register_collective_jvp_rules(JvpRuleTable& t) {
  for (Prim p : {Prim::psum, Prim::psum_invariant, Prim::pvary, Prim::all_gather,
                 Prim::all_gather_invariant, Prim::broadcast_from})
    t.set(p, {[p](JvpCtx& c, JvpArgs& a) -> std::vector<MaybeAtom> {
            if (!a.tangents[0]) return {std::nullopt};
            return {c.t.emit1(p, {*a.tangents[0]}, a.eqn.params)};
          }});
}

}  // namespace refjit
