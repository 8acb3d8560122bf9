// Internal: where concrete evaluation of a jaxpr happens, so a compiled backend can replace
// the reference interpreter behind one function.
//
// Every eager evaluation goes through execute(): one-eqn jaxprs of eager ops, and whole
// jaxprs of jit calls made outside any trace (for jit, the same JaxprPtr is passed on every
// call with the same signature, so a backend may cache compiled code by jaxpr identity).
#pragma once

#include <functional>
#include <vector>

#include "refjit/ir/jaxpr.h"
#include "runtime/interpreter.h"

namespace refjit::detail {

// Evaluates `jaxpr` on one runtime value per constvar then per invar; refs are updated in
// place. Same contract as refjit::interpret.
using Executor =
    std::function<std::vector<RtValue>(const Jaxpr& jaxpr, const std::vector<RtValue>& args)>;

std::vector<RtValue> execute(const Jaxpr& jaxpr, const std::vector<RtValue>& consts_then_args);

// Replaces the executor (nullptr restores the interpreter). Not thread-safe against
// concurrent execute() calls: set it once at startup.
void set_executor(Executor executor);

}  // namespace refjit::detail
