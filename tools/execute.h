// Executing a program for `refjit run`: native code through the pipeline (passes/pipeline.h)
// by default, the reference interpreter with --interpret.
#pragma once

#include <optional>
#include <vector>

#include "passes/pipeline.h"
#include "refjit/ir/jaxpr.h"
#include "runtime/interpreter.h"
#include "tools/cli_options.h"
#include "tools/timings.h"

namespace refjit::cli {

// The program `refjit run` executes, with the pipeline's autodiff pass as `pipeline` asks.
// Made before the values are read, so errors in the program come first.
class Executable {
 public:
  Executable(const Jaxpr& program, const Options& options, const PipelineOptions& pipeline,
             StageTimings& timings);

  // Runs on one value per constvar then invar (then tangent, for --jvp); ref arguments are
  // updated in place.
  std::vector<RtValue> operator()(const std::vector<RtValue>& args, StageTimings& timings) const;

 private:
  std::optional<CompiledFunction> native_;
  std::optional<Jaxpr> interpreted_;
};

}  // namespace refjit::cli
