// Row loops (backend/row_loops.h): which groups and reductions share one loop over
// the rows, which are kept apart (a read of another row, a column sum, a buffer written and
// read at other rows, rows too long), and that the code gives the interpreter's numbers and
// the same bits with threads, serially and stand-alone.
#include <fmt/format.h>

#include "backend/buffer_plan.h"
#include "backend/row_loops.h"
#include "backend/test_util.h"
#include "driver/pipeline.h"
#include "refjit/ir/verifier.h"

namespace refjit::testing {
namespace {

// The loops of the top-level eqns of `j` once fused, as the row-loops pass plans them (eqn
// indices of the fused program).
RowLoopPlan row_loops_of(const Jaxpr& j) {
  const Jaxpr fused = fuse_product_epilogues(fuse_elementwise(j, BufferOptions{}), BufferOptions{});
  const BufferAssignment assignment = assign_buffers(fused);
  return plan_row_loops(fused, &assignment.top());
}

// The loops the row_loop eqns of `j`'s top level hold.
std::vector<RowLoop> row_loop_eqns(const Jaxpr& j) {
  std::vector<RowLoop> loops;
  for (const Eqn& e : j.eqns)
    if (e.prim == Prim::row_loop)
      loops.push_back(row_loop_of_body(*e.params.get<JaxprPtr>("jaxpr")));
  return loops;
}

// The roots of each loop's items.
std::vector<std::vector<size_t>> loop_roots(const RowLoopPlan& p) {
  std::vector<std::vector<size_t>> roots;
  for (const RowLoop& loop : p.loops) {
    roots.emplace_back();
    for (size_t k = 0; k < loop.items.size(); ++k) roots.back().push_back(loop.items[k].eqn);
  }
  return roots;
}

// JAX's layer norm of [rows, 257] as make_jaxpr prints it, summed; returning `outs`.
std::string layer_norm_text(int rows, std::string_view outs) {
  return fmt::format(R"({{ lambda ; a:f32[{0},257] b:f32[257] c:f32[257]. let
    d:f32[{0}] = reduce_sum[axes=(1,)] a
    e:f32[{0},1] = broadcast_in_dim[broadcast_dimensions=(0,) shape=({0}, 1)] d
    f:f32[{0},1] = div e 257.0:f32[]
    g:f32[{0},257] = sub a f
    h:f32[{0},257] = integer_pow[y=2] g
    i:f32[{0}] = reduce_sum[axes=(1,)] h
    k:f32[{0},1] = broadcast_in_dim[broadcast_dimensions=(0,) shape=({0}, 1)] i
    l:f32[{0},1] = div k 257.0:f32[]
    m:f32[{0},1] = add l 1e-05:f32[]
    n:f32[{0},1] = rsqrt m
    o:f32[{0},257] = sub a f
    p:f32[{0},257] = mul o n
    q:f32[1,257] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(1, 257)] b
    r:f32[{0},257] = mul p q
    s:f32[1,257] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(1, 257)] c
    t:f32[{0},257] = add r s
    u:f32[] = reduce_sum[axes=(0, 1)] t
  in ({1}) }})",
                     rows, outs);
}

TEST(RowLoops, LayerNormAndItsGradientAreOneLoopEach) {
  // Through the whole pipeline: the gradient's column sums (gamma's and beta's gradients) keep
  // a partial per block; the numbers are the interpreter's on the derived program.
  const Jaxpr j = parse_jaxpr(layer_norm_text(96, "u"));
  const std::vector<RtValue> args{random_array(at(DType::f32, {96, 257}), 21),
                                  random_array(at(DType::f32, {257}), 22),
                                  random_array(at(DType::f32, {257}), 23)};
  for (Derivative derivative : {Derivative::none, Derivative::grad}) {
    SCOPED_TRACE(derivative == Derivative::grad ? "gradient" : "forward");
    PipelineOptions options;
    options.derivative = derivative;
    if (derivative == Derivative::grad) options.wrt = {0, 1, 2};
    const PlannedProgram planned = plan_program(j, options);
    const std::vector<RowLoop> loops = row_loop_eqns(planned.jaxpr);
    ASSERT_EQ(loops.size(), 1u) << print_jaxpr(planned.jaxpr);
    bool columns = false;
    for (const RowItem& item : loops[0].items) columns |= item.kind == RowItemKind::columns;
    EXPECT_EQ(columns, derivative == Derivative::grad);
    std::vector<RtValue> a = deep_copy(args), b = deep_copy(args);
    const std::vector<RtValue> got = compile_planned(planned, options)(a);
    const std::vector<RtValue> want = interpret(derive_program(j, derivative, options.wrt), b);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      expect_close(as_array(got[i]), as_array(want[i]), 1e-4, "output " + std::to_string(i));
  }
}

TEST(RowLoops, LayerNormIsOneLoopWithItsTotalCombinedFromRowPartials) {
  // JAX's layer norm as make_jaxpr prints it, summed: the mean, the variance and the
  // normalised rows, then the total of every element (a full reduction: one partial per row).
  const Jaxpr j = parse_jaxpr(layer_norm_text(300, "u, t"));
  const RowLoopPlan p = row_loops_of(j);
  ASSERT_EQ(p.loops.size(), 1u);
  EXPECT_EQ(p.loops[0].rows, 300);
  // Eqns of the fused program (fused eqns hold the chains): the mean, its broadcast row, the
  // variance, the inverse deviation, the rows, the total.
  EXPECT_EQ(loop_roots(p), (std::vector<std::vector<size_t>>{{0, 1, 2, 3, 6, 7}}));
  // b and c to [1, 257] (read at row 0 whatever the row) run before the loop.
  EXPECT_EQ(p.loops[0].passengers, (std::vector<size_t>{4, 5}));
  check_everywhere(j,
                   {random_array(at(DType::f32, {300, 257}), 1),
                    random_array(at(DType::f32, {257}), 2), random_array(at(DType::f32, {257}), 3)},
                   1e-5);
}

TEST(RowLoops, SoftmaxRowsAndTheirMaximaShareALoop) {
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[200,1000]. let
    m:f32[200] = reduce_max[axes=(1,)] x
    mb:f32[200,1000] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(200, 1000)] m
    d:f32[200,1000] = sub x mb
    e:f32[200,1000] = exp d
    s:f32[200] = reduce_sum[axes=(1,)] e
    sb:f32[200,1000] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(200, 1000)] s
    y:f32[200,1000] = div e sb
  in (y,) })");
  const RowLoopPlan p = row_loops_of(j);
  ASSERT_EQ(p.loops.size(), 1u);
  EXPECT_EQ(p.loops[0].items.size(), 4u);  // the maxima, exp(x - max), their sums, the rows
  check_everywhere(j, {random_array(at(DType::f32, {200, 1000}), 4)}, 1e-5);
}

TEST(RowLoops, AReadOfOtherRowsKeepsTheReaderOut) {
  // y reads the row sums s along its columns (s[j] for row i): every row needs all of s, so y
  // cannot run in s's loop; x * 2 reads x row by row with s and shares s's.
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[128,128]. let
    s:f32[128] = reduce_sum[axes=(1,)] x
    t:f32[128,128] = mul x 2.0:f32[]
    sb:f32[128,128] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(128, 128)] s
    y:f32[128,128] = add t sb
  in (y, t) })");
  const RowLoopPlan p = row_loops_of(j);
  EXPECT_EQ(loop_roots(p), (std::vector<std::vector<size_t>>{{0, 1}}));
  check_everywhere(j, {random_array(at(DType::f32, {128, 128}), 5)}, 1e-5);
}

TEST(RowLoops, ColumnSumsFoldBlocksOfRowsIntoPartials) {
  // The column sums of x and its row sums read x once: the loop runs over 32 blocks of 4 rows,
  // each block summing its rows into its own partial column sums, added in block order after
  // the loop (so threads and serial code give the same bits).
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[128,64]. let
    s:f32[64] = reduce_sum[axes=(0,)] x
    r:f32[128] = reduce_max[axes=(1,)] x
  in (s, r) })");
  const RowLoopPlan p = row_loops_of(j);
  ASSERT_EQ(p.loops.size(), 1u);
  EXPECT_EQ(p.loops[0].items.at(0).kind, RowItemKind::columns);
  EXPECT_EQ(p.loops[0].items.at(1).kind, RowItemKind::rows);
  EXPECT_EQ(p.loops[0].block_rows, 128 / kRowBlocks);
  check_everywhere(j, {random_array(at(DType::f32, {128, 64}), 6)}, 1e-5);
}

TEST(RowLoops, AMatrixVectorProductAndItsGradientReadTheMatrixOnce) {
  // value_and_grad of sum(a @ x): the product's rows, their total, and the column sums of a
  // (the gradient with respect to x) share one loop; the product is not a kernel call.
  const Jaxpr j = parse_jaxpr(R"({ lambda ; a:f32[300,200] x:f32[200]. let
    c:f32[300] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a x
    d:f32[] = reduce_sum[axes=(0,)] c
    e:f32[200] = reduce_sum[axes=(0,)] a
  in (d, e, c) })");
  const RowLoopPlan p = row_loops_of(j);
  ASSERT_EQ(p.loops.size(), 1u);
  std::vector<RowItemKind> kinds;
  for (const RowItem& item : p.loops[0].items) kinds.push_back(item.kind);
  EXPECT_EQ(kinds, (std::vector<RowItemKind>{RowItemKind::matvec, RowItemKind::partial,
                                             RowItemKind::columns}));
  EXPECT_EQ(count(emit_mlir(with_fusion(j), kThreads), "refjit_gemm"), 0u);
  check_everywhere(
      j, {random_array(at(DType::f32, {300, 200}), 13), random_array(at(DType::f32, {200}), 14)},
      1e-4);  // sums of hundreds of terms of both signs
}

TEST(RowLoops, LongRowsAreNotRowLoops) {
  // Rows longer than kMaxRowElements do not stay in the cache: separate loops.
  const int64_t n = kMaxRowElements * 2;
  const Jaxpr long_rows = parse_jaxpr(fmt::format(R"({{ lambda ; x:f32[4,{0}]. let
    s:f32[4] = reduce_sum[axes=(1,)] x
    sb:f32[4,{0}] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(4, {0})] s
    y:f32[4,{0}] = sub x sb
  in (y,) }})",
                                                  n));
  EXPECT_TRUE(row_loops_of(long_rows).loops.empty());
  // (Sums of 65,536 floats: the interpreter adds in order, the code in vector lanes.)
  check_everywhere(long_rows, {random_array(at(DType::f32, {4, n}), 7)}, 1e-4);
}

TEST(RowLoops, VectorsAloneAreNotRowLoops) {
  // Over vectors every row is one element: the items' own loops vectorise and a full sum runs
  // in blocks, where a row loop would interleave them element by element.
  const Jaxpr vectors = parse_jaxpr(R"({ lambda ; x:f32[4096]. let
    e:f32[4096] = exp x
    t:f32[4096] = tanh e
    s:f32[] = reduce_sum[axes=(0,)] t
    g:f32[4096] = mul t e
  in (s, g) })");
  EXPECT_TRUE(row_loops_of(vectors).loops.empty());
  check_everywhere(vectors, {random_array(at(DType::f32, {4096}), 8)}, 1e-5);
  // A vector item still joins rows of matrices (a row's mean, [R]).
  const Jaxpr rows = parse_jaxpr(R"({ lambda ; x:f32[64,300]. let
    s:f32[64] = reduce_sum[axes=(1,)] x
    m:f32[64] = div s 300.0:f32[]
    mb:f32[64,300] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(64, 300)] m
    d:f32[64,300] = sub x mb
  in (d, m) })");
  EXPECT_EQ(row_loops_of(rows).loops.size(), 1u);
}

TEST(RowLoops, AnUpdateInPlaceOfAValueReadAtOtherRowsEndsTheLoop) {
  // y reads all of w for each of its rows (w along its columns); v = w * 2 then takes w's
  // buffer in place. In one loop with y, row 0 of v would overwrite w[0] before row 1 of y
  // reads it: v starts a loop of its own, with u (which reads x row by row, like y).
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[64,64] z:f32[64]. let
    w:f32[64] = sin z
    wb:f32[64,64] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(64, 64)] w
    y:f32[64,64] = add x wb
    v:f32[64] = mul w 2.0:f32[]
    vb:f32[64,64] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(64, 64)] v
    p:f32[64,64] = mul x vb
    u:f32[64] = reduce_sum[axes=(1,)] p
  in (y, u) })");
  // (Eqns of the fused program: w, the fused y, v, the fused u.)
  EXPECT_EQ(loop_roots(row_loops_of(j)), (std::vector<std::vector<size_t>>{{2, 3}}));
  check_everywhere(
      j, {random_array(at(DType::f32, {64, 64}), 8), random_array(at(DType::f32, {64}), 9)}, 1e-5);
}

TEST(RowLoops, AReshapedRowResultAndABiasBroadcastRunBeforeTheLoop) {
  // s1 names s's bytes as [128, 1]: a view, lowered before the loop (after s's buffer is
  // made), through which y reads s row by row. bb (b as [1, 64]) reads nothing the loop
  // computes: also before it. Neither splits the loop.
  // (A softmax: the sums are of positive numbers.)
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[128,64] b:f32[64]. let
    e:f32[128,64] = exp x
    s:f32[128] = reduce_sum[axes=(1,)] e
    s1:f32[128,1] = reshape[dimensions=None new_sizes=(128, 1)] s
    bb:f32[1,64] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(1, 64)] b
    y:f32[128,64] = div e s1
    z:f32[128,64] = add y bb
  in (z, s1) })");
  const RowLoopPlan p = row_loops_of(j);
  ASSERT_EQ(p.loops.size(), 1u);
  EXPECT_EQ(p.loops[0].passengers, (std::vector<size_t>{2, 3}));
  check_everywhere(
      j, {random_array(at(DType::f32, {128, 64}), 10), random_array(at(DType::f32, {64}), 11)},
      1e-5);
}

TEST(RowLoops, AnEqnReadingWhatTheLoopComputesEndsIt) {
  // c reads the row sums s whole (a cumulative sum over them): it cannot run before the
  // loop, nor inside it, so the loop ends at it and t, after it, is not in the loop.
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[128,64]. let
    s:f32[128] = reduce_sum[axes=(1,)] x
    m:f32[128] = reduce_max[axes=(1,)] x
    c:f32[128] = cumsum[axis=0 reverse=False] s
    t:f32[128] = reduce_min[axes=(1,)] x
  in (c, m, t) })");
  EXPECT_EQ(loop_roots(row_loops_of(j)), (std::vector<std::vector<size_t>>{{0, 1}}));
  // (A running sum of sums of both signs cancels: its rounding shows at 1e-5.)
  check_everywhere(j, {random_array(at(DType::f32, {128, 64}), 12)}, 1e-4);
}

}  // namespace
}  // namespace refjit::testing

namespace refjit::testing {
namespace {

// A loop whose values nothing reads (dead code a body may still hold) is no row_loop eqn: one
// with no results would compute nothing. Its eqns stay as they were.
TEST(RowLoops, ALoopNobodyReadsStaysItsEqns) {
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[64,128] y:f32[4]. let
    e:f32[64,128] = exp x
    s:f32[64] = reduce_sum[axes=(1,)] e
    b:f32[64,128] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(64, 128)] s
    d:f32[64,128] = div e b
    z:f32[4] = sin y
  in (z,) })");
  const Jaxpr looped = make_row_loops(j, BufferOptions{});
  verify(looped);
  for (const Eqn& e : looped.eqns) EXPECT_NE(e.prim, Prim::row_loop);
  EXPECT_EQ(looped.eqns.size(), j.eqns.size());
  // Read, the same eqns are one loop.
  Jaxpr read = j;
  read.outvars.push_back(read.eqns[3].outs[0]);
  EXPECT_EQ(row_loop_eqns(make_row_loops(read, BufferOptions{})).size(), 1u);
}

}  // namespace
}  // namespace refjit::testing
