// Executing a program for `refjit run`: native code through the pipeline (driver/pipeline.h)
// by default, the reference interpreter with --interpret.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "driver/bound_program.h"
#include "refjit/ir/jaxpr.h"
#include "runtime/interpreter.h"
#include "tools/cli_options.h"
#include "tools/timings.h"

namespace refjit::cli {

// The program `refjit run` executes, with the pipeline's autodiff pass as `pipeline` asks.
// Made before the values are read, so errors in the program come first. The constvars'
// values are known when it runs, so, as jit does with captured values, the native code is
// specialised to them (zero arrays folded in, integer ranges used).
class Executable {
 public:
  Executable(const Jaxpr& program, const Options& options, PipelineOptions pipeline,
             StageTimings& timings);

  // A call of the program on fixed constvar values, compiled once and callable many times
  // (`refjit bench`). Takes every argument, constvars first, as operator() does.
  using Call = std::function<std::vector<RtValue>(const std::vector<RtValue>& args)>;

  // Compiles for the constvars' values in `args` (native code), or readies the interpreter.
  Call prepare(const std::vector<RtValue>& args, StageTimings& timings);

  // Runs on one value per constvar then invar (then tangent, for --jvp); ref arguments are
  // updated in place.
  std::vector<RtValue> operator()(const std::vector<RtValue>& args, StageTimings& timings);

 private:
  BoundProgram bind(const std::vector<RtValue>& consts, StageTimings& timings) const;

  const Jaxpr& program_;
  PipelineOptions pipeline_;
  std::optional<Jaxpr> interpreted_;
};

}  // namespace refjit::cli
