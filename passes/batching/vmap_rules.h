// Internal: the batching rule table (passes/batching/vmap.h), one entry per primitive that has a
// rule; an eqn whose primitive has none, or whose rule declines (returns nullopt), runs as a scan
// over the batch (vmap.cpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "passes/emitter.h"
#include "refjit/ir/primitive.h"

namespace refjit {

// A value of the batched program: its atom, and whether it has the batch dim (always dim 0).
struct BVal {
  Atom atom;
  bool batched = false;
};

struct BatchCtx {
  Emitter e;
  int64_t size;       // the batch size B
  const Jaxpr& src;   // the jaxpr being batched
  std::string where;  // "eqn 3 (`swap`)", for errors

  // `v` with the batch dim: an unbatched array is broadcast to [B, shape...].
  Atom batched(const BVal& v);
  // `x` (batch dim at `from`) with its batch dim moved to the front.
  Atom to_front(const Atom& x, int from);
  // `x` (batch dim at the front) with its batch dim moved to `to`.
  Atom from_front(const Atom& x, int to);
  // A copy of `eqn` with new operands and params, every output batched.
  std::vector<BVal> emit_batched(const Eqn& eqn, std::vector<Atom> ins, Params params);
};

using BatchRule = std::function<std::optional<std::vector<BVal>>(BatchCtx&, const Eqn&,
                                                                 const std::vector<BVal>&)>;
using BatchRuleTable = RuleTable<BatchRule>;

const BatchRuleTable& batch_rules();

// Control flow and calls (vmap.cpp): they batch their sub-jaxprs with vmap_jaxpr.
void register_control_batch_rules(BatchRuleTable& t);

}  // namespace refjit
