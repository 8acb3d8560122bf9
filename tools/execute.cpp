#include "tools/execute.h"

#include <fmt/format.h>

#include "compiler/backend/native.h"
#include "refjit/ir/error.h"

namespace refjit::cli {

namespace {

std::vector<RtValue> run_native(const Jaxpr& program, const std::vector<RtValue>& args,
                                StageTimings& timings) {
  CompiledFunction compiled = [&] {
    try {
      return compile_native(program);
    } catch (const Error& e) {
      // Point at the engine that covers every primitive.
      throw Error(
          fmt::format("{} (the native backend cannot compile this program; "
                      "`refjit run --interpret` runs it on the reference interpreter)",
                      e.what()));
    }
  }();
  const CompileTimings& t = compiled.timings();
  timings.record("lowering", t.lower_ms);
  timings.record("mlir passes", t.mlir_passes_ms);
  timings.record("llvm opt", t.llvm_opt_ms);
  timings.record("codegen", t.codegen_ms);
  return timings.time("run", [&] { return compiled(args); });
}

}  // namespace

std::vector<RtValue> execute(const Jaxpr& program, const std::vector<RtValue>& args,
                             const Options& options, StageTimings& timings) {
  if (options.interpret) return timings.time("interpret", [&] { return interpret(program, args); });
  return run_native(program, args, timings);
}

}  // namespace refjit::cli
