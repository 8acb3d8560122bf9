// Implementation details of refjit/checkpoint.h that its templates need. Not part of the API:
// names here may change at any time.
#pragma once

#include <string>
#include <vector>

#include "refjit/trace.h"

namespace refjit::detail {

// Calls `fn` on `args` as bind_jaxpr does; inside a trace the staged `jit` eqn carries the
// remat policy `policy` (passes/remat.h names them).
std::vector<Operand> checkpoint_call(const TracedFunction& fn, std::span<const Operand> args,
                                     const std::string& policy, const std::string& name);

}  // namespace refjit::detail
