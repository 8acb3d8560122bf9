// Dead code elimination that respects ref effects.
#pragma once

#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// Removes eqns whose results are unused. Kept regardless: every eqn touching a ref that is a
// constvar or invar (its effects are visible to the caller), and every eqn that calls the
// host (has_host_effect: a debug_callback, or a loop or call holding one) or checks the
// processes an axis spans (checks_processes: a shard_map's mesh). An eqn touching only
// internal refs (made by new_ref inside) is kept only if some kept eqn reads that ref afterwards.
// `used_outputs` (default: all) selects the outputs to keep; the others are removed from
// the outvars. Recurses into jit bodies, pruning their unused outputs, and into scan bodies
// and cond branches, keeping their signatures.
Jaxpr dce(const Jaxpr& jaxpr, std::vector<bool> used_outputs = {});

}  // namespace refjit
