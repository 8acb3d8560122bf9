// Large loops on the runtime's threads (backend/parallel_loops.h): which loops are
// outlined, and that their results are the same bits with threads, without them, and in
// `refjit compile` objects (no runtime calls), and match the interpreter. The live-ins cover
// every kind the context carries: memrefs (arguments, workspace views, scan rows), f32 and
// bool scalars, and a scan's index.
#include "backend/parallel_loops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "runtime/kernels/thread_pool.h"
#include "test_util.h"

namespace refjit::testing {
namespace {

size_t parallel_calls(const Jaxpr& j, const CompileOptions& o) {
  return count(emit_mlir(with_fusion(j), o), "call @refjit_parallel_for");
}

TEST(ParallelLoops, LargeElementwiseChainsRunOnThreadsWithTheirScalarsPacked) {
  // s (f32) and p (bool) are loaded before the loop and cross into the outlined body.
  const std::string text = R"({ lambda ; x:f32[N] s:f32[] p:bool[]. let
    a:f32[N] = sin x
    b:f32[N] = mul a s
    c:f32[N] = add b x
    pb:bool[N] = broadcast_in_dim[broadcast_dimensions=() shape=(N,) sharding=None] p
    d:f32[N] = select_n pb x c
  in (d,) })";
  auto with_size = [&](int64_t n) {
    std::string t = text;
    for (size_t at = t.find('N'); at != std::string::npos; at = t.find('N'))
      t.replace(at, 1, std::to_string(n));
    return parse_jaxpr(t);
  };
  const Jaxpr large = with_size(200003);  // not a multiple of anything
  EXPECT_EQ(parallel_calls(large, kThreads), 1u);
  EXPECT_EQ(parallel_calls(large, kSerial), 0u);
  EXPECT_EQ(parallel_calls(large, kStandAlone), 0u);
  EXPECT_EQ(parallel_calls(with_size(1000), kThreads), 0u);  // not worth a thread
  for (bool p : {false, true}) {
    Array flag(at(DType::bool_, {}));
    flag.set_from_double(0, p);
    Array scale(at(DType::f32, {}));
    scale.set_from_double(0, 0.75);
    check_everywhere(large, {random_array(at(DType::f32, {200003}), 1), scale, flag}, 1e-6);
  }
}

TEST(ParallelLoops, FullReductionsSumFixedBlocksSoEveryRunGivesTheSameBits) {
  // Leading dims of extent 1 are skipped: the blocks split the first longer dim.
  for (const char* shape : {"[200000]", "[300,1000]", "[7,5,4000]", "[1,200000]", "[1,1,140000]"}) {
    for (const char* reduce : {"reduce_sum", "reduce_max"}) {
      const auto commas = std::count(shape, shape + std::strlen(shape), ',');
      const std::string axes = commas == 0 ? "(0,)" : commas == 1 ? "(0, 1)" : "(0, 1, 2)";
      const Jaxpr j = parse_jaxpr(fmt::format(
          "{{ lambda ; x:f32{0}. let y:f32{0} = tanh x\n z:f32[] = {1}[axes={2}] y in (z,) }}",
          shape, reduce, axes));
      SCOPED_TRACE(print_jaxpr(j));
      EXPECT_EQ(parallel_calls(j, kThreads), 1u);
      Shape s = j.type_of(j.invars[0]).array.shape;
      check_everywhere(j, {random_array(at(DType::f32, s), 2)}, 1e-4);
    }
  }
}

TEST(ParallelLoops, ColumnReductionsSplitTheirColumnsIntoBlocks) {
  // Reducing leading dims (the gradient of a matrix-vector product with respect to the vector
  // is such a column sum): blocks of the first kept dim run on threads, each summing every row.
  struct Case {
    const char* shape;
    const char* axes;
    const char* result;
  };
  for (const Case& k :
       {Case{"[700,300]", "(0,)", "[300]"}, Case{"[40,40,101]", "(0, 1)", "[101]"},
        Case{"[1000,7,20]", "(0,)", "[7,20]"}, Case{"[150,1000]", "(0,)", "[1000]"}}) {
    for (const char* reduce : {"reduce_sum", "reduce_min"}) {
      const Jaxpr j = parse_jaxpr(fmt::format(
          "{{ lambda ; x:f32{0}. let y:f32{0} = exp x\n z:f32{3} = {1}[axes={2}] y in (z,) }}",
          k.shape, reduce, k.axes, k.result));
      SCOPED_TRACE(print_jaxpr(j));
      EXPECT_EQ(parallel_calls(j, kThreads), 1u);
      Shape s = j.type_of(j.invars[0]).array.shape;
      check_everywhere(j, {random_array(at(DType::f32, s), 4)}, 1e-5);
    }
  }
}

TEST(ParallelLoops, RowReductionsAndBroadcastingGroupsShareOneParallelRowLoop) {
  // Layer-norm-like: a mean per row, then x - mean[:, None], over 512 rows: one row loop
  // (row_loops.h) whose rows run on the threads.
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[512,300]. let
    s:f32[512] = reduce_sum[axes=(1,)] x
    m:f32[512] = div s 300.0:f32[]
    mb:f32[512,300] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(512, 300) sharding=None] m
    d:f32[512,300] = sub x mb
    e:f32[512,300] = mul d d
  in (e, m) })");
  EXPECT_EQ(parallel_calls(j, kThreads), 1u);
  check_everywhere(j, {random_array(at(DType::f32, {512, 300}), 3)}, 1e-5);
}

TEST(ParallelLoops, LargeBroadcastsAndTransposesSplitTheirRows) {
  // The gradient of sum(a @ x) with respect to a is such a broadcast (a 16 MB write at 2048).
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[300] y:f32[500,300]. let
    b:f32[500,300] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(500, 300) sharding=None] x
    t:f32[300,500] = transpose[permutation=(1, 0)] y
  in (b, t) })");
  EXPECT_EQ(parallel_calls(j, kThreads), 2u);
  check_everywhere(
      j, {random_array(at(DType::f32, {300}), 6), random_array(at(DType::f32, {500, 300}), 7)}, 0);
}

TEST(ParallelLoops, ALargeModuleIsCompiledInPiecesOnSeveralThreads) {
  // Four outlined loops, each with inlined polynomial approximations: past the size at which
  // the module is split, its loop bodies compiled on a second thread and linked back.
  // (Each reads its own argument, so no two share a row loop.)
  const Jaxpr j = parse_jaxpr(R"({ lambda ; w:f32[512,300] x:f32[512,300] y:f32[512,300]
      z:f32[512,300]. let
    a:f32[512,300] = exp w
    s:f32[512] = reduce_sum[axes=(1,)] a
    b:f32[512,300] = tanh x
    t:f32[512] = reduce_max[axes=(1,)] b
    c:f32[512,300] = log y
    u:f32[512] = reduce_sum[axes=(1,)] c
    d:f32[512,300] = sin z
    e:f32[512,300] = mul d 2.0:f32[]
  in (s, t, u, e) })");
  EXPECT_GE(parallel_calls(j, kThreads), 4u);
  const WithoutCompilationCache fresh_compiles;
  const CompiledFunction f = compile_native(with_fusion(j), kThreads);
  EXPECT_EQ(f.timings().pieces, std::min(2, kernels::thread_count()));
  EXPECT_EQ(compile_native(with_fusion(j), kSerial).timings().pieces,
            1);  // one function: compiled whole
  std::vector<RtValue> args;
  for (uint32_t seed = 8; seed < 12; ++seed)
    args.push_back(random_array(at(DType::f32, {512, 300}), seed));
  check_everywhere(j, args, 1e-5);
}

TEST(ParallelLoops, LargeTopLevelLoopsBecomeFunctionsCalledDirectly) {
  // A scan over small rows (no parallel loop) with a long body: outlined into a function of its
  // own, called once over all its steps, so that LLVM can compile it beside the entry. The
  // short scan after it stays inline.
  std::string body;
  for (int k = 0; k < 12; ++k)
    body += fmt::format("        t{0}:f32[8] = sin {1}\n        u{0}:f32[8] = mul t{0} x\n", k,
                        k == 0 ? "h" : fmt::format("u{}", k - 1));
  const Jaxpr j = parse_jaxpr(fmt::format(R"({{ lambda ; c0:f32[8] xs:f32[50,8]. let
    c:f32[8] = scan[length=50 num_consts=0 num_carry=1 reverse=False linear=(False, False)
      unroll=1 jaxpr={{ lambda ; h:f32[8] x:f32[8]. let
{}      in (u11,) }}] c0 xs
    d:f32[8] = scan[length=3 num_consts=0 num_carry=1 reverse=False linear=(False,)
      unroll=1 jaxpr={{ lambda ; h:f32[8]. let g:f32[8] = cos h in (g,) }}] c
  in (d,) }})",
                                          body));
  const std::string mlir = emit_mlir(j);
  EXPECT_EQ(count(mlir, "call @refjit_loop_body_"), 1u) << mlir;
  EXPECT_EQ(count(mlir, "call @refjit_parallel_for"), 0u);
  check_everywhere(
      j, {random_array(at(DType::f32, {8}), 9), random_array(at(DType::f32, {50, 8}), 10)}, 1e-5);
}

TEST(ParallelLoops, LoopsInsideAScanBodyCarryTheStepAndTheRows) {
  // Each step's elementwise work is large: it is outlined inside the scan's loop, with the
  // carry, the step's row of xs and the ys row it writes as live-ins.
  const Jaxpr j = parse_jaxpr(R"({ lambda ; c0:f32[140000] xs:f32[3,140000]. let
    c:f32[140000] ys:f32[3,140000] = scan[length=3 num_consts=0 num_carry=1 reverse=False
      linear=(False, False) unroll=1 jaxpr={ lambda ; h:f32[140000] x:f32[140000]. let
        a:f32[140000] = sin x
        b:f32[140000] = mul h 0.5:f32[]
        n:f32[140000] = add a b
        y:f32[140000] = cos n
      in (n, y) }] c0 xs
  in (c, ys) })");
  EXPECT_GE(parallel_calls(j, kThreads), 1u);
  check_everywhere(
      j, {random_array(at(DType::f32, {140000}), 4), random_array(at(DType::f32, {3, 140000}), 5)},
      1e-5);
}

}  // namespace
}  // namespace refjit::testing
