#include "driver/bound_program.h"

#include <fmt/format.h>

#include "refjit/ir/error.h"

namespace refjit {

BoundProgram::BoundProgram(const Jaxpr& program, const std::vector<RtValue>& consts,
                           PipelineOptions options)
    : options_(std::move(options)) {
  if (consts.size() != program.constvars.size())
    throw Error(fmt::format("{} constant value(s) given for a program with {} constvar(s)",
                            consts.size(), program.constvars.size()));
  options_.consts = KnownConsts::of(consts);
  planned_ = plan_program(program, options_);
}

CompiledFunction BoundProgram::compile(std::optional<int> opt_level) const {
  if (!opt_level) return compile_planned(planned_, options_);
  PipelineOptions at_level = options_;
  at_level.compile.opt_level = *opt_level;
  return compile_planned(planned_, at_level);
}

std::vector<RtValue> BoundProgram::kept_consts(std::vector<RtValue> consts) const {
  std::vector<RtValue> kept;
  kept.reserve(consts.size());
  for (size_t k = 0; k < consts.size(); ++k)
    if (takes_const(k)) kept.push_back(std::move(consts[k]));
  return kept;
}

std::vector<RtValue> BoundProgram::inputs(const std::vector<RtValue>& consts_then_args) const {
  const size_t n_consts = planned_.consts_kept.size();
  if (consts_then_args.size() < n_consts)
    throw Error(fmt::format("{} input(s) given for a program with {} constvar(s)",
                            consts_then_args.size(), n_consts));
  std::vector<RtValue> passed;
  passed.reserve(consts_then_args.size());
  for (size_t k = 0; k < consts_then_args.size(); ++k)
    if (k >= n_consts || takes_const(k)) passed.push_back(consts_then_args[k]);
  return passed;
}

}  // namespace refjit
