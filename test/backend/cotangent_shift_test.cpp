// Cotangent shifts: the shift-adds pass (passes/simplify/shift_adds.h) makes
// `v, R[w1] <- R[w1], zeros` whose old value (or a static slice of it) is added back at R[w2]
// one shift_add eqn, lowered as one pass over w2 plus the zeroing of w1 minus w2. Each case
// runs the pass, then compares native code of the decided program, and the interpreter on it,
// with the interpreter on the original, on randomized windows, clamped starts, and full /
// partial / no overlap.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "passes/simplify/shift_adds.h"
#include "test/backend/test_util.h"

namespace refjit::testing {
namespace {

RtValue i32(int32_t v) { return Array::from_vector<int32_t>({v}, {}); }

// The transposed delete: the run R[b, c:c+5] swapped out for zeros, added back at
// R[d, e:e+5].
const char* kDelete = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[] d:i32[] e:i32[]. let
    z:f32[5] = broadcast_in_dim[broadcast_dimensions=() shape=(5,) sharding=None] 0.0:f32[]
    v:f32[5], r[b,c:c+5] <- r[b,c:c+5], z
    r[d,e:e+5] += v
  in () })";

// The transposed insert: a [1,6] run swapped out, a static slice [0, 1:5] of it added back.
const char* kInsert = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[] d:i32[] e:i32[]. let
    z:f32[1,6] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 6) sharding=None] 0.0:f32[]
    v:f32[1,6], r[b:b+1,c:c+6] <- r[b:b+1,c:c+6], z
    w:f32[1,4] = slice[limit_indices=(1, 5) start_indices=(0, 1) strides=None] v
    r[d:d+1,e:e+4] += w
  in () })";

// slice1's transposed insert: the swapped-out run's first element is the inserted value's
// cotangent (a side slice, returned through a reduce_sum), the rest is shifted back.
const char* kInsertWithSideSlice =
    R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[] d:i32[] e:i32[]. let
    z:f32[1,7] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 7) sharding=None] 0.0:f32[]
    v:f32[1,7], r[b:b+1,c:c+7] <- r[b:b+1,c:c+7], z
    h:f32[1,1] = slice[limit_indices=(1, 1) start_indices=(0, 0) strides=(1, 1)] v
    w:f32[1,6] = slice[limit_indices=(1, 7) start_indices=(0, 1) strides=(1, 1)] v
    r[d:d+1,e:e+6] += w
    s:f32[] = reduce_sum[axes=(0, 1)] h
  in (s,) })";

// The shift_add eqns the pass makes of `text`'s top level.
std::vector<Eqn> shifts_of(const std::string& text) {
  std::vector<Eqn> shifts;
  for (const Eqn& e : shift_adds(parse_jaxpr(text)).eqns)
    if (e.prim == Prim::shift_add) shifts.push_back(e);
  return shifts;
}

// The pass's output against its input (test_util.h): the refs equal exactly (a shift adds each
// element once, in the same order); a returned sum may round differently natively.
void check_decided(const std::string& text, const std::vector<RtValue>& args) {
  SCOPED_TRACE(text);
  const Jaxpr original = parse_jaxpr(text);
  expect_decided_matches(original, shift_adds(original), args, 1e-6);
}

void check_random_windows(const char* text, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> row(-2, 5), col(-3, 14), small(-1, 1);
  for (int trial = 0; trial < 60; ++trial) {
    int b = row(rng), c = col(rng);
    // A third of the cases shift by at most one element (the seed's overlapping windows).
    int d = trial % 3 == 0 ? b : row(rng);
    int e = trial % 3 == 0 ? c + small(rng) : col(rng);
    SCOPED_TRACE(fmt::format("b={} c={} d={} e={}", b, c, d, e));
    check_decided(text, {ref_of(random_array(at(DType::f32, {4, 12}), seed + trial)), i32(b),
                         i32(c), i32(d), i32(e)});
  }
}

TEST(NativeCotangentShift, DeleteTransposeIsOneShift) {
  const Jaxpr j = shift_adds(parse_jaxpr(kDelete));
  ASSERT_EQ(j.eqns.size(), 1u);  // the zero broadcast, the swap and the addupdate are one eqn
  const Eqn& e = j.eqns[0];
  ASSERT_EQ(e.prim, Prim::shift_add);
  EXPECT_EQ(e.params.get<IntList>("write_sizes"), (IntList{1, 5}));
  EXPECT_EQ(e.params.get<IntList>("add_sizes"), (IntList{1, 5}));
  EXPECT_EQ(e.params.get<int64_t>("offset"), 0);
  EXPECT_TRUE(e.outs.empty());
}

TEST(NativeCotangentShift, DeleteTransposeMatchesTheInterpreterOnRandomWindows) {
  check_random_windows(kDelete, 11);
}

TEST(NativeCotangentShift, InsertTransposeWithStaticSliceIsOneShift) {
  const Jaxpr j = shift_adds(parse_jaxpr(kInsert));
  ASSERT_EQ(j.eqns.size(), 1u);  // the slice is folded too
  EXPECT_EQ(j.eqns[0].params.get<int64_t>("offset"), 1);
  EXPECT_EQ(j.eqns[0].params.get<IntList>("add_sizes"), (IntList{1, 4}));
}

TEST(NativeCotangentShift, InsertTransposeMatchesTheInterpreterOnRandomWindows) {
  check_random_windows(kInsert, 23);
}

TEST(NativeCotangentShift, SideSliceOfTheSwappedOutRunIsAResultOfTheShift) {
  const Jaxpr j = shift_adds(parse_jaxpr(kInsertWithSideSlice));
  // shift_add (its one result the value's cotangent, copied out of R before the shift), the
  // reshape of that run to the side slice's [1, 1], the reduce_sum.
  ASSERT_EQ(j.eqns.size(), 3u) << print_jaxpr(j);
  const Eqn& e = j.eqns[0];
  ASSERT_EQ(e.prim, Prim::shift_add);
  EXPECT_EQ(e.params.get<IntList>("side_offsets"), IntList{0});
  EXPECT_EQ(e.params.get<IntList>("side_lengths"), IntList{1});
  EXPECT_EQ(e.params.get<int64_t>("offset"), 1);
  EXPECT_EQ(e.params.get<IntList>("add_sizes"), (IntList{1, 6}));
  EXPECT_EQ(j.eqns[1].prim, Prim::reshape);
}

TEST(NativeCotangentShift, SideSliceMatchesTheInterpreterOnRandomWindows) {
  check_random_windows(kInsertWithSideSlice, 31);
}

TEST(NativeCotangentShift, AReshapedRunIsShiftedToo) {
  // The scatter transpose after range simplification: a 1-D window, its tail reshaped to the
  // [1, 6] window it is added to.
  const char* text = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[] d:i32[] e:i32[]. let
    z:f32[7] = broadcast_in_dim[broadcast_dimensions=() shape=(7,) sharding=None] 0.0:f32[]
    v:f32[7], r[b,c:c+7] <- r[b,c:c+7], z
    h:f32[1] = slice[limit_indices=(1,) start_indices=(0,) strides=(1,)] v
    w:f32[6] = slice[limit_indices=(7,) start_indices=(1,) strides=(1,)] v
    x:f32[1,6] = reshape[dimensions=None new_sizes=(1, 6)] w
    r[d:d+1,e:e+6] += x
    s:f32[] = reshape[dimensions=None new_sizes=()] h
  in (s,) })";
  const std::vector<Eqn> shifts = shifts_of(text);
  ASSERT_EQ(shifts.size(), 1u);
  EXPECT_EQ(shifts[0].params.get<IntList>("write_sizes"), (IntList{1, 7}));
  EXPECT_EQ(shifts[0].params.get<int64_t>("offset"), 1);
  EXPECT_EQ(shifts[0].outs.size(), 1u);
  EXPECT_EQ(shift_adds(parse_jaxpr(text)).eqns.size(), 3u);  // shift_add, the side's two reshapes
  check_random_windows(text, 41);
}

TEST(NativeCotangentShift, SideSliceAfterTheAddupdateIsNotFolded) {
  // Reading the old run after R was updated needs the swapped-out copy.
  const char* late = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[] d:i32[] e:i32[]. let
    z:f32[1,7] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 7) sharding=None] 0.0:f32[]
    v:f32[1,7], r[b:b+1,c:c+7] <- r[b:b+1,c:c+7], z
    w:f32[1,6] = slice[limit_indices=(1, 7) start_indices=(0, 1) strides=(1, 1)] v
    r[d:d+1,e:e+6] += w
    h:f32[1,1] = slice[limit_indices=(1, 1) start_indices=(0, 0) strides=(1, 1)] v
    s:f32[] = reduce_sum[axes=(0, 1)] h
  in (s,) })";
  EXPECT_TRUE(shifts_of(late).empty());
  check_random_windows(late, 37);
}

TEST(NativeCotangentShift, FullOverlapAndNoOverlapMatchTheInterpreter) {
  // Same window (full overlap: the run is unchanged), windows in other rows, adjacent runs.
  for (auto [b, c, d, e] : std::vector<std::array<int, 4>>{
           {1, 3, 1, 3}, {0, 0, 3, 7}, {2, 0, 2, 5}, {2, 5, 2, 0}, {3, 7, 3, 8}, {9, 99, -4, -9}}) {
    SCOPED_TRACE(fmt::format("b={} c={} d={} e={}", b, c, d, e));
    for (const char* text : {kDelete, kInsert, kInsertWithSideSlice})
      check_decided(
          text, {ref_of(random_array(at(DType::f32, {4, 12}), 5)), i32(b), i32(c), i32(d), i32(e)});
  }
}

TEST(NativeCotangentShift, WholeRowWindowsAndIntegerRefsMatchTheInterpreter) {
  // Windows spanning whole rows (contiguous across the row boundary) on an i32 ref.
  const char* text = R"({ lambda ; r:Ref{i32[5,3]} b:i32[] d:i32[]. let
    z:i32[2,3] = broadcast_in_dim[broadcast_dimensions=() shape=(2, 3) sharding=None] 0:i32[]
    v:i32[2,3], r[b:b+2,:] <- r[b:b+2,:], z
    r[d:d+2,:] += v
  in () })";
  EXPECT_EQ(shifts_of(text).size(), 1u);
  for (auto [b, d] : std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {3, 3}, {0, 3}, {7, -2}})
    check_decided(text, {ref_of(random_array(at(DType::i32, {5, 3}), 7)), i32(b), i32(d)});
}

TEST(NativeCotangentShift, NotFoldedWhenTheRefIsReadInBetweenOrTheValueIsReused) {
  const char* read_between = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[]. let
    z:f32[5] = broadcast_in_dim[broadcast_dimensions=() shape=(5,) sharding=None] 0.0:f32[]
    v:f32[5], r[b,c:c+5] <- r[b,c:c+5], z
    g:f32[4,12] <- r[...]
    r[b,c:c+5] += v
  in (g,) })";
  const char* reused = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[]. let
    z:f32[5] = broadcast_in_dim[broadcast_dimensions=() shape=(5,) sharding=None] 0.0:f32[]
    v:f32[5], r[b,c:c+5] <- r[b,c:c+5], z
    r[b,c:c+5] += v
  in (v,) })";
  const char* nonzero = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[]. let
    z:f32[5] = broadcast_in_dim[broadcast_dimensions=() shape=(5,) sharding=None] 1.0:f32[]
    v:f32[5], r[b,c:c+5] <- r[b,c:c+5], z
    r[b,c:c+5] += v
  in () })";
  for (const char* text : {read_between, reused, nonzero}) {
    SCOPED_TRACE(text);
    EXPECT_TRUE(shifts_of(text).empty());
    check_decided(text, {ref_of(random_array(at(DType::f32, {4, 12}), 9)), i32(1), i32(6)});
  }
}

TEST(NativeCotangentShift, ShiftInsideAReversedScanMatchesTheInterpreter) {
  const char* text = R"({ lambda ; a:f32[3,9] rs:i32[6] cs:i32[6]. let
    r:Ref{f32[3,9]} = new_ref a
    scan[jaxpr={ lambda ; q:Ref{f32[3,9]} i:i32[] k:i32[]. let
        n:i32[] = add k 1:i32[]
        z:f32[4] = broadcast_in_dim[broadcast_dimensions=() shape=(4,) sharding=None] 0.0:f32[]
        v:f32[4], q[i,k:k+4] <- q[i,k:k+4], z
        q[i,n:n+4] += v
      in () } length=6 num_carry=0 num_consts=1 reverse=True] r rs cs
    b:f32[3,9] = freeze r
  in (b,) })";
  const Jaxpr j = shift_adds(parse_jaxpr(text));
  const Jaxpr& body = *j.eqns.at(1).params.get<JaxprPtr>("jaxpr");
  EXPECT_EQ(std::count_if(body.eqns.begin(), body.eqns.end(),
                          [](const Eqn& e) { return e.prim == Prim::shift_add; }),
            1);
  check_decided(text, {random_array(at(DType::f32, {3, 9}), 3),
                       Array::from_vector<int32_t>({0, 2, 1, 2, 7, -2}, {6}),
                       Array::from_vector<int32_t>({0, 4, 3, 8, 1, 2}, {6})});
}

// The transpose of a read then a write of the same window: the run read out with a get, then
// zeroed by a swap whose old value nobody reads (nothing naming R in between), then added back
// one element over: the same shift.
TEST(NativeCotangentShift, AReadThenAZeroingOfTheSameWindowIsOneShift) {
  const char* text = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[] d:i32[] e:i32[]. let
    v:f32[1,6] <- r[b:b+1,c:c+6]
    h:f32[1,6] = slice[limit_indices=(1, 6) start_indices=(0, 0) strides=None] v
    s:f32[] = reduce_sum[axes=(0, 1)] h
    z:f32[1,6] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 6) sharding=None] 0.0:f32[]
    _:f32[1,6], r[b:b+1,c:c+6] <- r[b:b+1,c:c+6], z
    w:f32[1,5] = slice[limit_indices=(1, 6) start_indices=(0, 1) strides=None] v
    r[d:d+1,e:e+5] += w
  in (s,) })";
  const Jaxpr j = shift_adds(parse_jaxpr(text));
  ASSERT_EQ(j.eqns.size(), 3u) << print_jaxpr(j);  // shift_add, the reshape of h, reduce_sum
  const Eqn& e = j.eqns[0];
  ASSERT_EQ(e.prim, Prim::shift_add);
  EXPECT_EQ(e.params.get<IntList>("side_offsets"), IntList{0});
  EXPECT_EQ(e.params.get<IntList>("side_lengths"), IntList{6});
  EXPECT_EQ(e.params.get<int64_t>("offset"), 1);
  check_random_windows(text, 43);
  // The ref read in between (whole, or another window) keeps the eqns as they are.
  for (const char* other : {"    y:f32[4,12] <- r[...]\n", "    y:f32[12] <- r[d]\n"}) {
    std::string t = text;
    t.insert(t.find("    z:f32[1,6]"), other);
    EXPECT_TRUE(shifts_of(t).empty()) << t;
  }
}

TEST(NativeCotangentShift, NotFoldedWhenTheAddedWindowStartsAfterTheSwap) {
  // The addupdate's start is computed after the swap: the shift_add, placed at the swap, could
  // not read it, so the eqns stay as they are (and still compute the same).
  const char* text = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[]. let
    z:f32[5] = broadcast_in_dim[broadcast_dimensions=() shape=(5,) sharding=None] 0.0:f32[]
    v:f32[5], r[b,c:c+5] <- r[b,c:c+5], z
    n:i32[] = add c 1:i32[]
    r[b,n:n+5] += v
  in () })";
  EXPECT_TRUE(shifts_of(text).empty());
  check_decided(text, {ref_of(random_array(at(DType::f32, {4, 12}), 9)), i32(1), i32(6)});
}

}  // namespace
}  // namespace refjit::testing
