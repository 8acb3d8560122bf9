// Executing a program for `refjit run`: native code (compiler/backend) by default, the
// reference interpreter with --interpret.
#pragma once

#include <vector>

#include "refjit/ir/jaxpr.h"
#include "runtime/interpreter.h"
#include "tools/cli_options.h"
#include "tools/timings.h"

namespace refjit::cli {

// Runs `program` on one value per constvar then invar; ref arguments are updated in place.
std::vector<RtValue> execute(const Jaxpr& program, const std::vector<RtValue>& args,
                             const Options& options, StageTimings& timings);

}  // namespace refjit::cli
