// `refjit dump [--emit=STAGE | --print-after-all] FILE`: parse, verify and print a program,
// one stage of the pipeline, or every stage in turn.
#include <fmt/format.h>

#include <cstdio>

#include "driver/pipeline.h"
#include "refjit/ir/text.h"
#include "tools/autodiff.h"
#include "tools/commands.h"
#include "tools/program.h"

namespace refjit::cli {

int dump_command(const Options& o, StageTimings& timings) {
  Source source = read_source(o.file);
  Jaxpr program = load_program(source, o, timings);
  PipelineOptions pipeline = pipeline_options(o, program);
  pipeline.after_pass = [&](const PassReport& r) { timings.record(std::string(r.pass), r.ms); };

  std::string out;
  if (o.print_after_all) {
    out = print_after_all(program, pipeline);
  } else if (is_pipeline_pass(o.emit)) {
    out = emit_after(program, o.emit, pipeline);
  } else {
    // The views of the program as read (after --grad's autodiff, if asked for).
    if (o.grad)
      program = timings.time(
          "autodiff", [&] { return derive_program(program, Derivative::grad, pipeline.wrt); });
    // --fail-on-copy: the buffer plan must have no whole-buffer copy inside a loop.
    if (o.fail_on_copy) {
      PipelineOptions check = pipeline;
      check.derivative = Derivative::none;
      (void)emit_after(program, "buffers", check);
    }
    if (o.emit == "jaxpr")
      out = timings.time("print", [&] { return print_jaxpr(program); });
    else
      out = timings.time(o.emit, [&] { return program_view(o.emit, program); });
  }
  if (!out.empty() && out.back() != '\n') out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace refjit::cli
