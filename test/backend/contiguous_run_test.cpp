// Contiguous index runs (passes/simplify/unit_run.h): gather / scatter / scatter-add whose indices
// are `iota` plus scalars become gather_run / scatter_run (the pass index-runs,
// passes/simplify/index_runs.h), and ref get/swap through the row-major split of such a run (the
// transposed scatter on a flattened carry) become get_flat_run / swap_flat_run; all take a
// block-move fast path when the whole run is in range and the general per-element code
// otherwise. Every case is compared with the interpreter on the original program bit for bit,
// natively and interpreted, including runs partly or wholly out of range,
// negative starts and i32 wrap-around.
#include <gtest/gtest.h>

#include <climits>

#include "passes/simplify/index_runs.h"
#include "test/backend/test_util.h"

namespace refjit::testing {
namespace {

RtValue i32(int32_t v) { return Array::from_vector<int32_t>({v}, {}); }

bool has_memmove(const Jaxpr& j) {
  return emit_mlir(j).find("llvm.intr.memmove") != std::string::npos;
}
bool has_memmove(const std::string& text) { return has_memmove(parse_jaxpr(text)); }

// `text` after the index-runs pass.
Jaxpr decided(const std::string& text) { return index_runs(parse_jaxpr(text)); }

bool mentions(const Jaxpr& j, std::string_view word) {
  return print_jaxpr(j).find(word) != std::string::npos;
}

// The decided program natively and interpreted, against the interpreter on `text`: exactly.
void check_decided(const std::string& text, const std::vector<RtValue>& args) {
  SCOPED_TRACE(text);
  expect_decided_matches(parse_jaxpr(text), decided(text), args, 0.0);
}

// x.flat[row * 8 + col + iota(5)] = u (the seed's x.at[row, cols].set), on a fresh buffer.
const char* kScatterRun = R"({ lambda ; a:f32[4,8] u:f32[5] r:i32[] c:i32[]. let
    x:f32[4,8] = mul a 1.0:f32[]
    f:f32[32] = reshape[dimensions=None new_sizes=(32,)] x
    q:i32[5] = iota[dimension=0 dtype=int32 shape=(5,)]
    k:i32[5] = add c q
    m:i32[] = mul r 8:i32[]
    i:i32[5] = add m k
    s:f32[32] = scatter[axis=0 unique_indices=True] f i u
    o:f32[4,8] = reshape[dimensions=None new_sizes=(4, 8)] s
  in (o,) })";

// Starts: in range (also crossing a row), at both ends, partly below / above, wholly out of
// range, and so large that the i32 index wraps around past INT_MAX.
const std::vector<std::pair<int32_t, int32_t>> kStarts = {
    {1, 2}, {0, 0}, {3, 3}, {2, 6}, {0, -2}, {3, 5}, {-1, 0}, {5, 0}, {0, -40}, {0, INT_MAX - 2}};

TEST(NativeContiguousRun, ScatterSetOfARunMatchesTheInterpreter) {
  for (auto [r, c] : kStarts) {
    SCOPED_TRACE(::testing::Message() << "row " << r << " col " << c);
    check_decided(kScatterRun, {random_array(at(DType::f32, {4, 8}), 1),
                                random_array(at(DType::f32, {5}), 2), i32(r), i32(c)});
  }
}

TEST(NativeContiguousRun, ScatterSetOfARunIsAMemmove) {
  const Jaxpr j = decided(kScatterRun);
  EXPECT_TRUE(mentions(j, "scatter_run[axis=0 combine=set]")) << print_jaxpr(j);
  EXPECT_FALSE(mentions(j, "iota")) << "the index vector is still made:\n" << print_jaxpr(j);
  EXPECT_TRUE(has_memmove(j));
  // The backend decides nothing of its own on a plain scatter any more.
  EXPECT_FALSE(has_memmove(kScatterRun));
}

TEST(NativeContiguousRun, ScatterAddOfARunMatchesTheInterpreter) {
  std::string text = kScatterRun;
  const std::string from = "scatter[axis=0 unique_indices=True]";
  text.replace(text.find(from), from.size(), "scatter-add[axis=0]");
  for (auto [r, c] : kStarts) {
    SCOPED_TRACE(::testing::Message() << "row " << r << " col " << c);
    check_decided(text, {random_array(at(DType::f32, {4, 8}), 3),
                         random_array(at(DType::f32, {5}), 4), i32(r), i32(c)});
  }
}

// Scatter on axis 1 of a rank-3 operand: one block per leading index, trailing dims moved
// along; `sub` of a scalar keeps a unit run.
TEST(NativeContiguousRun, ScatterRunOnAMiddleAxisMatchesTheInterpreter) {
  const char* text = R"({ lambda ; a:f32[2,6,3] u:f32[2,3,3] c:i32[]. let
    x:f32[2,6,3] = mul a 1.0:f32[]
    q:i32[3] = iota[dimension=0 dtype=int32 shape=(3,)]
    i:i32[3] = sub q c
    s:f32[2,6,3] = scatter[axis=1] x i u
  in (s,) })";
  EXPECT_TRUE(has_memmove(decided(text)));
  for (int32_t c : {0, -3, 1, 2, -4, 3, 7}) {
    SCOPED_TRACE(::testing::Message() << "c " << c);
    check_decided(text, {random_array(at(DType::f32, {2, 6, 3}), 5),
                         random_array(at(DType::f32, {2, 3, 3}), 6), i32(c)});
  }
}

// `c - iota` runs downwards: not a unit run, so no fast path, and still correct.
TEST(NativeContiguousRun, DescendingIndicesTakeTheGeneralPath) {
  const char* text = R"({ lambda ; a:f32[8] u:f32[4] c:i32[]. let
    x:f32[8] = mul a 1.0:f32[]
    q:i32[4] = iota[dimension=0 dtype=int32 shape=(4,)]
    i:i32[4] = sub c q
    s:f32[8] = scatter[axis=0] x i u
  in (s,) })";
  EXPECT_FALSE(mentions(decided(text), "scatter_run"));
  EXPECT_FALSE(has_memmove(decided(text)));
  for (int32_t c : {5, 3, 1, 9})
    check_decided(
        text, {random_array(at(DType::f32, {8}), 7), random_array(at(DType::f32, {4}), 8), i32(c)});
}

TEST(NativeContiguousRun, GatherOfARunMatchesTheInterpreterAndClampsOutside) {
  const char* text = R"({ lambda ; x:f32[3,7] r:i32[] c:i32[]. let
    q:i32[4] = iota[dimension=0 dtype=int32 shape=(4,)]
    k:i32[4] = add q c
    g:f32[3,4] = gather[axis=1] x k
    h:i64[4] = iota[dimension=0 dtype=int64 shape=(4,)]
    r64:i64[] = convert_element_type[new_dtype=int64 weak_type=False] r
    j:i64[4] = add r64 h
    y:f32[21] = reshape[dimensions=None new_sizes=(21,)] x
    w:f32[4] = gather[axis=0] y j
  in (g, w) })";
  const Jaxpr j = decided(text);
  EXPECT_TRUE(mentions(j, "gather_run[axis=1 length=4]")) << print_jaxpr(j);
  EXPECT_TRUE(mentions(j, "gather_run[axis=0 length=4]")) << print_jaxpr(j);
  EXPECT_TRUE(has_memmove(j));
  for (auto [r, c] : std::vector<std::pair<int32_t, int32_t>>{
           {0, 0}, {17, 3}, {18, 4}, {-2, -1}, {20, 6}, {-9, 9}, {INT_MAX - 1, INT_MAX - 1}}) {
    SCOPED_TRACE(::testing::Message() << "r " << r << " c " << c);
    check_decided(text, {random_array(at(DType::f32, {3, 7}), 9), i32(r), i32(c)});
  }
}

// The transposed scatter on a flattened ref R (passes/ad/accum.cpp view_indexer): read and
// zero R at the row-major split of clamp(run); fast when the run is in range.
const char* kSplitRunAccess = R"({ lambda ; a:f32[4,6] b:i32[] c:i32[]. let
    R:Ref{f32[4,6]} = new_ref a
    q:i32[7] = iota[dimension=0 dtype=int32 shape=(7,)]
    k:i32[7] = add c q
    m:i32[] = mul b 6:i32[]
    i:i32[7] = add m k
    x:i32[7] = max i 0:i32[]
    y:i32[7] = min x 23:i32[]
    d:i32[7] = div y 6:i32[]
    e:i32[7] = mul d 6:i32[]
    f:i32[7] = sub y e
    g:f32[7] <- R[d,f]
    z:f32[7] = mul g 2.0:f32[]
    o:f32[7], R[d,f] <- R[d,f], z
    h:f32[4,6] = freeze R
  in (g, o, h) })";

TEST(NativeContiguousRun, RefGetAndSwapThroughASplitRunMatchTheInterpreter) {
  const Jaxpr j = decided(kSplitRunAccess);
  EXPECT_TRUE(mentions(j, "get_flat_run[bound=23 length=7]")) << print_jaxpr(j);
  EXPECT_TRUE(mentions(j, "swap_flat_run[bound=23 length=7]")) << print_jaxpr(j);
  EXPECT_FALSE(mentions(j, "div")) << "the split is still computed:\n" << print_jaxpr(j);
  EXPECT_TRUE(has_memmove(j));
  EXPECT_FALSE(has_memmove(kSplitRunAccess));  // a plain get or swap: no run of its own
  for (auto [b, c] : std::vector<std::pair<int32_t, int32_t>>{
           {0, 0}, {1, 4}, {2, 3}, {3, -1}, {0, -3}, {3, 0}, {-1, 2}, {4, 0}, {0, INT_MAX - 3}}) {
    SCOPED_TRACE(::testing::Message() << "b " << b << " c " << c);
    check_decided(kSplitRunAccess, {random_array(at(DType::f32, {4, 6}), 10), i32(b), i32(c)});
  }
}

// A split whose row factor does not match R's row length is not the row-major split of a
// run: no fast path, and still correct.
TEST(NativeContiguousRun, MismatchedSplitTakesTheGeneralPath) {
  std::string text = kSplitRunAccess;
  text.replace(text.find("e:i32[7] = mul d 6"), 18, "e:i32[7] = mul d 5");
  EXPECT_FALSE(mentions(decided(text), "flat_run"));
  EXPECT_FALSE(has_memmove(decided(text)));
  for (auto [b, c] : std::vector<std::pair<int32_t, int32_t>>{{0, 0}, {1, 4}, {3, -1}})
    check_decided(text, {random_array(at(DType::f32, {4, 6}), 11), i32(b), i32(c)});
}

// After row trimming the clamp bound is larger than the (smaller) ref's last element: still
// the fast path, and every run the clamp or the access would change takes the general one.
TEST(NativeContiguousRun, ClampBoundBeyondTheRefKeepsTheFastPath) {
  std::string text = kSplitRunAccess;
  text.replace(text.find("min x 23"), 8, "min x 59");
  EXPECT_TRUE(mentions(decided(text), "get_flat_run[bound=59 length=7]"));
  EXPECT_TRUE(has_memmove(decided(text)));
  for (auto [b, c] : std::vector<std::pair<int32_t, int32_t>>{
           {0, 0}, {1, 4}, {3, -1}, {3, 0}, {4, 0}, {5, 2}, {9, 9}, {-1, 2}})
    check_decided(text, {random_array(at(DType::f32, {4, 6}), 12), i32(b), i32(c)});
}

// A rank-3 ref split by strides 12 and 4, clamped at 40 (past its 24 elements): a position
// past the end keeps its place within dim 0's last block, as the index arrays' clamping of the
// first index leaves it; runs inside, across the end, wholly past it, below 0 and wrapping.
TEST(NativeContiguousRun, RankThreeSplitRunFoldsPastTheEnd) {
  const char* text = R"({ lambda ; a:f32[2,3,4] c:i32[]. let
    R:Ref{f32[2,3,4]} = new_ref a
    q:i32[5] = iota[dimension=0 dtype=int32 shape=(5,)]
    x:i32[5] = add q c
    m:i32[5] = max x 0:i32[]
    y:i32[5] = min m 40:i32[]
    d:i32[5] = div y 12:i32[]
    s:i32[5] = div y 4:i32[]
    t:i32[5] = mul d 3:i32[]
    e:i32[5] = sub s t
    u:i32[5] = mul s 4:i32[]
    f:i32[5] = sub y u
    g:f32[5] <- R[d,e,f]
    z:f32[5] = mul g 2.0:f32[]
    o:f32[5], R[d,e,f] <- R[d,e,f], z
    h:f32[2,3,4] = freeze R
  in (g, o, h) })";
  const Jaxpr j = decided(text);
  EXPECT_TRUE(mentions(j, "get_flat_run[bound=40 length=5]")) << print_jaxpr(j);
  EXPECT_TRUE(mentions(j, "swap_flat_run[bound=40 length=5]")) << print_jaxpr(j);
  for (int32_t c : {0, 7, 19, 20, 22, 30, 38, 45, -2, -9, INT_MAX - 2}) {
    SCOPED_TRACE(::testing::Message() << "c " << c);
    check_decided(text, {random_array(at(DType::f32, {2, 3, 4}), 13), i32(c)});
  }
}

}  // namespace
}  // namespace refjit::testing
