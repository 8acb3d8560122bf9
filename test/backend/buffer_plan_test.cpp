// The native backend follows the buffer assignment (docs/buffers.md): results with the plan
// equal results with every value in its own buffer (the naive plan) and the interpreter's,
// and the code copies only what the plan lists (counted through BufferPlan::counts, and
// read off the emitted MLIR for the seed's 1000-step scan).
#include <fmt/format.h>

#include "test_util.h"

namespace refjit::testing {
namespace {

// A scan over `body` (num_consts = 0) returning `outs`.
std::string scan_program(const std::string& params, const std::string& body,
                         const std::string& outs, const std::string& ins, int length, int num_carry,
                         int num_operands, const std::string& results) {
  std::string linear = "(";
  for (int k = 0; k < num_operands; ++k) linear += k ? ", False" : "False";
  linear += num_operands == 1 ? ",)" : ")";
  return fmt::format(
      "{{ lambda ; {}. let\n  {} = scan[_split_transpose=False jaxpr={} length={} linear={} "
      "num_carry={} num_consts=0 reverse=False unroll=1] {}\n in {} }}",
      params, outs, body, length, linear, num_carry, ins, results);
}

// The seed's insert_fn in mode slice1 on a state f32[rows, 2*cols]: shift the segment
// [col, col+cols) right by one and put v at col.
std::string slice1_body(int rows, int cols) {
  return fmt::format(
      R"({{ lambda ; c:f32[{0},{1}] row:i32[] col:i32[] v:f32[]. let
      sl:f32[1,{2}] = dynamic_slice[slice_sizes=(1, {2})] c row col
      vb:f32[1,1] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 1) sharding=None] v
      u:f32[1,{3}] = concatenate[dimension=1] vb sl
      c2:f32[{0},{1}] = dynamic_update_slice c u row col
    in (c2,) }})",
      rows, 2 * cols, cols, cols + 1);
}

std::string slice1_scan(int rows, int cols, int steps) {
  return scan_program(
      fmt::format("s:f32[{0},{1}] rs:i32[{2}] cs:i32[{2}] vs:f32[{2}]", rows, 2 * cols, steps),
      slice1_body(rows, cols), fmt::format("r:f32[{},{}]", rows, 2 * cols), "s rs cs vs", steps, 1,
      4, "(r,)");
}

// The seed's slow_pop (reads the popped value before the shift) and fast_pop (parks it in
// the spare last column first), N_COLS = 4, state f32[4,9].
const char* kSlowPopBody = R"({ lambda ; c:f32[4,9] row:i32[] col:i32[]. let
      v1:f32[1,1] = dynamic_slice[slice_sizes=(1, 1)] c row col
      v:f32[] = squeeze[dimensions=(0, 1)] v1
      col1:i32[] = add col 1:i32[]
      u:f32[1,4] = dynamic_slice[slice_sizes=(1, 4)] c row col1
      c2:f32[4,9] = dynamic_update_slice c u row col
    in (c2, v) })";

const char* kFastPopBody = R"({ lambda ; c:f32[4,9] row:i32[] col:i32[]. let
      v1:f32[1,1] = dynamic_slice[slice_sizes=(1, 1)] c row col
      c1:f32[4,9] = dynamic_update_slice c v1 row 8:i32[]
      col1:i32[] = add col 1:i32[]
      u:f32[1,4] = dynamic_slice[slice_sizes=(1, 4)] c1 row col1
      c2:f32[4,9] = dynamic_update_slice c1 u row col
      w1:f32[1,1] = dynamic_slice[slice_sizes=(1, 1)] c2 row 8:i32[]
      w:f32[] = squeeze[dimensions=(0, 1)] w1
    in (c2, w) })";

std::string pop_scan(const char* body) {
  return scan_program("s:f32[4,9] rs:i32[6] cs:i32[6]", body, "r:f32[4,9] ys:f32[6]", "s rs cs", 6,
                      1, 3, "(r, ys)");
}

std::vector<RtValue> pop_args() {
  return {random_array(at(DType::f32, {4, 9}), 7),
          Array::from_vector<int32_t>({0, 1, 0, 3, 2, 0}, {6}),
          Array::from_vector<int32_t>({0, 2, 0, 4, 1, 0}, {6})};
}

std::vector<RtValue> slice1_args(int rows, int cols, int steps) {
  std::mt19937 rng(3);
  std::vector<int32_t> r(steps), c(steps);
  for (int t = 0; t < steps; ++t) {
    r[t] = static_cast<int32_t>(rng() % rows);
    c[t] = static_cast<int32_t>(rng() % cols);
  }
  return {random_array(at(DType::f32, {rows, 2 * cols}), 1),
          Array::from_vector<int32_t>(r, {steps}), Array::from_vector<int32_t>(c, {steps}),
          random_array(at(DType::f32, {steps}), 2)};
}

struct Lowered {
  std::vector<RtValue> outs, args;  // args: after the call (refs updated)
  LoweringCounts counts;
};

Lowered run_with(const Jaxpr& j, const std::vector<RtValue>& args, BufferPlan plan) {
  plan.counts = std::make_shared<LoweringCounts>();
  Lowered r;
  r.args = deep_copy(args);
  CompiledFunction f = compile_native(j, {.opt_level = 1, .plan = plan});
  r.outs = f(r.args);
  r.counts = *plan.counts;
  return r;
}

// The plan's results equal the naive plan's and the interpreter's, outputs and refs alike
// (exactly: both plans compute the same operations in the same order).
void expect_plan_matches_naive(const Jaxpr& j, const std::vector<RtValue>& args,
                               const BufferPlan& plan, Lowered* planned = nullptr,
                               Lowered* naive = nullptr) {
  Lowered p = run_with(j, args, plan);
  Lowered n = run_with(j, args, naive_buffer_plan(j));
  std::vector<RtValue> ia = deep_copy(args);
  std::vector<RtValue> want = interpret(j, ia);
  ASSERT_EQ(p.outs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    expect_close(as_array(p.outs[i]), as_array(n.outs[i]), 0, fmt::format("output {}", i));
    expect_close(as_array(p.outs[i]), as_array(want[i]), 1e-6, fmt::format("output {}", i));
  }
  for (size_t i = 0; i < args.size(); ++i)
    if (auto* r = std::get_if<RefBufferPtr>(&p.args[i])) {
      expect_close((*r)->value(), std::get<RefBufferPtr>(n.args[i])->value(), 0,
                   fmt::format("ref {}", i));
      expect_close((*r)->value(), std::get<RefBufferPtr>(ia[i])->value(), 1e-6,
                   fmt::format("ref {}", i));
    }
  // Inputs that are not refs are never written.
  for (size_t i = 0; i < args.size(); ++i)
    if (auto* a = std::get_if<Array>(&p.args[i]))
      expect_close(*a, as_array(args[i]), 0, fmt::format("input {} unchanged", i));
  if (planned) *planned = std::move(p);
  if (naive) *naive = std::move(n);
}

TEST(NativeBufferPlan, Slice1ScanUpdatesTheCarryInPlace) {
  Jaxpr j = parse_jaxpr(slice1_scan(4, 4, 6));
  BufferPlan plan = default_buffer_plan(j);
  Lowered p, n;
  expect_plan_matches_naive(j, slice1_args(4, 4, 6), plan, &p, &n);
  // Per iteration nothing is copied whole; the only copy is the non-donated initial state
  // into the carry buffer (the output array), once, before the loop.
  EXPECT_EQ(p.counts.copies_in_loops, 0);
  EXPECT_EQ(p.counts.copies_outside, 1);
  EXPECT_EQ(p.counts.bytes_outside, 4 * 8 * 4);
  EXPECT_EQ(plan.assignment->stats().whole_outside, 1);
  // Every value in its own buffer: the update copies the carry, then it is copied back.
  EXPECT_EQ(n.counts.copies_in_loops, 2);
  EXPECT_EQ(n.counts.bytes_in_loops, 2 * 4 * 8 * 4);
}

TEST(NativeBufferPlan, SlowPopCopiesOnlyThePoppedScalarPerStep) {
  Jaxpr j = parse_jaxpr(pop_scan(kSlowPopBody));
  BufferPlan plan = default_buffer_plan(j);
  Lowered p;
  expect_plan_matches_naive(j, pop_args(), plan, &p);
  EXPECT_EQ(p.counts.copies_in_loops, 1);  // y into row t of ys
  EXPECT_EQ(p.counts.bytes_in_loops, 4);
  EXPECT_EQ(p.counts.copies_outside, 1);  // the initial state, 144 bytes
  EXPECT_EQ(p.counts.bytes_outside, 144);
}

TEST(NativeBufferPlan, FastPopCopiesOnlyThePoppedScalarPerStep) {
  Jaxpr j = parse_jaxpr(pop_scan(kFastPopBody));
  BufferPlan plan = default_buffer_plan(j);
  Lowered p;
  expect_plan_matches_naive(j, pop_args(), plan, &p);
  EXPECT_EQ(p.counts.copies_in_loops, 1);
  EXPECT_EQ(p.counts.bytes_in_loops, 4);
  EXPECT_EQ(p.counts.copies_outside, 1);
}

TEST(NativeBufferPlan, DonatedStateIsUpdatedInPlaceAndReturned) {
  Jaxpr j = parse_jaxpr(slice1_scan(4, 4, 6));
  BufferOptions o;
  o.donated = {true};
  o.fail_on_copy = true;
  BufferPlan plan = default_buffer_plan(j, o);
  EXPECT_EQ(plan.assignment->stats().whole_outside, 0);
  Lowered p;
  expect_plan_matches_naive(j, slice1_args(4, 4, 6), plan, &p);
  // The runtime hands inputs in read-only, so the donated state is moved into its output
  // on entry (the one copy); the loop then updates it there.
  EXPECT_EQ(p.counts.copies_in_loops, 0);
  EXPECT_EQ(p.counts.copies_outside, 1);
}

TEST(NativeBufferPlan, DonatedInputUpdateWritesOnlyTheRegion) {
  Jaxpr j = parse_jaxpr(R"({ lambda ; a:f32[8] b:f32[2] i:i32[]. let
      c:f32[8] = dynamic_update_slice a b i
      d:f32[8] = mul c 2.0:f32[]
    in (d,) })");
  BufferOptions o;
  o.donated = {true};
  BufferPlan plan = default_buffer_plan(j, o);
  const JaxprBuffers& top = plan.assignment->top();
  EXPECT_EQ(top.eqns[0].action, EqnAction::in_place);
  EXPECT_EQ(top.eqns[1].action, EqnAction::in_place);
  std::vector<RtValue> args{random_array(at(DType::f32, {8}), 1),
                            random_array(at(DType::f32, {2}), 2), Array::scalar<int32_t>(5)};
  Lowered p;
  expect_plan_matches_naive(j, args, plan, &p);
  EXPECT_EQ(p.counts.copies_outside, 1);  // the entry move of the donated input
  EXPECT_EQ(p.counts.bytes_outside, 32);
}

TEST(NativeBufferPlan, WholeGetThenWholeSwapIsAMove) {
  Jaxpr j = parse_jaxpr(R"({ lambda ; r:Ref{f32[4,9]} b:f32[1,3] i:i32[] k:i32[]. let
      x:f32[4,9] <- r[...]
      y:f32[4,9] = dynamic_update_slice x b i k
      z:f32[4,9] = mul y 3.0:f32[]
      r[...] <- z
    in () })");
  BufferPlan plan = default_buffer_plan(j);
  const JaxprBuffers& top = plan.assignment->top();
  EXPECT_EQ(top.eqns[0].action, EqnAction::view);
  EXPECT_EQ(top.eqns[1].action, EqnAction::in_place);
  EXPECT_EQ(top.eqns[3].action, EqnAction::no_op);
  std::vector<RtValue> args{ref_of(random_array(at(DType::f32, {4, 9}), 1)),
                            random_array(at(DType::f32, {1, 3}), 2), Array::scalar<int32_t>(2),
                            Array::scalar<int32_t>(4)};
  Lowered p;
  expect_plan_matches_naive(j, args, plan, &p);
  EXPECT_EQ(p.counts.copies_in_loops + p.counts.copies_outside, 0);
}

TEST(NativeBufferPlan, NewRefTakesOverADeadValue) {
  Jaxpr j = parse_jaxpr(R"({ lambda ; a:f32[6] v:f32[]. let
      x:f32[6] = sin a
      r:Ref{f32[6]} = new_ref x
      r[2] += v
      o:f32[6] <- r[...]
      w:f32[6] = freeze r
      s:f32[6] = add o w
    in (s,) })");
  BufferPlan plan = default_buffer_plan(j);
  EXPECT_EQ(plan.assignment->top().eqns[1].action, EqnAction::move);
  Lowered p;
  expect_plan_matches_naive(j, {random_array(at(DType::f32, {6}), 1), Array::scalar<float>(2)},
                            plan, &p);
  EXPECT_EQ(p.counts.copies_in_loops + p.counts.copies_outside, 0);
}

// Fused into s, w would read `x` at s's position, after the in-place update overwrote x:
// planned under the program's buffers, fusion leaves w at its own position and the update stays
// in place. Fused without buffers, the fused eqn reads x there, so the update gets a copy.
TEST(NativeBufferPlan, FusionDoesNotMoveAReadPastAnInPlaceWrite) {
  Jaxpr j = parse_jaxpr(R"({ lambda ; a:f32[8] b:f32[2] i:i32[]. let
      x:f32[8] = mul a 2.0:f32[]
      w:f32[8] = neg x
      z:f32[8] = dynamic_update_slice x b i
      s:f32[8] = add w z
    in (s,) })");
  auto count_fused = [](const Jaxpr& k) {
    return std::count_if(k.eqns.begin(), k.eqns.end(),
                         [](const Eqn& e) { return e.prim == Prim::fused; });
  };
  std::vector<RtValue> args{random_array(at(DType::f32, {8}), 1),
                            random_array(at(DType::f32, {2}), 2), Array::scalar<int32_t>(1)};
  const Jaxpr planned = fuse_elementwise(j, BufferOptions{});
  EXPECT_EQ(count_fused(planned), 0);
  BufferPlan plan = default_buffer_plan(planned);
  ASSERT_EQ(plan.assignment->top().eqns[2].action, EqnAction::in_place);
  Lowered p;
  expect_plan_matches_naive(planned, args, plan, &p);
  EXPECT_EQ(p.counts.fused_groups, 0);

  const Jaxpr unplanned = fuse_elementwise(j, nullptr);
  ASSERT_EQ(count_fused(unplanned), 1);  // {w, s}
  plan = default_buffer_plan(unplanned);
  ASSERT_EQ(unplanned.eqns[1].prim, Prim::dynamic_update_slice);
  EXPECT_NE(plan.assignment->top().eqns[1].action, EqnAction::in_place);
  Lowered u;
  expect_plan_matches_naive(unplanned, args, plan, &u);
  EXPECT_EQ(u.counts.fused_groups, 1);
}

TEST(NativeBufferPlan, AnInPlaceWriteThatIsFusedAwayDoesNotKeepAReaderOutOfItsGroup) {
  // h = add f 1 is planned over f's buffer (f's last read), after g = log1p f reads f. But h is
  // a member of k's group, so it is never stored: g joins t's group (as in the gradient of
  // sum(tanh(2 exp(-x^2) + log1p(x^2)))), and no log1p value is written to memory.
  Jaxpr j = parse_jaxpr(R"({ lambda ; a:f32[64]. let
      f:f32[64] = mul a a
      g:f32[64] = log1p f
      h:f32[64] = add f 1.0:f32[]
      i:f32[64] = div 1.0:f32[] h
      t:f32[64] = tanh g
      k:f32[64] = mul i t
    in (t, k) })");
  const BufferPlan unfused = default_buffer_plan(j);
  ASSERT_EQ(unfused.assignment->top().eqns[2].action, EqnAction::in_place);
  const Jaxpr planned = fuse_elementwise(j, BufferOptions{});
  ASSERT_EQ(planned.eqns.size(), 2u) << print_jaxpr(planned);  // {f, g, t} and {f, h, i, k}
  auto has = [](const Jaxpr& body, Prim p) {
    return std::any_of(body.eqns.begin(), body.eqns.end(),
                       [p](const Eqn& e) { return e.prim == p; });
  };
  ASSERT_EQ(planned.eqns[0].prim, Prim::fused);
  ASSERT_EQ(planned.eqns[1].prim, Prim::fused);
  const Jaxpr& first = *planned.eqns[0].params.get<JaxprPtr>("jaxpr");
  EXPECT_TRUE(has(first, Prim::log1p) && has(first, Prim::tanh)) << print_jaxpr(planned);
  std::vector<RtValue> args{random_array(at(DType::f32, {64}), 3)};
  expect_plan_matches_naive(planned, args, default_buffer_plan(planned));
}

TEST(NativeBufferPlan, CarryOutComputedInTheCarryBuffer) {
  // o is fresh, but the carry's old contents are dead once s is read: o (with m fused into
  // it) is computed straight into the carry buffer.
  Jaxpr j = parse_jaxpr(scan_program("c:f32[8] xs:f32[5,8]", R"({ lambda ; k:f32[8] x:f32[8]. let
        s:f32[] = reduce_sum[axes=(0,)] k
        m:f32[8] = mul x 2.0:f32[]
        o:f32[8] = mul m s
      in (o, s) })",
                                     "r:f32[8] ys:f32[5]", "c xs", 5, 1, 2, "(r, ys)"));
  BufferPlan plan = default_buffer_plan(j);
  EXPECT_EQ(plan.assignment->stats().whole_in_loop, 0);
  Lowered p;
  expect_plan_matches_naive(
      j, {random_array(at(DType::f32, {8}), 1), random_array(at(DType::f32, {5, 8}), 2)}, plan, &p);
  EXPECT_EQ(p.counts.copies_in_loops, 1);  // only y = s into its row
  EXPECT_EQ(p.counts.bytes_in_loops, 4);
}

TEST(NativeBufferPlan, CarryOutCopiedBackWhenThePlanSaysSo) {
  // m is put in the carry buffer (the carry is dead after it), so the fresh carry-out o
  // must be copied in at the end of each iteration: the one whole copy the plan lists.
  Jaxpr j = parse_jaxpr(scan_program("c:f32[8] xs:f32[5,8]", R"({ lambda ; k:f32[8] x:f32[8]. let
        m:f32[8] = mul k x
        n:f32[8] = sin m
        o:f32[8] = add n x
      in (o, m) })",
                                     "r:f32[8] ys:f32[5,8]", "c xs", 5, 1, 2, "(r, ys)"));
  BufferPlan plan = default_buffer_plan(j);
  CopyStats st = plan.assignment->stats();
  EXPECT_EQ(st.whole_in_loop, 1);
  EXPECT_EQ(st.read, 1);
  Lowered p;
  expect_plan_matches_naive(
      j, {random_array(at(DType::f32, {8}), 1), random_array(at(DType::f32, {5, 8}), 2)}, plan, &p);
  EXPECT_EQ(p.counts.copies_in_loops, st.whole_in_loop + st.read);
  EXPECT_EQ(p.counts.bytes_in_loops, st.whole_in_loop_bytes + st.read_bytes);
}

TEST(NativeBufferPlan, PermutedCarriesCondAndJitAgreeWithTheNaivePlan) {
  std::vector<std::pair<std::string, std::vector<RtValue>>> cases = {
      {scan_program("a:i32[2] b:i32[2]", "{ lambda ; p:i32[2] q:i32[2]. let  in (q, p) }",
                    "c:i32[2] d:i32[2]", "a b", 3, 2, 2, "(c, d)"),
       {Array::from_vector<int32_t>({1, 2}, {2}), Array::from_vector<int32_t>({3, 4}, {2})}},
      {R"({ lambda ; p:i32[] a:f32[4] b:f32[1] i:i32[]. let
          x:f32[4] = sin a
          y:f32[4] = cond[branches=(
            { lambda ; u:f32[4] v:f32[1] j:i32[]. let w:f32[4] = dynamic_update_slice u v j in (w,) }
            { lambda ; u:f32[4] v:f32[1] j:i32[]. let in (u,) }
          )] p x b i
          z:f32[4] = add x y
        in (z, y) })",
       {Array::scalar<int32_t>(0), random_array(at(DType::f32, {4}), 1),
        random_array(at(DType::f32, {1}), 2), Array::scalar<int32_t>(2)}},
      {R"({ lambda ; a:f32[4] b:f32[1] i:i32[]. let
          x:f32[4] = sin a
          y:f32[4] q:f32[4] = jit[name=upd jaxpr={ lambda ; u:f32[4] v:f32[1] j:i32[]. let
              w:f32[4] = dynamic_update_slice u v j
              t:f32[4] = cos w
            in (w, t) }] x b i
          z:f32[4] = add y q
        in (z, y, 1.0:f32[]) })",
       {random_array(at(DType::f32, {4}), 1), random_array(at(DType::f32, {1}), 2),
        Array::scalar<int32_t>(1)}},
  };
  // The other branch of the cond returns its operand, which is copied into the result.
  cases.push_back(cases[1]);
  cases.back().second[0] = Array::scalar<int32_t>(1);
  for (auto& [text, args] : cases) {
    SCOPED_TRACE(text);
    Jaxpr j = parse_jaxpr(text);
    expect_plan_matches_naive(j, args, default_buffer_plan(j));
  }
}

TEST(NativeBufferPlan, ViewsOfRowsAndOfLiteralsFollowThePlan) {
  // x is a row of xs (a view with an offset): its reshape is a view too, read in place.
  Jaxpr j =
      parse_jaxpr(scan_program("c:f32[6] xs:f32[4,2,3]", R"({ lambda ; k:f32[6] x:f32[2,3]. let
        f:f32[6] = reshape[dimensions=None new_sizes=(6,)] x
        o:f32[6] = add k f
        g:f32[3,2] = reshape[dimensions=None new_sizes=(3, 2)] o
      in (o, g) })",
                               "r:f32[6] ys:f32[4,3,2]", "c xs", 4, 1, 2, "(r, ys)"));
  Lowered p;
  expect_plan_matches_naive(
      j, {random_array(at(DType::f32, {6}), 1), random_array(at(DType::f32, {4, 2, 3}), 2)},
      default_buffer_plan(j), &p);
  EXPECT_EQ(p.counts.copies_in_loops, 1);  // y g into its row; o is computed in the carry
  // A view of a literal returned as an output lands in that output.
  Jaxpr k = parse_jaxpr(R"({ lambda ; a:f32[1]. let
      b:f32[1] = expand_dims[dimensions=(0,)] 1.5:f32[]
      c:f32[1] = add a b
    in (b, c) })");
  expect_plan_matches_naive(k, {random_array(at(DType::f32, {1}), 1)}, default_buffer_plan(k));
}

// The seed's sizes (N_STEPS = 1000, N_ROWS = 100, N_COLS = 500): the scan's loop allocates
// and copies nothing of the state's size; the one copy of the state (the non-donated
// initial value into the output) runs before the loop.
TEST(NativeBufferPlan, SeedScanLoopHasNoStateSizedCopyOrAllocation) {
  Jaxpr j = parse_jaxpr(slice1_scan(100, 500, 1000));
  std::string mlir = emit_mlir(j);
  const std::string state = "memref<100x1000xf32>";
  size_t loop = mlir.find("scf.for");
  ASSERT_NE(loop, std::string::npos);
  size_t copy = mlir.find("memref.copy");
  ASSERT_NE(copy, std::string::npos);
  EXPECT_LT(copy, loop);
  EXPECT_EQ(mlir.find("memref.copy", copy + 1), std::string::npos);
  EXPECT_EQ(mlir.find("-> " + state), std::string::npos);  // no view/alloc of that size
  EXPECT_EQ(mlir.find("memref.alloc"), std::string::npos);
  // The naive plan copies the state inside the loop.
  std::string naive = emit_mlir(j, {.plan = naive_buffer_plan(j)});
  size_t naive_loop = naive.find("scf.for");
  EXPECT_NE(naive.find("memref.copy", naive_loop), std::string::npos);
}

TEST(NativeBufferPlan, PlanForAnotherJaxprIsRejected) {
  Jaxpr j = parse_jaxpr(slice1_scan(4, 4, 6));
  Jaxpr other = parse_jaxpr(pop_scan(kSlowPopBody));
  try {
    emit_mlir(j, {.plan = default_buffer_plan(other)});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("computed for another jaxpr"), std::string::npos);
  }
}

}  // namespace
}  // namespace refjit::testing
