// The compilation pipeline: the one ordered list of passes that turns a jaxpr into native
// code. Every front door runs it: jit (api/jit.cpp), `refjit run`, `refjit dump` and
// `refjit compile` (tools/, driver/aot.cpp), so one program is compiled the same
// way whichever door it comes through. pipeline.cpp reads top to bottom in pass order.
//
// Every pass has a name (pipeline_passes()) and a printed form: `refjit dump --emit=NAME`
// prints the program after pass NAME, `--print-after-all` after each pass in turn.
//
// The driver layer (driver/) sits above the backend, whose passes end the list; passes/ and
// backend/ do not include it.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/buffer_plan.h"
#include "backend/native.h"
#include "passes/pass_report.h"
#include "passes/simplify/inline_consts.h"
#include "passes/simplify/int_ranges.h"
#include "refjit/ir/jaxpr.h"
#include "runtime/interpreter.h"

namespace refjit {

// One pass of the pipeline, for listings (`refjit dump --help`, docs/pipeline.md).
struct PassInfo {
  std::string_view name;
  std::string_view summary;
};

// Every pass, in the order the pipeline runs them.
std::span<const PassInfo> pipeline_passes();

// Whether `name` is a pass of the pipeline.
bool is_pipeline_pass(std::string_view name);

// What the caller knows about the program's constvars. jit and `refjit run` know their
// values; `refjit dump` and `refjit compile` know nothing (constvars are arguments of the
// object's entry point), so these stay empty there.
struct KnownConsts {
  // Per constvar: an all-zero array or an integer run start, start+1, ... (folded in by
  // inline-consts, no longer passed), or neither.
  std::vector<ConstFold> fold;
  // Per constvar: the range of an integer array's elements (lets dead-regions and
  // simplify-ranges decide what indices reach).
  std::vector<std::optional<IntRange>> int_range;

  // What the values of the constvars tell: all-zero arrays and integer runs of more than one
  // element, and the ranges of integer arrays. Refs tell nothing (their contents change).
  static KnownConsts of(const std::vector<RtValue>& values);
};

// The derived program the `autodiff` pass builds (the CLI's --grad and --jvp; jit differentiates
// while tracing, so it asks for none).
enum class Derivative {
  none,
  grad,  // the output (a float scalar), then one gradient per position of `wrt`
  jvp,   // the outputs, then their tangents; one tangent input per invar
};

struct PipelineOptions {
  Derivative derivative = Derivative::none;
  std::vector<int> wrt;  // Derivative::grad: the invar positions
  KnownConsts consts;
  BufferOptions buffers;       // donated inputs, fail_on_copy
  bool naive_buffers = false;  // every value in its own buffer (the in-place reference)
  // Verify the program after every jaxpr pass, naming the pass that broke it. On in debug
  // builds and when REFJIT_VERIFY_EACH is set to anything but 0 (the test suites set it).
  bool verify_each = verify_each_by_default();
  // The backend's options (opt_level: LLVM -O<n>, 0 is jit's fast tier; exact_math; the
  // runtime kernels and parallel loops; subnormals). Its plan and after_pass are the
  // pipeline's: compile_planned sets them.
  CompileOptions compile;
  // Called after every pass that runs (print-after-all, timings).
  PassObserver after_pass;

  static bool verify_each_by_default();
};

// The program the `autodiff` pass makes, and the one `refjit run --interpret` runs for
// --grad/--jvp: the derivative taken through Differentiable (driver/derive.h), told what is
// known of the constvars' values. With Derivative::none, `program` as is.
Jaxpr derive_program(const Jaxpr& program, Derivative derivative, const std::vector<int>& wrt,
                     const KnownConsts& known = {});

// The program after every pass before the lowering: what the backend compiles.
struct PlannedProgram {
  Jaxpr jaxpr;
  // Per constvar of the input program: whether it is still a constvar of `jaxpr` (all-zero
  // constants are folded in and no longer passed).
  std::vector<bool> consts_kept;
  BufferPlan plan;       // buffers and lowering decisions, for `jaxpr`
  double passes_ms = 0;  // wall time of the passes so far
};

// Runs the jaxpr passes, buffer planning and fusion. Throws Error (TypeError/RefError) when
// the program or a pass's output does not verify, naming the pass.
PlannedProgram plan_program(const Jaxpr& program, const PipelineOptions& options);

// The remaining passes, to code JIT-compiled in this process.
CompiledFunction compile_planned(const PlannedProgram& planned, const PipelineOptions& options);

// plan_program then compile_planned.
CompiledFunction compile_program(const Jaxpr& program, const PipelineOptions& options);

// The printed form of `program` after pass `stage` (a name from pipeline_passes()); the
// passes after it do not run. Throws Error for an unknown name.
std::string emit_after(const Jaxpr& program, std::string_view stage,
                       const PipelineOptions& options);

// Every pass's printed form in order, each headed by a line `# after NAME`.
std::string print_after_all(const Jaxpr& program, const PipelineOptions& options);

// Verifies `program` as it stands after pass `pass`; throws Error naming the pass when it does
// not verify (what verify_each runs after every jaxpr pass).
void verify_after_pass(const Jaxpr& program, std::string_view pass);

// What the passes of a run report to: options.after_pass, then the PipelineWatch, if any.
PassObserver pass_reporter(const PipelineOptions& options);

// While one is alive, every pipeline run in this process, through any door, also reports each
// pass to it: how the tests see that jit, the CLI and `refjit compile` compile one program
// alike. One at a time; runs on other threads report to it too, so the observer locks.
class PipelineWatch {
 public:
  explicit PipelineWatch(PassObserver observer);
  ~PipelineWatch();
  PipelineWatch(const PipelineWatch&) = delete;
  PipelineWatch& operator=(const PipelineWatch&) = delete;
};

}  // namespace refjit
