// Range simplification (passes/simplify/range_simplify.h): what it folds, the windows (also before
// autodiff), the merged read-and-zero, what it leaves alone, and that results never change
// (interpreter).
#include "passes/simplify/range_simplify.h"

#include <gtest/gtest.h>

#include <random>

#include "passes/ad/vjp.h"
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

// Simplifies `text` with the constant i32 scalars `consts` (each its own range) and checks
// the result against the original on `args`; returns the simplified text.
std::string simplify_and_compare(const std::string& text, const std::vector<int32_t>& consts,
                                 const std::vector<RtValue>& args, int* changes = nullptr) {
  Jaxpr j = parse(text);
  std::vector<std::optional<IntRange>> ranges;
  std::vector<RtValue> all;
  for (int32_t c : consts) {
    ranges.push_back(IntRange{c, c});
    all.push_back(Array::scalar(c));
  }
  all.insert(all.end(), args.begin(), args.end());
  int n = 0;
  Jaxpr s = simplify_with_ranges(j, ranges, &n);
  verify(s);
  if (changes) *changes = n;
  // Fresh copies of ref arguments for each run.
  auto fresh = [&] {
    std::vector<RtValue> a;
    for (const RtValue& v : all) {
      if (const RefBufferPtr* r = std::get_if<RefBufferPtr>(&v))
        a.push_back(std::make_shared<RefBuffer>((*r)->value().clone()));
      else
        a.push_back(v);
    }
    return a;
  };
  std::vector<RtValue> a = fresh(), b = fresh();
  std::vector<RtValue> want = interpret(j, a), got = interpret(s, b);
  EXPECT_EQ(want.size(), got.size());
  for (size_t k = 0; k < want.size() && k < got.size(); ++k)
    EXPECT_EQ(std::get<Array>(want[k]), std::get<Array>(got[k])) << "output " << k;
  for (size_t k = 0; k < a.size(); ++k)
    if (const RefBufferPtr* r = std::get_if<RefBufferPtr>(&a[k]))
      EXPECT_EQ((*r)->value(), std::get<RefBufferPtr>(b[k])->value()) << "ref " << k;
  return print_jaxpr(s);
}

TEST(RangeSimplify, DecidedComparisonsFoldAndSelectsTakeTheirCase) {
  // k in [3, 3]: k + iota(4) is in [3, 6], so both tests hold and the select is x.
  const char* text = R"({ lambda k:i32[]; x:f32[4] y:f32[4]. let
    i:i32[4] = iota[dimension=0 dtype=int32 shape=(4,) sharding=None]
    j:i32[4] = add k i
    p:bool[4] = ge j 0:i32[]
    q:bool[4] = lt j 7:i32[]
    m:bool[4] = and p q
    z:f32[4] = select_n m y x
    c:i32[4] = max j 0:i32[]
    d:i32[4] = min c 9:i32[]
  in (z, d) })";
  int changes = 0;
  const std::string out =
      simplify_and_compare(text, {3}, {random_f32({4}, 1), random_f32({4}, 2)}, &changes);
  EXPECT_GT(changes, 0);
  EXPECT_EQ(out.find("select_n"), std::string::npos) << out;
  EXPECT_EQ(out.find("max"), std::string::npos) << out;
  EXPECT_EQ(out.find("min"), std::string::npos) << out;
  EXPECT_EQ(out.find(" lt "), std::string::npos) << out;
  // k = 5: j reaches 8, so `lt j 7` is undecided and the select stays.
  const std::string kept =
      simplify_and_compare(text, {5}, {random_f32({4}, 1), random_f32({4}, 2)});
  EXPECT_NE(kept.find("select_n"), std::string::npos) << kept;
}

// The index row * 6 + c + iota(3) as the C++ API writes it.
constexpr const char* kRunIndex = R"(r:i32[] c:i32[]; x:f32[4,6] v:f32[]. let
    i:i32[3] = iota[dimension=0 dtype=int32 shape=(3,) sharding=None]
    k:i32[3] = add c i
    m:i32[] = mul r 6:i32[]
    f:i32[3] = add m k)";

// x.at[r, c:c+3].set(concat(v, x[r, c:c+2])) written as a scatter whose index addresses both
// dims of x (dims=2), at the index `f` that `index` computes (after the constvars and invars
// it names); `back` reads its result `g` into `y`.
std::string row_scatter_program(const std::string& back = "y:f32[4,6] = neg g",
                                const std::string& index = kRunIndex) {
  return "{ lambda " + index + R"(
    s:f32[1,2] = dynamic_slice[slice_sizes=(1, 2)] x r c
    t:f32[2] = reshape[dimensions=None new_sizes=(2,)] s
    w:f32[1] = reshape[dimensions=None new_sizes=(1,)] v
    u:f32[3] = concatenate[dimension=0] w t
    g:f32[4,6] = scatter[axis=0 dims=2 unique_indices=True] x f u
    )" + back +
         R"(
  in (y,) })";
}

TEST(RangeSimplify, AScatterOfARunInsideOneRowOfTwoDimsIsADynamicUpdateSlice) {
  std::vector<RtValue> args = {random_f32({4, 6}, 7), Array::scalar(0.5f)};
  const std::string out = simplify_and_compare(row_scatter_program(), {2, 3}, args);
  EXPECT_EQ(out.find("scatter"), std::string::npos) << out;
  // The update is rebuilt as a row: the broadcast value next to the dynamic_slice.
  EXPECT_NE(out.find("f32[1,3] = concatenate[dimension=1]"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[4,6] = dynamic_update_slice"), std::string::npos) << out;
  // A run that crosses into the next row (c = 4) is an update of the two dims flattened: one
  // window there, not a row of the 2-D array.
  const std::string flat = simplify_and_compare(row_scatter_program(), {2, 4}, args);
  EXPECT_EQ(flat.find("scatter"), std::string::npos) << flat;
  EXPECT_NE(flat.find("f32[24] = dynamic_update_slice"), std::string::npos) << flat;
  EXPECT_EQ(flat.find("f32[4,6] = dynamic_update_slice"), std::string::npos) << flat;
  // A run that may leave the array (r = 3, c = 4: indices 22..24) keeps the scatter, which
  // drops what falls outside; written out on one dim, as the lowering takes it.
  const std::string kept = simplify_and_compare(row_scatter_program(), {3, 4}, args);
  EXPECT_NE(kept.find("f32[24] = scatter[axis=0 unique_indices=True]"), std::string::npos) << kept;
}

// x.at[i].set(row) and x.at[i].get() with a scalar index (JAX's scatter and refjit's x.at(i)):
// a run of one, so a window where the ranges keep i inside the axis.
TEST(RangeSimplify, AScalarIndexInsideItsAxisIsAWindowOfOne) {
  const char* text = R"({ lambda i:i32[]; x:f32[4,3] v:f32[3]. let
    g:f32[4,3] = scatter[axis=0] x i v
    h:f32[3] = gather[axis=0] g i
  in (g, h) })";
  std::vector<RtValue> args = {random_f32({4, 3}, 3), random_f32({3}, 4)};
  const std::string out = simplify_and_compare(text, {2}, args);
  EXPECT_NE(out.find("f32[4,3] = dynamic_update_slice"), std::string::npos) << out;
  EXPECT_NE(out.find("f32[1,3] = dynamic_slice[slice_sizes=(1, 3)]"), std::string::npos) << out;
  EXPECT_EQ(out.find("scatter"), std::string::npos) << out;
  EXPECT_EQ(out.find("gather"), std::string::npos) << out;
  // i = 4 is past the end: the scatter drops the row and the gather clamps, so both stay.
  const std::string past = simplify_and_compare(text, {4}, args);
  EXPECT_NE(past.find("scatter"), std::string::npos) << past;
  EXPECT_NE(past.find("gather"), std::string::npos) << past;
}

TEST(RangeSimplify, AGatherOfARunInsideOneRowOfTwoDimsIsADynamicSlice) {
  const char* text = R"({ lambda r:i32[] c:i32[]; x:f32[4,6,2]. let
    i:i32[3] = iota[dimension=0 dtype=int32 shape=(3,) sharding=None]
    k:i32[3] = add c i
    m:i32[] = mul r 6:i32[]
    f:i32[3] = add m k
    g:f32[3,2] = gather[axis=0 dims=2] x f
  in (g,) })";
  std::vector<RtValue> args = {random_f32({4, 6, 2}, 8)};
  const std::string out = simplify_and_compare(text, {1, 2}, args);
  EXPECT_NE(out.find("f32[1,3,2] = dynamic_slice[slice_sizes=(1, 3, 2)]"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("gather"), std::string::npos) << out;
  // Across rows (c = 5) it is a window of the flattened dims; past the end (r = 3, c = 5) the
  // gather clamps, so it stays.
  EXPECT_NE(simplify_and_compare(text, {1, 5}, args).find("f32[3,2] = dynamic_slice"),
            std::string::npos);
  EXPECT_NE(simplify_and_compare(text, {3, 5}, args).find("gather"), std::string::npos);
}

TEST(RangeSimplify, AGatherOfARunInsideItsAxisIsADynamicSlice) {
  const char* text = R"({ lambda c:i32[]; x:f32[5,8]. let
    i:i32[3] = iota[dimension=0 dtype=int32 shape=(3,) sharding=None]
    b:i32[3] = broadcast_in_dim[broadcast_dimensions=() shape=(3,) sharding=None] c
    k:i32[3] = sub i b
    f:i32[3] = add b i
    g:f32[5,3] = gather[axis=1] x f
    h:f32[5,3] = gather[axis=1] x k
  in (g, h) })";
  std::vector<RtValue> args = {random_f32({5, 8}, 9)};
  const std::string out = simplify_and_compare(text, {4}, args);
  // c + iota lies in [4, 6]: a window; iota - c runs downward from -4: clamped, kept.
  EXPECT_NE(out.find("f32[5,3] = dynamic_slice[slice_sizes=(5, 3)]"), std::string::npos) << out;
  EXPECT_NE(out.find("gather"), std::string::npos) << out;
  // Past the end (c = 6: 6..8) the gather clamps, so it stays too.
  const std::string past = simplify_and_compare(text, {6}, args);
  EXPECT_EQ(past.find("dynamic_slice"), std::string::npos) << past;
}

// sum((x.at[r, c:c+3].set(concat(v, x[r, c:c+2])))^2).
std::string row_scatter_loss(const std::string& index = kRunIndex) {
  return row_scatter_program(R"(p:f32[4,6] = mul g g
    y:f32[] = reduce_sum[axes=(0, 1)] p)",
                             index);
}

TEST(RangeSimplify, WindowsBeforeAutodiffDifferentiateAsWindowsWithTheSameGradient) {
  const Jaxpr loss = parse(row_scatter_loss());
  const std::vector<RtValue> args = {Array::scalar(int32_t{2}), Array::scalar(int32_t{3}),
                                     random_f32({4, 6}, 11), Array::scalar(0.5f)};
  int changes = 0;
  const Jaxpr windows =
      windows_before_autodiff(loss, {IntRange{2, 2}, IntRange{3, 3}}, {}, &changes);
  verify(windows);
  EXPECT_GT(changes, 0);
  const Jaxpr want = grad_jaxpr(loss, {0, 1}), got = grad_jaxpr(windows, {0, 1});
  // The gradient reads and writes the cotangent through windows: no gather, scatter or the
  // index arithmetic of a flattened view.
  const std::string text = print_jaxpr(got);
  EXPECT_EQ(text.find("scatter"), std::string::npos) << text;
  EXPECT_EQ(text.find("gather"), std::string::npos) << text;
  EXPECT_EQ(text.find(" div "), std::string::npos) << text;
  EXPECT_NE(print_jaxpr(want).find("scatter"), std::string::npos);
  const std::vector<RtValue> a = interpret(want, args), b = interpret(got, args);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (size_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(std::get<Array>(a[k]), std::get<Array>(b[k])) << "output " << k;
  // Ranges under which the run may leave the array (r = 3, c = 4: indices 22..24): the
  // scatter stays, as it drops what falls outside.
  int none = -1;
  const Jaxpr kept = windows_before_autodiff(loss, {IntRange{0, 3}, IntRange{3, 4}}, {}, &none);
  EXPECT_EQ(none, 0) << print_jaxpr(kept);
  // Under which it stays in the array but may cross a row: one window of the flattened x.
  const std::string flat =
      print_jaxpr(windows_before_autodiff(loss, {IntRange{0, 2}, IntRange{0, 5}}));
  EXPECT_EQ(flat.find("scatter"), std::string::npos) << flat;
  EXPECT_NE(flat.find("f32[24] = dynamic_update_slice"), std::string::npos) << flat;
}

// The same loss with the run's iota a captured constant (`col + np.arange(3)`, as JAX passes
// it) and the row a [3, 1] column of an index matrix, as JAX writes x.at[r, cols].
TEST(RangeSimplify, WindowsBeforeAutodiffFoldAConstantRunAndKeepTheProgramsConstants) {
  const Jaxpr loss = parse(row_scatter_loss(R"(r:i32[] c:i32[] q:i32[3]; x:f32[4,6] v:f32[]. let
    k:i32[3] = add c q
    b:i32[3] = broadcast_in_dim[broadcast_dimensions=() shape=(3,) sharding=None] r
    bc:i32[3,1] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(3, 1) sharding=None] b
    kc:i32[3,1] = broadcast_in_dim[broadcast_dimensions=(0,) shape=(3, 1) sharding=None] k
    ix:i32[3,2] = concatenate[dimension=1] bc kc
    rc:i32[3,1] = slice[limit_indices=(3, 1) start_indices=(0, 0) strides=None] ix
    rows:i32[3] = reshape[dimensions=None new_sizes=(3,)] rc
    cc:i32[3,1] = slice[limit_indices=(3, 2) start_indices=(0, 1) strides=None] ix
    cols:i32[3] = reshape[dimensions=None new_sizes=(3,)] cc
    m:i32[3] = mul rows 6:i32[]
    f:i32[3] = add cols m)"));
  const std::vector<std::optional<IntRange>> ranges = {IntRange{2, 2}, IntRange{3, 3},
                                                       IntRange{0, 2}};
  // Knowing only the constant's range, its elements could be in any order.
  int changes = -1;
  EXPECT_EQ(print_jaxpr(windows_before_autodiff(loss, ranges, {}, &changes)), print_jaxpr(loss));
  EXPECT_EQ(changes, 0);
  // Known to be the run 0, 1, 2: one window of row 2, the constants' binders unchanged.
  const std::vector<ConstFold> folds = {{}, {}, {ConstFold::Kind::run, 0}};
  const Jaxpr windows = windows_before_autodiff(loss, ranges, folds, &changes);
  verify(windows);
  EXPECT_GT(changes, 0);
  EXPECT_EQ(windows.constvars.size(), loss.constvars.size());
  for (size_t k = 0; k < loss.constvars.size(); ++k)
    EXPECT_EQ(windows.type_of(windows.constvars[k]), loss.type_of(loss.constvars[k]));
  const Jaxpr want = grad_jaxpr(loss, {0, 1}), got = grad_jaxpr(windows, {0, 1});
  const std::string text = print_jaxpr(got);
  EXPECT_EQ(text.find("scatter"), std::string::npos) << text;
  EXPECT_EQ(text.find(" div "), std::string::npos) << text;
  const std::vector<RtValue> args = {Array::scalar(int32_t{2}), Array::scalar(int32_t{3}),
                                     Array::from_vector<int32_t>({0, 1, 2}, {3}),
                                     random_f32({4, 6}, 13), Array::scalar(0.5f)};
  const std::vector<RtValue> a = interpret(want, args), b = interpret(got, args);
  ASSERT_EQ(a.size(), 3u);
  ASSERT_EQ(b.size(), 3u);
  for (size_t k = 0; k < a.size(); ++k)
    EXPECT_EQ(std::get<Array>(a[k]), std::get<Array>(b[k])) << "output " << k;
}

TEST(RangeSimplify, AReadIsNotMergedWithAZeroingAfterAnotherWrite) {
  const char* text = R"({ lambda ; a:f32[6] i:i32[]. let
    R:Ref{f32[6]} = new_ref a
    v:f32[2] <- R[i:i+2]
    R[0:2] += v
    z:f32[2] = broadcast_in_dim[broadcast_dimensions=() shape=(2,) sharding=None] 0.0:f32[]
    _:f32[2], R[i:i+2] <- R[i:i+2], z
    h:f32[6] = freeze R
  in (v, h) })";
  int changes = 0;
  std::vector<RtValue> args = {random_f32({6}, 6), Array::scalar(int32_t{3})};
  const std::string out = simplify_and_compare(text, {}, args, &changes);
  EXPECT_EQ(changes, 0) << out;
}

}  // namespace
}  // namespace refjit
