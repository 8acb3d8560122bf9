#include "tools/execute.h"

#include <fmt/format.h>

#include "refjit/ir/error.h"

namespace refjit::cli {

Executable::Executable(const Jaxpr& program, const Options& options,
                       const PipelineOptions& pipeline, StageTimings& timings) {
  PipelineOptions timed = pipeline;
  timed.after_pass = [&](const PassReport& r) { timings.record(std::string(r.pass), r.ms); };
  if (options.interpret) {
    interpreted_ = timings.time(
        "autodiff", [&] { return derive_program(program, pipeline.derivative, pipeline.wrt); });
    // --fail-on-copy refuses the program whichever engine runs it.
    if (pipeline.buffers.fail_on_copy) {
      timed.derivative = Derivative::none;
      (void)emit_after(*interpreted_, "buffers", timed);
    }
    return;
  }
  try {
    native_ = compile_program(program, timed);
  } catch (const Error& e) {
    // Point at the engine that covers every primitive.
    throw Error(
        fmt::format("{} (the native backend cannot compile this program; "
                    "`refjit run --interpret` runs it on the reference interpreter)",
                    e.what()));
  }
}

std::vector<RtValue> Executable::operator()(const std::vector<RtValue>& args,
                                            StageTimings& timings) const {
  if (interpreted_)
    return timings.time("interpret", [&] { return interpret(*interpreted_, args); });
  return timings.time("run", [&] { return (*native_)(args); });
}

}  // namespace refjit::cli
