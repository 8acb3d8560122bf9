// shift_add natively: the transpose of a row segment moved inside an array or a ref
// (passes/ad/window_shift.h), lowered as one pass over w2 plus the zeroing of w1 minus w2
// (lower_ref.cpp). Each case compares native code of a program holding shift_add eqns, and the
// interpreter on it, with the interpreter on the plain eqns the shift_adds stand for
// (passes/plain_decisions.h), on randomized windows, clamped starts, and full / partial / no
// overlap.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "passes/plain_decisions.h"
#include "test/backend/test_util.h"

namespace refjit::testing {
namespace {

RtValue i32(int32_t v) { return Array::from_vector<int32_t>({v}, {}); }

// The transposed delete: the run R[b, c:c+5] zeroed, added back at R[d, e:e+5].
const char* kDelete = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[] d:i32[] e:i32[]. let
    shift_add[add_sizes=(1, 5) offset=0 side_lengths=() side_offsets=() write_sizes=(1, 5)] r 0.0:f32[] b c d e
  in () })";

// The transposed insert: a [1,6] run zeroed, its elements 1..4 added back.
const char* kInsert = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[] d:i32[] e:i32[]. let
    shift_add[add_sizes=(1, 4) offset=1 side_lengths=() side_offsets=() write_sizes=(1, 6)] r 0.0:f32[] b c d e
  in () })";

// slice1's transposed insert: the run's first element is the inserted value's cotangent (a
// side run, returned through a reduce_sum), the rest is shifted back.
const char* kInsertWithSideRun =
    R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[] d:i32[] e:i32[]. let
    g:f32[1] = shift_add[add_sizes=(1, 6) offset=1 side_lengths=(1,) side_offsets=(0,) write_sizes=(1, 7)] r 0.0:f32[] b c d e
    s:f32[] = reduce_sum[axes=(0,)] g
  in (s,) })";

// A side run covering the whole window (its old contents, returned) and an added run that
// starts one element in.
const char* kWholeSideRun = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[] d:i32[] e:i32[]. let
    g:f32[6] = shift_add[add_sizes=(1, 5) offset=1 side_lengths=(6,) side_offsets=(0,) write_sizes=(1, 6)] r 0.0:f32[] b c d e
    s:f32[] = reduce_sum[axes=(0,)] g
  in (s,) })";

// The plain program against the shift_adds (test_util.h): the refs equal exactly (a shift adds
// each element once, in the same order); a returned sum may round differently natively.
void check_shift(const std::string& text, const std::vector<RtValue>& args) {
  SCOPED_TRACE(text);
  const Jaxpr decided = parse_jaxpr(text);
  std::optional<Jaxpr> plain;
  (void)plain_decisions(decided, plain);
  ASSERT_TRUE(plain.has_value());
  expect_decided_matches(*plain, decided, args, 1e-6);
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
    check_shift(text, {ref_of(random_array(at(DType::f32, {4, 12}), seed + trial)), i32(b), i32(c),
                       i32(d), i32(e)});
  }
}

TEST(NativeCotangentShift, DeleteMatchesTheInterpreterOnRandomWindows) {
  check_random_windows(kDelete, 11);
}

TEST(NativeCotangentShift, InsertMatchesTheInterpreterOnRandomWindows) {
  check_random_windows(kInsert, 23);
}

TEST(NativeCotangentShift, SideRunMatchesTheInterpreterOnRandomWindows) {
  check_random_windows(kInsertWithSideRun, 31);
}

TEST(NativeCotangentShift, WholeWindowSideRunMatchesTheInterpreterOnRandomWindows) {
  check_random_windows(kWholeSideRun, 43);
}

TEST(NativeCotangentShift, FullOverlapAndNoOverlapMatchTheInterpreter) {
  // Same window (full overlap: the run is unchanged), windows in other rows, adjacent runs.
  for (auto [b, c, d, e] : std::vector<std::array<int, 4>>{
           {1, 3, 1, 3}, {0, 0, 3, 7}, {2, 0, 2, 5}, {2, 5, 2, 0}, {3, 7, 3, 8}, {9, 99, -4, -9}}) {
    SCOPED_TRACE(fmt::format("b={} c={} d={} e={}", b, c, d, e));
    for (const char* text : {kDelete, kInsert, kInsertWithSideRun, kWholeSideRun})
      check_shift(
          text, {ref_of(random_array(at(DType::f32, {4, 12}), 5)), i32(b), i32(c), i32(d), i32(e)});
  }
}

TEST(NativeCotangentShift, WholeRowWindowsAndIntegerRefsMatchTheInterpreter) {
  // Windows spanning whole rows (contiguous across the row boundary) on an i32 ref.
  const char* text = R"({ lambda ; r:Ref{i32[5,3]} b:i32[] d:i32[]. let
    shift_add[add_sizes=(2, 3) offset=0 side_lengths=() side_offsets=() write_sizes=(2, 3)] r 0:i32[] b 0:i32[] d 0:i32[]
  in () })";
  for (auto [b, d] : std::vector<std::pair<int, int>>{{0, 1}, {1, 0}, {3, 3}, {0, 3}, {7, -2}})
    check_shift(text, {ref_of(random_array(at(DType::i32, {5, 3}), 7)), i32(b), i32(d)});
}

TEST(NativeCotangentShift, ShiftInsideAReversedScanMatchesTheInterpreter) {
  const char* text = R"({ lambda ; a:f32[3,9] rs:i32[6] cs:i32[6]. let
    r:Ref{f32[3,9]} = new_ref a
    scan[jaxpr={ lambda ; q:Ref{f32[3,9]} i:i32[] k:i32[]. let
        n:i32[] = add k 1:i32[]
        shift_add[add_sizes=(1, 4) offset=0 side_lengths=() side_offsets=() write_sizes=(1, 4)] q 0.0:f32[] i k i n
      in () } length=6 num_carry=0 num_consts=1 reverse=True] r rs cs
    b:f32[3,9] = freeze r
  in (b,) })";
  check_shift(text, {random_array(at(DType::f32, {3, 9}), 3),
                     Array::from_vector<int32_t>({0, 2, 1, 2, 7, -2}, {6}),
                     Array::from_vector<int32_t>({0, 4, 3, 8, 1, 2}, {6})});
}

}  // namespace
}  // namespace refjit::testing
