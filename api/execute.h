// Internal: where concrete evaluation of a jaxpr happens, so a compiled backend can replace
// the reference interpreter behind one function.
//
// Every eager evaluation goes through execute(): one-eqn jaxprs of eager ops, whole jaxprs
// of ClosedJaxpr::call and of other top-level bind_jaxpr calls, and jit calls that use the
// interpreter backend (jit(f, {.backend = Backend::interpreter}) or REFJIT_BACKEND=
// interpreter). jit calls on the native backend bypass it: api/jit.cpp compiles the
// jaxpr (cached by its printed text) and runs the machine code. Eager op-by-op execution
// stays on the interpreter on purpose: compiling each op would cost milliseconds per op.
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

// Whether set_executor installed one; it then runs jit calls too (the native path steps
// aside, so an installed executor sees every evaluation).
bool has_executor();

}  // namespace refjit::detail
