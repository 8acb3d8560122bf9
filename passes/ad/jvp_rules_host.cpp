// JVP rule of the host call: the driver calls it on the primal values (as JAX's JVP of
// jax.debug.print prints the primals), and it gives no tangents, having no results.
#include "passes/ad/jvp_rules.h"

namespace refjit {

void register_host_jvp_rules(JvpRuleTable& t) {
  t.set(Prim::debug_callback, {[](JvpCtx&, JvpArgs&) { return std::vector<MaybeAtom>{}; }});
}

}  // namespace refjit
