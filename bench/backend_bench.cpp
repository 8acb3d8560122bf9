// Native backend microbenchmarks.
//
//   refjit_bench_backend --benchmark_filter=Compile   # per-stage compile latency, both tiers
//   refjit_bench_backend --benchmark_filter=Call      # workspace pool vs malloc per call
//
// Compile benchmarks report each stage as a counter (milliseconds, mean per compile).
#include <benchmark/benchmark.h>

#include <chrono>

#include "backend/native.h"
#include "refjit/ir/text.h"
#include "refjit/refjit.h"

namespace refjit {
namespace {

// The seed's take program, traced through the C++ API.
ClosedJaxpr trace_take(double& trace_ms) {
  auto take = [](Value x, Value i) { return x[i]; };
  Value x = Value(Array(ArrayType{DType::f32, {10}}));
  auto t0 = std::chrono::steady_clock::now();
  ClosedJaxpr j = make_jaxpr(take, "take")(x, Value(3));
  trace_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return j;
}

// A 1000-step scan whose carry is updated by dynamic_update_slice.
const char* kScan = R"({ lambda ; x:f32[1000]. let
    is:i32[1000] = iota[dimension=0 dtype=int32 shape=(1000,) sharding=None]
    y:f32[1000] = scan[jaxpr={ lambda ; c:f32[1000] i:i32[]. let
        v:f32[1] = dynamic_slice[slice_sizes=(1,)] c i
        w:f32[1] = mul v 2.0:f32[]
        n:f32[1000] = dynamic_update_slice c w i
      in (n,) } length=1000 linear=(False, False) num_carry=1 num_consts=0 reverse=False unroll=1 _split_transpose=False] x is
  in (y,) })";

void report(benchmark::State& state, const CompileTimings& sum, double trace_ms, int n) {
  auto ms = [&](double v) { return benchmark::Counter(v / n); };
  state.counters["trace_or_parse_ms"] = benchmark::Counter(trace_ms);
  state.counters["passes_ms"] = ms(sum.passes_ms);
  state.counters["lower_ms"] = ms(sum.lower_ms);
  state.counters["mlir_passes_ms"] = ms(sum.mlir_passes_ms);
  state.counters["llvm_opt_ms"] = ms(sum.llvm_opt_ms);
  state.counters["codegen_ms"] = ms(sum.codegen_ms);
  state.counters["total_ms"] = ms(sum.total_ms() + trace_ms * n);
}

void accumulate(CompileTimings& sum, const CompileTimings& t) {
  sum.passes_ms += t.passes_ms;
  sum.lower_ms += t.lower_ms;
  sum.mlir_passes_ms += t.mlir_passes_ms;
  sum.llvm_opt_ms += t.llvm_opt_ms;
  sum.codegen_ms += t.codegen_ms;
}

void BM_CompileTake(benchmark::State& state) {
  double trace_ms = 0;
  ClosedJaxpr j = trace_take(trace_ms);
  CompileTimings sum;
  int n = 0;
  for (auto _ : state) {
    CompiledFunction f = compile_native(*j.jaxpr, {.opt_level = static_cast<int>(state.range(0))});
    accumulate(sum, f.timings());
    ++n;
  }
  report(state, sum, trace_ms, n);
}
BENCHMARK(BM_CompileTake)->Arg(0)->Arg(3)->Unit(benchmark::kMillisecond);

void BM_CompileScan(benchmark::State& state) {
  auto t0 = std::chrono::steady_clock::now();
  Jaxpr j = parse_jaxpr(kScan);
  double parse_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CompileTimings sum;
  int n = 0;
  for (auto _ : state) {
    CompiledFunction f = compile_native(j, {.opt_level = static_cast<int>(state.range(0))});
    accumulate(sum, f.timings());
    ++n;
  }
  report(state, sum, parse_ms, n);
}
BENCHMARK(BM_CompileScan)->Arg(0)->Arg(3)->Unit(benchmark::kMillisecond);

// Intermediates of 4 MiB each (transpose is not fused), called repeatedly: with the
// workspace pool (arg 1) the pages are allocated and faulted in once; without it (arg 0)
// every call mallocs and frees them.
const char* kBig = R"({ lambda ; x:f32[1024,1024]. let
    t:f32[1024,1024] = transpose[permutation=(1, 0)] x
    u:f32[1024,1024] = transpose[permutation=(1, 0)] t
    s:f32[] = reduce_sum[axes=(0, 1)] u
  in (s,) })";

void BM_CallBigIntermediates(benchmark::State& state) {
  Jaxpr j = parse_jaxpr(kBig);
  BufferPlan plan = default_buffer_plan(j);
  plan.use_workspace = state.range(0) != 0;
  CompiledFunction f = compile_native(j, {.opt_level = 3, .plan = plan});
  std::vector<RtValue> args{Array(ArrayType{DType::f32, {1024, 1024}})};
  for (auto _ : state) benchmark::DoNotOptimize(f(args));
  state.SetLabel(plan.use_workspace ? "workspace pool" : "malloc per call");
}
BENCHMARK(BM_CallBigIntermediates)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// A fused elementwise chain over 1M floats (one loop nest, vectorised).
void BM_CallFusedChain(benchmark::State& state) {
  Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[1048576] y:f32[1048576]. let
    a:f32[1048576] = mul x y
    b:f32[1048576] = add a 2.0:f32[]
    c:f32[1048576] = max b x
  in (c,) })");
  CompiledFunction f = compile_native(j, {.opt_level = 3});
  ArrayType t{DType::f32, {1048576}};
  std::vector<RtValue> args{Array(t), Array(t)};
  for (auto _ : state) benchmark::DoNotOptimize(f(args));
  state.SetBytesProcessed(state.iterations() * 3 * t.byte_size());
}
BENCHMARK(BM_CallFusedChain)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace refjit

BENCHMARK_MAIN();
