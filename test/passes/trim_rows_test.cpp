// Row trimming (passes/simplify/trim_rows.h): which carries and refs lose their untouched trailing
// rows, that clamped starts keep enough rows to clamp to the same place, and that the trimmed
// program computes exactly what the original does (interpreter, same constants).
#include "passes/simplify/trim_rows.h"

#include <gtest/gtest.h>

#include <random>

#include "refjit/ir/text.h"
#include "refjit/ir/verifier.h"
#include "runtime/interpreter.h"
#include "test/passes/ad_test_util.h"

namespace refjit {
namespace {

using testing::parse;

Array random_f32(const Shape& shape, uint32_t seed) {
  return testing::random_array(ArrayType{DType::f32, shape}, seed);
}

IntRange range_of(const std::vector<int32_t>& v) {
  return {*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
}

// A scan inserting into row rs[t] of an [8,4] carry; the loss reads rows [0, 2).
std::string carry_program(const std::string& after =
                              "z:f32[2,4] = slice[limit_indices=(2, 4) "
                              "start_indices=(0, 0) strides=None] y",
                          const std::string& out = "z") {
  return R"({ lambda rs:i32[6]; x:f32[8,4] v:f32[6]. let
    y:f32[8,4] = scan[_split_transpose=False jaxpr={ lambda ; c:f32[8,4] r:i32[] w:f32[]. let
        s:f32[1,4] = dynamic_slice[slice_sizes=(1, 4)] c r 0:i32[]
        b:f32[1,4] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 4) sharding=None] w
        t:f32[1,4] = add s b
        d:f32[8,4] = dynamic_update_slice c t r 0:i32[]
      in (d,) } length=6 linear=None num_carry=1 num_consts=0 reverse=False unroll=1] x rs v
    )" + after +
         R"(
  in ()" +
         out + R"(,) })";
}

// Runs `original` and its trimming for the constant `rs` on random inputs; returns how many
// values were trimmed and expects identical results.
int trim_and_compare(const Jaxpr& original, const std::vector<int32_t>& rs,
                     std::vector<RtValue> args, Jaxpr* out = nullptr) {
  int trimmed = -1;
  Jaxpr t = trim_untouched_rows(original, {range_of(rs)}, &trimmed);
  verify(t);
  std::vector<RtValue> all = {Array::from_vector<int32_t>(rs, {static_cast<int64_t>(rs.size())})};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<RtValue> want = interpret(original, all);
  std::vector<RtValue> got = interpret(t, all);
  EXPECT_EQ(want.size(), got.size());
  for (size_t k = 0; k < want.size() && k < got.size(); ++k)
    EXPECT_EQ(std::get<Array>(want[k]), std::get<Array>(got[k])) << "output " << k;
  if (out) *out = std::move(t);
  return trimmed;
}

std::vector<RtValue> carry_args() { return {random_f32({8, 4}, 1), random_f32({6}, 2)}; }

TEST(TrimRows, ACarryIndexedByConstantRowsKeepsOnlyThoseRows) {
  Jaxpr t;
  EXPECT_EQ(trim_and_compare(parse(carry_program()), {0, 2, 1, 2, 0, 1}, carry_args(), &t), 1);
  const std::string text = print_jaxpr(t);
  EXPECT_NE(text.find("f32[3,4] = scan"), std::string::npos) << text;
  EXPECT_NE(text.find("lambda ; f:f32[3,4]"), std::string::npos) << text;
  EXPECT_NE(text.find("l:f32[3,4] = dynamic_update_slice"), std::string::npos) << text;
  // The initial carry is an argument: it is sliced to the kept rows.
  EXPECT_NE(text.find("limit_indices=(3, 4)"), std::string::npos) << text;
}

TEST(TrimRows, RowsReadAfterTheScanAreKept) {
  const std::string after =
      "z:f32[5,4] = slice[limit_indices=(5, 4) start_indices=(0, 0) strides=None] y";
  Jaxpr t;
  EXPECT_EQ(trim_and_compare(parse(carry_program(after)), {0, 2, 1, 2, 0, 1}, carry_args(), &t), 1);
  EXPECT_NE(print_jaxpr(t).find("f32[5,4] = scan"), std::string::npos) << print_jaxpr(t);
}

TEST(TrimRows, ClampedStartsKeepTheRowsTheyClampTo) {
  // Starts in [-3, 5] with a 1-row window: 6 rows, so that 5 is not clamped to a lower row.
  Jaxpr t;
  EXPECT_EQ(trim_and_compare(parse(carry_program()), {-3, 5, 0, -1, 2, 4}, carry_args(), &t), 1);
  EXPECT_NE(print_jaxpr(t).find("f32[6,4] = scan"), std::string::npos) << print_jaxpr(t);
  // Starts past the last row clamp in the original: nothing can be trimmed.
  EXPECT_EQ(trim_and_compare(parse(carry_program()), {0, 9, 1, 2, 0, 1}, carry_args()), 0);
}

TEST(TrimRows, IndexArithmeticThatMayWrapAroundIsNotTrusted) {
  // -1 - (r + 2147483646) wraps to 2147483647 for r = 2: that start clamps to the last row.
  const std::string text = R"({ lambda rs:i32[3]; x:f32[8,4] v:f32[3]. let
    y:f32[8,4] = scan[_split_transpose=False jaxpr={ lambda ; c:f32[8,4] r:i32[] w:f32[]. let
        q:i32[] = add r 2147483646:i32[]
        n:i32[] = sub -1:i32[] q
        b:f32[1,4] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 4) sharding=None] w
        d:f32[8,4] = dynamic_update_slice c b n 0:i32[]
      in (d,) } length=3 linear=None num_carry=1 num_consts=0 reverse=False unroll=1] x rs v
    z:f32[2,4] = slice[limit_indices=(2, 4) start_indices=(0, 0) strides=None] y
  in (z,) })";
  EXPECT_EQ(trim_and_compare(parse(text), {1, 2, 1}, {random_f32({8, 4}, 7), random_f32({3}, 8)}),
            0);
}

TEST(TrimRows, NothingIsTrimmedWithoutRangesOrWhenTheCarryIsReturned) {
  int trimmed = -1;
  Jaxpr j = parse(carry_program());
  EXPECT_EQ(print_jaxpr(trim_untouched_rows(j, {std::nullopt}, &trimmed)), print_jaxpr(j));
  EXPECT_EQ(trimmed, 0);
  EXPECT_EQ(trim_and_compare(parse(carry_program("z:f32[8,4] = copy y", "z")), {0, 1, 0, 1, 0, 1},
                             carry_args()),
            0);
  EXPECT_EQ(trim_and_compare(parse(carry_program("", "y")), {0, 1, 0, 1, 0, 1}, carry_args()), 0);
}

TEST(TrimRows, AScatterIntoTheFlattenedCarryTrimsByItsFlatIndices) {
  // x.at[r, 0:2].set(w) written as a scatter into the flattened [6,4] carry at r*4 + iota.
  const std::string text = R"({ lambda rs:i32[6]; x:f32[6,4] v:f32[6]. let
    y:f32[6,4] = scan[_split_transpose=False jaxpr={ lambda ; c:f32[6,4] r:i32[] w:f32[]. let
        f:f32[24] = reshape[dimensions=None new_sizes=(24,)] c
        i:i32[2] = iota[dimension=0 dtype=int32 shape=(2,) sharding=None]
        m:i32[] = mul r 4:i32[]
        k:i32[2] = add m i
        u:f32[2] = broadcast_in_dim[broadcast_dimensions=() shape=(2,) sharding=None] w
        g:f32[24] = scatter[axis=0 unique_indices=True] f k u
        d:f32[6,4] = reshape[dimensions=None new_sizes=(6, 4)] g
      in (d,) } length=6 linear=None num_carry=1 num_consts=0 reverse=False unroll=1] x rs v
    z:f32[1,4] = slice[limit_indices=(1, 4) start_indices=(0, 0) strides=None] y
  in (z,) })";
  std::vector<RtValue> args = {random_f32({6, 4}, 5), random_f32({6}, 6)};
  Jaxpr t;
  EXPECT_EQ(trim_and_compare(parse(text), {0, 2, 1, 2, 0, 1}, args, &t), 1);
  const std::string out = print_jaxpr(t);
  EXPECT_NE(out.find("f32[12] = reshape[dimensions=None new_sizes=(12,)]"), std::string::npos)
      << out;
  EXPECT_NE(out.find("f32[3,4] = reshape[dimensions=None new_sizes=(3, 4)]"), std::string::npos)
      << out;
  // Row 5 is written: nothing to trim. Negative rows are dropped in both: rows [0, 3) stay.
  EXPECT_EQ(trim_and_compare(parse(text), {0, 5, 1, 2, 0, 1}, args), 0);
  EXPECT_EQ(trim_and_compare(parse(text), {-4, 2, -1, 2, 0, 1}, args), 1);
}

TEST(TrimRows, ARefAccumulatedInAScanIsTrimmedWithItsZeroFill) {
  // The shape of a transposed scan: a zero cotangent ref, seeded, then shifted by the steps.
  const char* text = R"({ lambda rs:i32[4]; g:f32[2,6]. let
    z:f32[10,6] = broadcast_in_dim[broadcast_dimensions=() shape=(10, 6) sharding=None] 0.0:f32[]
    r:Ref{f32[10,6]} = new_ref z
    r[:2,:] += g
    o:f32[4] = scan[_split_transpose=False jaxpr={ lambda ; q:Ref{f32[10,6]} i:i32[]. let
        n:i32[] = add i 1:i32[]
        u:f32[1,3] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 3) sharding=None] 0.0:f32[]
        v:f32[1,3], q[i:i+1,0:3] <- q[i:i+1,0:3], u
        q[n:n+1,2:5] += v
        e:f32[] <- q[i,5]
      in (e,) } length=4 linear=None num_carry=0 num_consts=1 reverse=True unroll=1] r rs
  in (o,) })";
  Jaxpr t;
  EXPECT_EQ(trim_and_compare(parse(text), {0, 3, 1, 2}, {random_f32({2, 6}, 3)}, &t), 1);
  const std::string out = print_jaxpr(t);
  // Rows up to 3 + 1 (the shifted add) + 1 are touched.
  EXPECT_NE(out.find("Ref{f32[5,6]} = new_ref"), std::string::npos) << out;
  EXPECT_NE(out.find("lambda ; f:Ref{f32[5,6]}"), std::string::npos) << out;
  // The zero fill is trimmed in place, not sliced.
  EXPECT_NE(out.find("c:f32[5,6] = broadcast_in_dim 0.0"), std::string::npos) << out;
  EXPECT_EQ(out.find("slice["), std::string::npos) << out;
}

// A transposed scatter on the flattened carry reads and zeroes its cotangent ref as flat runs
// (get_flat_run / swap_flat_run, bound 59 = the last of 10 x 6): the runs at rs * 6 + 4 + k,
// k < 5, reach flat position 3 * 6 + 8 = 26, in row 4, so 5 rows are kept and the bound stays
// past the trimmed ref's end (runs past it fold as before; the results are the same).
TEST(TrimRows, FlatRunsOfARefKeepTheRowsTheirRunsReach) {
  const char* text = R"({ lambda rs:i32[4]; g:f32[2,6]. let
    z:f32[10,6] = broadcast_in_dim[broadcast_dimensions=() shape=(10, 6) sharding=None] 0.0:f32[]
    r:Ref{f32[10,6]} = new_ref z
    r[:2,:] += g
    o:f32[4,5] = scan[_split_transpose=False jaxpr={ lambda ; q:Ref{f32[10,6]} i:i32[]. let
        m:i32[] = mul i 6:i32[]
        s:i32[] = add m 4:i32[]
        e:f32[5] = get_flat_run[bound=59 length=5] q s
        u:f32[5] = broadcast_in_dim[broadcast_dimensions=() shape=(5,) sharding=None] 0.0:f32[]
        _:f32[5] = swap_flat_run[bound=59 length=5] q s u
      in (e,) } length=4 linear=None num_carry=0 num_consts=1 reverse=True unroll=1] r rs
  in (o,) })";
  Jaxpr t;
  EXPECT_EQ(trim_and_compare(parse(text), {0, 3, 1, 2}, {random_f32({2, 6}, 5)}, &t), 1);
  const std::string out = print_jaxpr(t);
  EXPECT_NE(out.find("Ref{f32[5,6]} = new_ref"), std::string::npos) << out;
  EXPECT_NE(out.find("get_flat_run[bound=59 length=5]"), std::string::npos) << out;
  // Runs that may reach the last row (starts up to 3 * 20 + 4): nothing is trimmed.
  std::string far = text;
  far.replace(far.find("m:i32[] = mul i 6:i32[]"), 23, "m:i32[] = mul i 20:i32[]");
  EXPECT_EQ(trim_and_compare(parse(far), {0, 3, 1, 2}, {random_f32({2, 6}, 6)}), 0);
}

TEST(TrimRows, ARefReadWholeOrFrozenIsKept) {
  const char* text = R"({ lambda rs:i32[2]; g:f32[2,6]. let
    z:f32[10,6] = broadcast_in_dim[broadcast_dimensions=() shape=(10, 6) sharding=None] 0.0:f32[]
    r:Ref{f32[10,6]} = new_ref z
    r[:2,:] += g
    w:f32[10,6] <- r[...]
  in (w,) })";
  EXPECT_EQ(trim_and_compare(parse(text), {0, 1}, {random_f32({2, 6}, 4)}), 0);
}

}  // namespace
}  // namespace refjit
