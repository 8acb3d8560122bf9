// The compilation pipeline, in the order its passes run (docs/pipeline.md).
#include "driver/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>

#include "backend/fusion.h"
#include "backend/product_epilogues.h"
#include "backend/row_loops.h"
#include "backend/rule_tables.h"
#include "driver/derive.h"
#include "passes/ad/jvp.h"
#include "passes/ad/vjp.h"
#include "passes/buffers/buffer_assignment.h"
#include "passes/collectives/overlap_sums.h"
#include "passes/simplify/accumulate_products.h"
#include "passes/simplify/canonicalize.h"
#include "passes/simplify/concat_windows.h"
#include "passes/simplify/dce.h"
#include "passes/simplify/dead_regions.h"
#include "passes/simplify/hoist_accumulations.h"
#include "passes/simplify/hoist_xs_products.h"
#include "passes/simplify/implicit_im2col.h"
#include "passes/simplify/index_runs.h"
#include "passes/simplify/inline.h"
#include "passes/simplify/inline_consts.h"
#include "passes/simplify/move_windows.h"
#include "passes/simplify/range_simplify.h"
#include "passes/simplify/simplify_dots.h"
#include "refjit/ir/error.h"
#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"

namespace refjit {

namespace {

constexpr PassInfo kPasses[] = {
    // ---- on the jaxpr
    {"autodiff",
     "--grad/--jvp: in-range index runs become windows, then the gradient or forward-mode "
     "program is derived (otherwise no change)"},
    {"inline-jits",
     "calls of custom_jvp functions (jax.nn.relu, softplus) and of straight-line code "
     "(log_softmax) become their eqns, so that later passes and fusion see across them"},
    {"inline-consts",
     "constants known to be all zeros or integer runs become broadcasts of 0 or iotas"},
    {"canonicalize",
     "local rewrites to one spelling: slices of concatenates, reshapes and broadcasts of "
     "broadcasts, "
     "arithmetic on broadcast scalars, window accumulations as sums of pads, constant scan "
     "consts moved into the body, repeated computations done once"},
    {"dead-regions",
     "values only sliced are computed over what the slices read; carries and refs lose the "
     "trailing rows that no index reaches"},
    {"simplify-ranges", "what integer ranges decide is folded; row-run accesses become windows"},
    {"simplify-dots", "transposed products become swapped ones; products with ones, sums"},
    {"hoist-xs-products",
     "a scan's per-step `x_t . W` (W a const) becomes one product of the stacked rows before it"},
    {"hoist-accumulations",
     "a scan's per-step `ref += x_t . d_t` becomes one product of the stacked rows after it"},
    {"implicit-im2col",
     "a product of windows of one array concatenated side by side (a convolution) becomes "
     "im2col_dot, which multiplies from the array itself"},
    {"dce",
     "eqns whose results nobody reads, and that have no effect, are removed (in bodies too)"},
    {"accumulate-products",
     "`ref += dot_general(x, y)` becomes dot_accumulate, which the matrix kernel adds into the "
     "ref in place"},
    {"move-windows",
     "a dynamic_update_slice of dynamic_slices (a row segment shifted in place) becomes "
     "move_windows, which moves each window straight from its source into the result"},
    {"concat-windows",
     "a concatenate of slices read nowhere else becomes concat_windows, which copies the "
     "windows straight from the sliced arrays"},
    {"index-runs",
     "a gather, scatter, get or swap whose indices are iota plus scalars becomes gather_run, "
     "scatter_run, get_flat_run or swap_flat_run, which take the run's first index (no index "
     "array; one block moved when it is in range)"},
    {"fusion",
     "elementwise chains (with the broadcasts, slices and pads they read, and a reduction of "
     "them) become fused eqns, computed in one loop nest each"},
    {"product-epilogues",
     "a matrix product and its one elementwise consumer become a product_epilogue eqn: the "
     "matrix kernel runs the consumer on the product's rows as they are final"},
    {"row-loops",
     "fused eqns and reductions that read each other's rows become a row_loop eqn: one loop "
     "over the rows computes every one's row in turn"},
    {"overlap-sums",
     "each psum becomes a psum_start where its operand is ready and a psum_wait where its "
     "result is first read, sums of one axis and dtype bucketed into one; the sums run while "
     "the eqns between compute"},
    // ---- plans the lowering follows
    {"buffers", "each value gets a buffer; updates happen in place where the rules allow"},

    // ---- the backend (backend/native.cpp)
    {"mlir", "lowered to MLIR at the memref level"},
    {"llvm-dialect", "MLIR's conversion passes down to the LLVM dialect"},
    {"llvm", "LLVM IR, optimised at -O<n> for the host CPU"},
    {"asm", "machine code (printed as assembly)"},
};

using Clock = std::chrono::steady_clock;

std::mutex g_watch_mu;
PassObserver g_watch;  // the live PipelineWatch's observer

void report_to_watch(const PassReport& r) {
  std::lock_guard<std::mutex> lock(g_watch_mu);
  if (g_watch) g_watch(r);
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The state between passes: the program so far, and whether the run stops at `stop_after`.
class Run {
 public:
  Run(const PipelineOptions& options, std::string_view stop_after)
      : options_(options), stop_after_(stop_after) {}

  PlannedProgram& planned() { return planned_; }
  bool stopped() const { return stopped_; }
  const std::string& stop_text() const { return stop_text_; }

  // Runs a jaxpr pass (unless the run has stopped): `pass` maps the program to the next one.
  template <class F>
  void jaxpr_pass(std::string_view name, F&& pass) {
    if (stopped_) return;
    auto t0 = Clock::now();
    planned_.jaxpr = pass(planned_.jaxpr);
    if (options_.verify_each) verify_after_pass(planned_.jaxpr, name);
    done(name, t0, [&] { return print_jaxpr(planned_.jaxpr); });
  }

  // A pass made of rewrite patterns (passes/pattern_rewriter.h): its printed form ends with a
  // comment line counting the rewrites by pattern name.
  template <class F>
  void pattern_pass(std::string_view name, F&& pass) {
    if (stopped_) return;
    auto t0 = Clock::now();
    RewriteStats stats;
    planned_.jaxpr = pass(planned_.jaxpr, &stats);
    if (options_.verify_each) verify_after_pass(planned_.jaxpr, name);
    done(name, t0, [&] {
      std::string text = print_jaxpr(planned_.jaxpr);
      if (stats.total() > 0) text += "\n# rewrites: " + stats.summary();
      return text;
    });
  }
  void pattern_pass(std::string_view name, std::span<const RewritePattern> patterns) {
    pattern_pass(name,
                 [&](const Jaxpr& j, RewriteStats* s) { return with_patterns(j, patterns, s); });
  }

  // Reports a pass that ran since `t0`; its text is made only if someone reads it.
  void done(std::string_view name, Clock::time_point t0, const std::function<std::string()>& text) {
    const double ms = ms_since(t0);
    planned_.passes_ms += ms;
    const PassReport report{name, ms, text};
    if (options_.after_pass) options_.after_pass(report);
    report_to_watch(report);
    if (name == stop_after_) {
      stop_text_ = text();
      stopped_ = true;
    }
  }

 private:
  const PipelineOptions& options_;
  std::string_view stop_after_;
  bool stopped_ = false;
  std::string stop_text_;
  PlannedProgram planned_;
};

// Per constvar still passed after inline-consts: its known integer range.
std::vector<std::optional<IntRange>> ranges_of_kept(const KnownConsts& known,
                                                    const std::vector<bool>& kept) {
  std::vector<std::optional<IntRange>> ranges;
  for (size_t k = 0; k < kept.size(); ++k)
    if (kept[k]) ranges.push_back(k < known.int_range.size() ? known.int_range[k] : std::nullopt);
  return ranges;
}

// The jaxpr passes, buffer planning and fusion, stopping after `stop_after` if it is one.
void plan(Run& run, const Jaxpr& program, const PipelineOptions& options) {
  PlannedProgram& p = run.planned();
  auto t0 = Clock::now();
  // Checking passes also checks, once, that every primitive has the rules it declares.
  if (options.verify_each) check_rule_tables();
  // The input must be type-correct before any pass reads it (errors name the eqn).
  verify(program);
  p.jaxpr = program;
  p.passes_ms = ms_since(t0);

  run.jaxpr_pass("autodiff", [&](const Jaxpr& j) {
    if (options.derivative == Derivative::none) return j;
    return derive_program(j, options.derivative, options.wrt, options.consts);
  });

  // After autodiff a custom_jvp function's rule has done its work; its body is ordinary code,
  // which fusion and the simplifications below can then see across (a ReLU from jax.nn.relu
  // had stayed a call of its own, fused with nothing). So does a call of straight-line array
  // code (JAX's log_softmax: its rows then join the caller's row loop). Jits with control flow
  // inside stay calls: inlining every one doubled the time of a 10-step scan gradient that
  // shifts rows of its carry in place (0.21 -> 0.42 ms; not yet understood).
  run.jaxpr_pass("inline-jits", [&](const Jaxpr& j) { return inline_custom_jvp_calls(j); });

  // Specialisation to what is known of the constants.
  const KnownConsts& known = options.consts;
  p.consts_kept.assign(program.constvars.size(), true);
  run.jaxpr_pass("inline-consts", [&](const Jaxpr& j) {
    std::vector<ConstFold> folds(j.constvars.size());
    bool any = false;
    for (size_t k = 0; k < folds.size() && k < known.fold.size(); ++k) {
      folds[k] = known.fold[k];
      any |= folds[k].kind != ConstFold::Kind::keep;
    }
    for (size_t k = 0; k < folds.size(); ++k)
      p.consts_kept[k] = folds[k].kind == ConstFold::Kind::keep;
    return any ? inline_known_consts(j, folds) : j;
  });
  const std::vector<std::optional<IntRange>> ranges = ranges_of_kept(known, p.consts_kept);

  // Simplification.
  run.pattern_pass("canonicalize",
                   [&](const Jaxpr& j, RewriteStats* s) { return canonicalize(j, s); });
  run.jaxpr_pass("dead-regions", [&](const Jaxpr& j) { return eliminate_dead_regions(j, ranges); });
  run.jaxpr_pass("simplify-ranges",
                 [&](const Jaxpr& j) { return simplify_with_ranges(j, ranges); });
  run.pattern_pass("simplify-dots", simplify_dots_patterns());
  run.jaxpr_pass("hoist-xs-products", [&](const Jaxpr& j) { return hoist_xs_products(j); });
  run.jaxpr_pass("hoist-accumulations", [&](const Jaxpr& j) { return hoist_accumulations(j); });
  run.jaxpr_pass("implicit-im2col", [&](const Jaxpr& j) { return implicit_im2col(j); });
  // Results nobody reads (a gradient's primal value inside a nested jit) are not computed.
  run.jaxpr_pass("dce", [&](const Jaxpr& j) { return dce(j); });
  // Decisions made as IR (docs/primitives.md "Decisions").
  run.pattern_pass("accumulate-products", accumulate_products_patterns());
  run.pattern_pass("move-windows", move_windows_patterns());
  run.pattern_pass("concat-windows", concat_windows_patterns());
  run.pattern_pass("index-runs", index_runs_patterns());
  // Groups are planned under the buffers the program would get (a member is not moved past an
  // in-place write of what it reads), then the fused program gets buffers of its own.
  run.jaxpr_pass("fusion", [&](const Jaxpr& j) {
    return options.naive_buffers ? fuse_elementwise(j, nullptr)
                                 : fuse_elementwise(j, options.buffers);
  });
  run.jaxpr_pass("product-epilogues", [&](const Jaxpr& j) {
    return options.naive_buffers ? j : fuse_product_epilogues(j, options.buffers);
  });
  run.jaxpr_pass("row-loops", [&](const Jaxpr& j) {
    return options.naive_buffers ? j : make_row_loops(j, options.buffers);
  });
  // Last, so that no pass moves an eqn between a start and its wait.
  run.jaxpr_pass("overlap-sums", [&](const Jaxpr& j) {
    return overlap_sums(j, OverlapSumsOptions::from_environment());
  });
  if (run.stopped()) return;

  // Plans the lowering follows.
  t0 = Clock::now();
  if (options.naive_buffers) {
    p.plan = naive_buffer_plan(p.jaxpr);
    run.done("buffers", t0,
             [] { return std::string("naive plan: every value in its own buffer"); });
  } else {
    p.plan.assignment =
        std::make_shared<const BufferAssignment>(assign_buffers(p.jaxpr, options.buffers));
    p.plan.signature = jaxpr_signature(p.jaxpr);
    run.done("buffers", t0, [&] { return print_buffer_plan(p.jaxpr, *p.plan.assignment); });
  }
}

CompileOptions backend_options(const PlannedProgram& planned, const PipelineOptions& options) {
  CompileOptions co = options.compile;
  co.plan = planned.plan;
  co.after_pass = pass_reporter(options);
  return co;
}

}  // namespace

KnownConsts KnownConsts::of(const std::vector<RtValue>& values) {
  KnownConsts known;
  for (const RtValue& v : values) {
    const Array* a = std::get_if<Array>(&v);
    ConstFold fold;
    if (a && a->size() >= 2) {
      const std::byte* p = a->data();
      if (std::all_of(p, p + a->byte_size(), [](std::byte b) { return b == std::byte{0}; })) {
        fold.kind = ConstFold::Kind::zeros;
      } else if (a->rank() == 1 && is_int(a->dtype())) {
        bool run = true;
        for (int64_t i = 1; i < a->size() && run; ++i) run = a->as_int(i) == a->as_int(0) + i;
        if (run) fold = ConstFold{ConstFold::Kind::run, a->as_int(0)};
      }
    }
    known.fold.push_back(fold);
    known.int_range.push_back(a ? element_range(*a) : std::nullopt);
  }
  return known;
}

Jaxpr derive_program(const Jaxpr& program, Derivative derivative, const std::vector<int>& wrt,
                     const KnownConsts& known) {
  if (derivative == Derivative::none) return program;
  const Differentiable d(program, known.int_range, known.fold);
  if (derivative == Derivative::grad) return d.grad(wrt);
  return d.jvp(std::vector<bool>(program.invars.size(), true));
}

void verify_after_pass(const Jaxpr& program, std::string_view pass) {
  try {
    verify(program);
  } catch (const Error& e) {
    throw Error(
        fmt::format("internal error: the program does not verify after pass `{}` ({}); "
                    "`refjit dump --print-after-all` shows what the pass made",
                    pass, e.what()));
  }
}

PassObserver pass_reporter(const PipelineOptions& options) {
  return [after = options.after_pass](const PassReport& r) {
    if (after) after(r);
    report_to_watch(r);
  };
}

PipelineWatch::PipelineWatch(PassObserver observer) {
  std::lock_guard<std::mutex> lock(g_watch_mu);
  if (g_watch) throw Error("a PipelineWatch is already watching; one at a time");
  g_watch = std::move(observer);
}

PipelineWatch::~PipelineWatch() {
  std::lock_guard<std::mutex> lock(g_watch_mu);
  g_watch = nullptr;
}

bool PipelineOptions::verify_each_by_default() {
#ifndef NDEBUG
  return true;
#else
  const char* env = std::getenv("REFJIT_VERIFY_EACH");
  return env && std::string_view(env) != "0" && std::string_view(env) != "";
#endif
}

std::span<const PassInfo> pipeline_passes() { return kPasses; }

bool is_pipeline_pass(std::string_view name) {
  return std::any_of(std::begin(kPasses), std::end(kPasses),
                     [&](const PassInfo& p) { return p.name == name; });
}

PlannedProgram plan_program(const Jaxpr& program, const PipelineOptions& options) {
  Run run(options, {});
  plan(run, program, options);
  return std::move(run.planned());
}

CompiledFunction compile_planned(const PlannedProgram& planned, const PipelineOptions& options) {
  return compile_native(planned.jaxpr, backend_options(planned, options));
}

CompiledFunction compile_program(const Jaxpr& program, const PipelineOptions& options) {
  return compile_planned(plan_program(program, options), options);
}

std::string emit_after(const Jaxpr& program, std::string_view stage,
                       const PipelineOptions& options) {
  if (!is_pipeline_pass(stage)) {
    std::string names;
    for (const PassInfo& p : kPasses)
      names += fmt::format("{}{}", names.empty() ? "" : ", ", p.name);
    throw Error(fmt::format("no pass named '{}'; the passes are {}", stage, names));
  }
  Run run(options, stage);
  plan(run, program, options);
  if (run.stopped()) return run.stop_text();
  const CompileOptions co = backend_options(run.planned(), options);
  const Jaxpr& j = run.planned().jaxpr;
  if (stage == "mlir") return emit_mlir(j, co);
  if (stage == "llvm-dialect") return emit_llvm_dialect(j, co);
  if (stage == "llvm") return emit_llvm_ir(j, co);
  return emit_asm(j, co);
}

std::string print_after_all(const Jaxpr& program, const PipelineOptions& options) {
  std::string out;
  PipelineOptions printing = options;
  printing.after_pass = [&](const PassReport& r) {
    if (options.after_pass) options.after_pass(r);
    std::string text = r.text();
    if (!text.empty() && text.back() != '\n') text += '\n';
    out += fmt::format("# after {}\n{}\n", r.pass, text);
  };
  Run run(printing, {});
  plan(run, program, printing);
  emit_asm(run.planned().jaxpr, backend_options(run.planned(), printing));
  return out;
}

}  // namespace refjit
