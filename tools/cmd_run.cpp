// `refjit run [OPTIONS] FILE [VALUE...]`: run a program on command-line values.
#include <fmt/format.h>

#include <cstdio>
#include <optional>

#include "tools/autodiff.h"
#include "tools/commands.h"
#include "tools/execute.h"
#include "tools/program.h"
#include "tools/values.h"

namespace refjit::cli {

namespace {

// The final value of each ref binder, constvars then invars: `NAME = VALUE`.
std::string ref_lines(const Jaxpr& program, const std::vector<RtValue>& args) {
  std::string out;
  std::vector<Var> binders = program.constvars;
  binders.insert(binders.end(), program.invars.begin(), program.invars.end());
  for (size_t i = 0; i < binders.size(); ++i) {
    if (!program.type_of(binders[i]).is_ref) continue;
    out += fmt::format("{} = {}\n", binder_name(program, binders[i]), value_text(args[i]));
  }
  return out;
}

}  // namespace

int run_command(const Options& o, StageTimings& timings) {
  Source source = read_source(o.file);
  Jaxpr program = load_program(source, o, timings);

  // The program that actually runs: the gradient program returns the output, then one
  // gradient per wrt position; the forward-mode program the outputs, then their tangents.
  // Both take the program's constvars and invars (then the tangents) and run its ref
  // effects once. Built before reading the values so program errors come first.
  const PipelineOptions pipeline = pipeline_options(o, program);
  const std::vector<int>& wrt = pipeline.wrt;
  Executable executable(program, o, pipeline, timings);

  std::vector<ValueSlot> slots = argument_slots(program, o.jvp);
  std::vector<RtValue> args = parse_values(slots, o.values);

  std::vector<RtValue> outs = executable(args, timings);
  size_t num_outs = program.outvars.size();
  std::string out;
  for (size_t i = 0; i < num_outs; ++i) out += value_text(outs.at(i)) + "\n";
  out += ref_lines(program, args);
  for (size_t k = 0; k < wrt.size(); ++k)
    out += fmt::format("grad {} = {}\n", binder_name(program, program.invars.at(wrt[k])),
                       value_text(outs.at(num_outs + k)));
  if (o.jvp)
    for (size_t i = 0; i < num_outs; ++i)
      out += fmt::format("tangent = {}\n", value_text(outs.at(num_outs + i)));
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace refjit::cli
