// plain_decisions (passes/plain_decisions.h): a shift_add written out as the swap, slices
// and addupdate it stands for, at any depth, for the transforms that read a derived program
// again. The plain program leaves the ref and the side results exactly as the shift_add does
// (the interpreter runs both), on windows that overlap, miss each other or clamp.
#include "passes/plain_decisions.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"
#include "runtime/interpreter.h"
#include "test/passes/ad_test_util.h"

namespace refjit {
namespace {

using testing::arr;
using testing::random_array;
using testing::ref_of;

// slice1's transposed insert as one eqn: the run r[b, c:c+7] read, its first element returned
// (the inserted value's cotangent), zeros written over it, the other six added at r[d, e:e+6].
const char* kInsert = R"({ lambda ; r:Ref{f32[4,12]} b:i32[] c:i32[] d:i32[] e:i32[]. let
    g:f32[1] = shift_add[add_sizes=(1, 6) offset=1 side_lengths=(1,) side_offsets=(0,) write_sizes=(1, 7)] r 0.0:f32[] b c d e
    s:f32[] = reduce_sum[axes=(0,)] g
  in (s,) })";

// The same shift inside a scan body, once per step, the rows and columns its xs.
const char* kInsertPerStep =
    R"({ lambda ; r:Ref{f32[4,12]} bs:i32[3] cs:i32[3] ds:i32[3] es:i32[3]. let
    ss:f32[3] = scan[
      jaxpr={ lambda ; q:Ref{f32[4,12]} b:i32[] c:i32[] d:i32[] e:i32[]. let
          g:f32[1] = shift_add[add_sizes=(1, 6) offset=1 side_lengths=(1,) side_offsets=(0,) write_sizes=(1, 7)] q 0.0:f32[] b c d e
          s:f32[] = reduce_sum[axes=(0,)] g
        in (s,) }
      length=3
      linear=(False, False, False, False, False)
      num_carry=0
      num_consts=1
      reverse=False
      unroll=1
    ] r bs cs ds es
  in (ss,) })";

bool mentions_shift_add(const Jaxpr& j) {
  return print_jaxpr(j).find("shift_add") != std::string::npos;
}

RtValue i32(int32_t v) { return Array::from_vector<int32_t>({v}, {}); }

// Runs `program` and its plain form on the same ref contents and indices; the results and the
// ref must be equal exactly.
void expect_plain_form_agrees(const Jaxpr& program, const std::vector<RtValue>& indices,
                              uint32_t seed) {
  std::optional<Jaxpr> storage;
  const Jaxpr& plain = plain_decisions(program, storage);
  ASSERT_TRUE(storage.has_value());
  ASSERT_FALSE(mentions_shift_add(plain)) << print_jaxpr(plain);
  verify(plain);
  std::mt19937 rng(seed);
  const Array start = random_array(rng, ArrayType{DType::f32, {4, 12}});
  RefBufferPtr decided_ref = ref_of(start.clone()), plain_ref = ref_of(start.clone());
  std::vector<RtValue> decided_args{decided_ref}, plain_args{plain_ref};
  decided_args.insert(decided_args.end(), indices.begin(), indices.end());
  plain_args.insert(plain_args.end(), indices.begin(), indices.end());
  const std::vector<RtValue> want = interpret(program, decided_args);
  const std::vector<RtValue> got = interpret(plain, plain_args);
  ASSERT_EQ(want.size(), got.size());
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(arr(got[k]), arr(want[k])) << "output " << k;
  EXPECT_EQ(plain_ref->value(), decided_ref->value());
}

TEST(PlainShiftAdds, AProgramWithoutOneIsReturnedAsItIs) {
  const Jaxpr j = parse_jaxpr(R"({ lambda ; x:f32[3]. let y:f32[3] = sin x in (y,) })");
  std::optional<Jaxpr> storage;
  EXPECT_EQ(&plain_decisions(j, storage), &j);
  EXPECT_FALSE(storage.has_value());
}

TEST(PlainShiftAdds, TheWrittenOutShiftLeavesTheRefAndTheSideRunAsTheShiftDoes) {
  const Jaxpr program = parse_jaxpr(kInsert);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> row(-2, 5), col(-3, 14), small(-1, 1);
  for (int trial = 0; trial < 40; ++trial) {
    const int b = row(rng), c = col(rng);
    // A third of the cases shift by at most one element (the seed's overlapping windows).
    const int d = trial % 3 == 0 ? b : row(rng);
    const int e = trial % 3 == 0 ? c + small(rng) : col(rng);
    SCOPED_TRACE(fmt::format("b={} c={} d={} e={}", b, c, d, e));
    expect_plain_form_agrees(program, {i32(b), i32(c), i32(d), i32(e)},
                             static_cast<uint32_t>(trial));
  }
}

TEST(PlainShiftAdds, ShiftsInsideALoopBodyAreWrittenOutToo) {
  const Jaxpr program = parse_jaxpr(kInsertPerStep);
  auto i32s = [](std::vector<int32_t> v) { return Array::from_vector<int32_t>(v, {3}); };
  expect_plain_form_agrees(program,
                           {i32s({0, 3, 1}), i32s({2, 5, 0}), i32s({0, 3, 2}), i32s({3, 4, 9})}, 5);
}

}  // namespace
}  // namespace refjit
