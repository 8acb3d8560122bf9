// A program planned for the values of its constvars: what jit (api/jit.cpp), `refjit
// run`/`bench` (tools/execute.cpp) and the Python module (python/src/executable.cpp) compile.
// The values tell the pipeline what to specialise (all-zero arrays and integer runs folded
// into the code, the ranges of integer arrays, KnownConsts); the code then takes only the
// constants it did not fold, ahead of the arguments. `refjit compile` knows no values (its
// constvars are arguments of the object's entry points) and plans with plan_program itself.
#pragma once

#include <optional>
#include <vector>

#include "driver/pipeline.h"
#include "refjit/ir/jaxpr.h"
#include "runtime/interpreter.h"

namespace refjit {

class BoundProgram {
 public:
  // Runs the passes up to the buffer plan (plan_program), told what `consts` hold (one value
  // per constvar of `program`; `options.consts` is replaced by what they tell).
  BoundProgram(const Jaxpr& program, const std::vector<RtValue>& consts, PipelineOptions options);

  // Native code at LLVM -O<opt_level> (by default the options' level); the passes after the
  // plan report to the options' observer, as the plan's did.
  CompiledFunction compile(std::optional<int> opt_level = std::nullopt) const;

  // Whether the code still takes constvar `k` (it is not folded in).
  bool takes_const(size_t k) const { return planned_.consts_kept.at(k); }

  // The constants the code takes, in order, out of one value per constvar.
  std::vector<RtValue> kept_consts(std::vector<RtValue> consts) const;
  // The code's inputs out of one value per constvar then the arguments: the constants it
  // takes, then the arguments.
  std::vector<RtValue> inputs(const std::vector<RtValue>& consts_then_args) const;

  const PlannedProgram& planned() const { return planned_; }
  const PipelineOptions& options() const { return options_; }

 private:
  PipelineOptions options_;
  PlannedProgram planned_;
};

}  // namespace refjit
