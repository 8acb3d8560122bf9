// What the passes that write a lowering decision as an eqn with a body share (MLIR-free): the
// body made of some eqns of a jaxpr, and one rewrite applied to every jaxpr of a program.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "passes/buffers/buffer_assignment.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// An eqn of `prim` computing eqns `eqns` of `j` (in program order; the last one's result is
// the eqn's result): they are renamed into its `jaxpr` param, whose invars are the values they
// read from outside, in the order first read, each once; those values are its operands.
Eqn eqn_with_body(Prim prim, const Jaxpr& j, const std::vector<size_t>& eqns);
// The same with the eqn's results `results` (vars those eqns define), in that order.
Eqn eqn_with_body(Prim prim, const Jaxpr& j, const std::vector<size_t>& eqns,
                  const std::vector<Var>& results);

// `program` with `rewrite(j, plan)` applied to it and to every jaxpr its eqns hold (scan bodies,
// branches, calls; not the bodies of decisions), bodies after the jaxpr holding them. `plan` is
// `assignment`'s plan of `j` (the first, for a body planned twice), or nullptr (no assignment,
// or a jaxpr it does not cover).
using JaxprRewrite = std::function<Jaxpr(const Jaxpr& j, const JaxprBuffers* plan)>;
Jaxpr rewrite_every_jaxpr(const Jaxpr& program, const BufferAssignment* assignment,
                          const JaxprRewrite& rewrite);

}  // namespace refjit
