// Dead-region elimination of values (passes/simplify/dead_regions.h): which eqns are computed over
// the box their slices read, what is left whole, and that results never change (interpreter).
#include "passes/simplify/dead_regions.h"

#include <gtest/gtest.h>

#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"
#include "runtime/interpreter.h"
#include "test/passes/ad_test_util.h"

namespace refjit {
namespace {

using testing::parse;

// Shrinks `text`, checks the result against the original on random f32 arguments, and
// returns the shrunk program's text; `changes` receives the count.
std::string shrink_and_compare(const std::string& text, int* changes = nullptr) {
  const Jaxpr j = parse(text);
  int n = -1;
  const Jaxpr s = shrink_sliced_values(j, &n);
  verify(s);
  if (changes) *changes = n;
  std::vector<RtValue> args;
  uint32_t seed = 1;
  for (Var v : j.invars) args.push_back(testing::random_array(j.type_of(v).array, seed++));
  const std::vector<RtValue> want = interpret(j, args), got = interpret(s, args);
  EXPECT_EQ(want.size(), got.size());
  for (size_t k = 0; k < want.size() && k < got.size(); ++k)
    EXPECT_EQ(std::get<Array>(want[k]), std::get<Array>(got[k])) << "output " << k;
  return print_jaxpr(s);
}

TEST(DeadRegions, AChainReadOnlyThroughSlicesIsComputedOverTheirBox) {
  // tanh(x * y + b) read at rows 1..2 and columns 0..7, and at columns 2..5: the box is
  // columns 0..7 of every row. The product is also negated whole, so it stays whole.
  int changes = 0;
  const std::string out = shrink_and_compare(R"({ lambda ; x:f32[4,16] y:f32[4,16] b:f32[16]. let
    m:f32[4,16] = mul x y
    c:f32[4,16] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(4, 16) sharding=None] b
    s:f32[4,16] = add m c
    t:f32[4,16] = tanh s
    u:f32[2,8] = slice[limit_indices=(3, 8) start_indices=(1, 0) strides=None] t
    w:f32[4,4] = slice[limit_indices=(4, 6) start_indices=(0, 2) strides=None] t
    n:f32[4,16] = neg m
  in (u, w, n) })",
                                             &changes);
  EXPECT_EQ(changes, 3) << out;  // the broadcast, the add and the tanh
  EXPECT_NE(out.find("f32[4,8] = tanh"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[4,8] = add"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[8] = slice[limit_indices=(8,) start_indices=(0,)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("f32[4,16] = mul"), std::string::npos) << out;
  // The readers are relative to the box.
  EXPECT_NE(out.find("f32[4,4] = slice[limit_indices=(4, 6) start_indices=(0, 2)"),
            std::string::npos)
      << out;
}

TEST(DeadRegions, ASliceTakingTheWholeBoxIsDroppedAndOperandsAreSlicedOnce) {
  // x * x read at [2:5]: x is sliced once, and the reader slice disappears.
  const std::string out = shrink_and_compare(R"({ lambda ; x:f32[8]. let
    m:f32[8] = mul x x
    s:f32[3] = slice[limit_indices=(5,) start_indices=(2,) strides=None] m
  in (s,) })");
  EXPECT_NE(out.find("b:f32[3] = slice[limit_indices=(5,) start_indices=(2,)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("c:f32[3] = mul b b"), std::string::npos) << out;
  EXPECT_NE(out.find("in (c,)"), std::string::npos) << out;
}

TEST(DeadRegions, ABroadcastKeepsTheDimsItBroadcasts) {
  // b:[4,1] broadcast to [4,6] along dims (0, 1): dim 1 is broadcast (size 1), dim 0 is not.
  const std::string out = shrink_and_compare(R"({ lambda ; b:f32[4,1]. let
    c:f32[4,6] = broadcast_in_dim[broadcast_dimensions=(0, 1) shape=(4, 6) sharding=None] b
    s:f32[2,3] = slice[limit_indices=(3, 5) start_indices=(1, 2) strides=None] c
  in (s,) })");
  EXPECT_NE(out.find("f32[2,1] = slice[limit_indices=(3, 1) start_indices=(1, 0)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("f32[2,3] = broadcast_in_dim"), std::string::npos) << out;
}

TEST(DeadRegions, TransposesReductionsAndProductsReadOnlyWhatTheBoxNeeds) {
  int changes = 0;
  const std::string out = shrink_and_compare(
      R"({ lambda ; x:f32[6,4] y:f32[4,5] z:f32[3,6,7] w:f32[2,6,4] u:f32[2,4,6]. let
    t:f32[4,6] = transpose[permutation=(1, 0)] x
    ts:f32[2,6] = slice[limit_indices=(3, 6) start_indices=(1, 0) strides=None] t
    p:f32[6,5] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x y
    ps:f32[2,3] = slice[limit_indices=(2, 4) start_indices=(0, 1) strides=None] p
    r:f32[3,7] = reduce_max[axes=(1,)] z
    rs:f32[3,2] = slice[limit_indices=(3, 2) start_indices=(0, 0) strides=None] r
    b:f32[2,6,6] = dot_general[dimension_numbers=(([2], [1]), ([0], [0]))] w u
    bs:f32[1,6,2] = slice[limit_indices=(2, 6, 2) start_indices=(1, 0, 0) strides=None] b
  in (ts, ps, rs, bs) })",
      &changes);
  EXPECT_EQ(changes, 4) << out;
  const char* operand_slices[] = {
      // transpose: columns 1..2 of x
      "f32[6,2] = slice[limit_indices=(6, 3) start_indices=(0, 1)",
      // x @ y: rows 0..1 of x, columns 1..3 of y
      "f32[2,4] = slice[limit_indices=(2, 4) start_indices=(0, 0)",
      "f32[4,3] = slice[limit_indices=(4, 4) start_indices=(0, 1)",
      // reduce_max over axis 1: columns 0..1 of the last axis, axis 1 whole
      "f32[3,6,2] = slice[limit_indices=(3, 6, 2) start_indices=(0, 0, 0)",
      // batched: batch 1 of both, and columns 0..1 of u (the rhs free dim)
      "f32[1,6,4] = slice[limit_indices=(2, 6, 4) start_indices=(1, 0, 0)",
      "f32[1,4,2] = slice[limit_indices=(2, 4, 2) start_indices=(1, 0, 0)",
  };
  for (const char* slice : operand_slices)
    EXPECT_NE(out.find(slice), std::string::npos) << slice << "\n" << out;
}

TEST(DeadRegions, ValuesWhoseReadersReachEverythingOrReadOtherwiseStayWhole) {
  const char* cases[] = {
      // also returned
      R"({ lambda ; x:f32[8]. let
    m:f32[8] = neg x
    s:f32[3] = slice[limit_indices=(3,) start_indices=(0,) strides=None] m
  in (s, m) })",
      // a strided slice
      R"({ lambda ; x:f32[8]. let
    m:f32[8] = neg x
    s:f32[3] = slice[limit_indices=(6,) start_indices=(0,) strides=(2,)] m
  in (s,) })",
      // the slices together read every element
      R"({ lambda ; x:f32[8]. let
    m:f32[8] = neg x
    s:f32[4] = slice[limit_indices=(4,) start_indices=(0,) strides=None] m
    t:f32[4] = slice[limit_indices=(8,) start_indices=(4,) strides=None] m
  in (s, t) })",
      // read by a reduction
      R"({ lambda ; x:f32[8]. let
    m:f32[8] = neg x
    s:f32[3] = slice[limit_indices=(3,) start_indices=(0,) strides=None] m
    r:f32[] = reduce_sum[axes=(0,)] m
  in (s, r) })",
      // not one of the eqns shrunk
      R"({ lambda ; x:f32[8]. let
    m:f32[8] = cumsum[axis=0 reverse=False] x
    s:f32[3] = slice[limit_indices=(3,) start_indices=(0,) strides=None] m
  in (s,) })",
  };
  for (const char* text : cases) {
    int changes = -1;
    const std::string out = shrink_and_compare(text, &changes);
    EXPECT_EQ(changes, 0) << out;
  }
}

TEST(DeadRegions, ScanBodiesAreShrunkToo) {
  int changes = 0;
  const std::string out = shrink_and_compare(R"({ lambda ; x:f32[5,8] c0:f32[2]. let
    c:f32[2] = scan[_split_transpose=False jaxpr={ lambda ; c:f32[2] r:f32[8]. let
        e:f32[8] = exp r
        s:f32[2] = slice[limit_indices=(2,) start_indices=(0,) strides=None] e
        d:f32[2] = add c s
      in (d,) } length=5 linear=None num_carry=1 num_consts=0 reverse=False unroll=1] c0 x
  in (c,) })",
                                             &changes);
  EXPECT_EQ(changes, 1) << out;
  EXPECT_NE(out.find("f32[2] = exp"), std::string::npos) << out;
}

}  // namespace
}  // namespace refjit
