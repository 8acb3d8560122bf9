// One program, four front doors: jit, `refjit run` (compile_program), `refjit dump`
// (emit_after) and `refjit compile` (compile_to_object) all run the one pipeline
// (driver/pipeline.h), so each yields the same buffer plan, the same lowering decisions and
// the same MLIR. Checked with a PipelineWatch, which sees every pass of every run.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "refjit/aot.h"
#include "refjit/ir/text.h"
#include "refjit/refjit.h"

namespace refjit {
namespace {

// The seed's shape in small: a scan that moves a 1x2 window of its state one column right
// per step (dynamic_slice + dynamic_update_slice, updated in place), then a fused
// elementwise loss. Its gradient adds a transposed scan with ref accumulators.
Value shift_loss(Value state, Value cols, Value w) {
  auto [final_state, ys] = scan(
      [](Value s, Value c) {
        Value zero = Value(int32_t{0});
        Value window = dynamic_slice(s, {zero, c}, {1, 2});
        Value next = dynamic_update_slice(s, window, {zero, c + Value(int32_t{1})});
        return std::pair{next, std::tuple{}};
      },
      state, cols);
  Value d = exp(final_state * w) - final_state;
  return reduce_sum(d * d);
}

Value fresh_state() { return array<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}); }
Value fresh_cols() { return array<int32_t>({0, 1, 0}, {3}); }

// The texts of the watched passes, per pass name, in the order the runs reported them.
class Recorder {
 public:
  PassObserver observer() {
    return [this](const PassReport& r) {
      if (r.pass != "buffers" && r.pass != "fusion" && r.pass != "row-loops" && r.pass != "mlir")
        return;
      std::lock_guard<std::mutex> lock(mu_);
      texts_[std::string(r.pass)].push_back(r.text());
    };
  }
  // The one text `pass` printed in the runs since the last take; fails if there were several
  // and they differ, or none.
  std::string take(const std::string& pass) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> seen = std::move(texts_[pass]);
    texts_[pass].clear();
    EXPECT_FALSE(seen.empty()) << "no run reported pass " << pass;
    if (seen.empty()) return "";
    for (const std::string& s : seen) EXPECT_EQ(s, seen.front()) << pass;
    return seen.front();
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::vector<std::string>> texts_;
};

TEST(PipelineDoors, JitRunDumpAndCompileYieldTheSamePlanAndMlir) {
  Recorder seen;
  PipelineWatch watch(seen.observer());
  auto grad_fn = grad(shift_loss, 2);

  // jit: traces the gradient, then compiles the traced program through the pipeline.
  // (At -O3 from the first call, as the other doors compile: float sums may be vectorised,
  // so -O0 code can differ from it in the last bits; docs/backend.md.)
  auto jitted =
      jit(grad_fn, {.backend = Backend::native, .tier = Tier::optimized, .name = "doors_grad"});
  Value g = jitted(fresh_state(), fresh_cols(), Value(0.5f));
  const std::string jit_buffers = seen.take("buffers");
  const std::string jit_fusion = seen.take("fusion");
  const std::string jit_row_loops = seen.take("row-loops");
  const std::string jit_mlir = seen.take("mlir");

  // The same program as a file would hold it: printed and parsed back.
  ClosedJaxpr traced = make_jaxpr(grad_fn)(fresh_state(), fresh_cols(), Value(0.5f));
  ASSERT_TRUE(traced.consts.empty()) << "the doors compare programs without captured values";
  const Jaxpr program = parse_jaxpr(print_jaxpr(*traced.jaxpr));

  // refjit run: compile_program.
  CompiledFunction run = compile_program(program, PipelineOptions{});
  EXPECT_EQ(seen.take("buffers"), jit_buffers);
  EXPECT_EQ(seen.take("fusion"), jit_fusion);
  EXPECT_EQ(seen.take("row-loops"), jit_row_loops);
  EXPECT_EQ(seen.take("mlir"), jit_mlir);
  std::vector<RtValue> out =
      run({fresh_state().array(), fresh_cols().array(), Value(0.5f).array()});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(std::get<Array>(out[0]), g.array());

  // refjit dump --emit=buffers|fusion|mlir: emit_after.
  EXPECT_EQ(emit_after(program, "buffers", {}), jit_buffers);
  EXPECT_EQ(emit_after(program, "fusion", {}), jit_fusion);
  EXPECT_EQ(emit_after(program, "row-loops", {}), jit_row_loops);
  EXPECT_EQ(emit_after(program, "mlir", {}), jit_mlir);
  seen.take("buffers");
  seen.take("fusion");
  seen.take("row-loops");
  seen.take("mlir");

  // refjit compile: compile_to_object lowers the same module before adding its C wrapper.
  AotOptions aot;
  aot.name = "doors_grad";
  compile_to_object(program, aot);
  EXPECT_EQ(seen.take("buffers"), jit_buffers);
  EXPECT_EQ(seen.take("fusion"), jit_fusion);
  EXPECT_EQ(seen.take("row-loops"), jit_row_loops);
  EXPECT_EQ(seen.take("mlir"), jit_mlir);

  // What was compared is not trivial: the update is in place and something was decided.
  EXPECT_NE(jit_buffers.find("in place"), std::string::npos) << jit_buffers;
  EXPECT_NE(jit_fusion.find("fused["), std::string::npos) << jit_fusion;
  EXPECT_NE(jit_mlir.find("func.func @refjit_main"), std::string::npos);
}

TEST(Pipeline, PassesRunInTheListedOrderAndEachReportsOnce) {
  std::vector<std::string> order;
  PipelineOptions options;
  options.after_pass = [&](const PassReport& r) { order.emplace_back(r.pass); };
  Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[4]. let
      y:f32[4] = mul x x
      z:f32[4] = exp y
    in (z,) })");
  (void)print_after_all(j, options);
  std::vector<std::string> listed;
  for (const PassInfo& p : pipeline_passes()) listed.emplace_back(p.name);
  EXPECT_EQ(order, listed);
}

TEST(Pipeline, EmitAfterStopsAtThePassAndNamesUnknownOnes) {
  int reports = 0;
  PipelineOptions options;
  options.after_pass = [&](const PassReport&) { ++reports; };
  Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[4]. let
      d:f32[4] = neg x
      y:f32[4] = mul x x
    in (y,) })");
  std::string after_dce = emit_after(j, "dce", options);
  EXPECT_EQ(reports, 11);  // autodiff .. dce
  EXPECT_EQ(after_dce.find("neg"), std::string::npos) << after_dce;
  EXPECT_NE(emit_after(j, "autodiff", {}).find("neg"), std::string::npos);
  try {
    emit_after(j, "bufers", {});
    ADD_FAILURE() << "an unknown pass name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no pass named 'bufers'"), std::string::npos);
  }
}

TEST(Pipeline, AProgramBrokenByAPassIsReportedWithThePassName) {
  // As if a pass had given an eqn's result a type its rule does not give.
  Jaxpr broken = parse_jaxpr(R"({ lambda ; x:f32[4]. let
      y:f32[4] = neg x
    in (y,) })");
  broken.vars[broken.eqns[0].outs[0].id].type = Type(ArrayType{DType::f32, {5}});
  try {
    verify_after_pass(broken, "dead-regions");
    ADD_FAILURE() << "a broken program verified";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("does not verify after pass `dead-regions`"), std::string::npos) << m;
    EXPECT_NE(m.find("--print-after-all"), std::string::npos) << m;
  }
}

TEST(Pipeline, KnownZeroConstantsAreFoldedAndNoLongerPassed) {
  Jaxpr j = parse_jaxpr(R"({ lambda a:f32[3] b:i32[] ; x:f32[3]. let
      y:f32[3] = add x a
    in (y,) })");
  PipelineOptions options;
  options.consts.fold = {ConstFold{ConstFold::Kind::zeros}, ConstFold{}};
  PlannedProgram p = plan_program(j, options);
  EXPECT_EQ(p.consts_kept, (std::vector<bool>{false, true}));
  EXPECT_EQ(p.jaxpr.constvars.size(), 1u);
  CompiledFunction f = compile_planned(p, options);
  std::vector<RtValue> out = f({Value(int32_t{7}).array(), array<float>({1, 2, 3}, {3}).array()});
  EXPECT_EQ(std::get<Array>(out[0]), Array::from_vector<float>({1, 2, 3}, {3}));
}

}  // namespace
}  // namespace refjit
