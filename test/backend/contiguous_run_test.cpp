// Contiguous index runs (passes/simplify/unit_run.h): gather / scatter / scatter-add whose indices
// are `iota` plus scalars become gather_run / scatter_run (the pass index-runs,
// passes/simplify/index_runs.h); a flattened ref read or written at such a run is
// get_flat_run / swap_flat_run (written by the transposed scatter on a flattened carry). All
// take a block-move fast path when the whole run is in range and the general per-element code
// otherwise. Every case is compared with the interpreter on the original program (for the
// flat runs, their plain form) bit for bit, natively and interpreted, including runs partly or
// wholly out of range, negative starts and i32 wrap-around.
#include <gtest/gtest.h>

#include <climits>

#include "passes/plain_decisions.h"
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
Jaxpr decided(const std::string& text) {
  return with_patterns(parse_jaxpr(text), index_runs_patterns());
}

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

// A flattened ref read and written at a run (get_flat_run / swap_flat_run, as the transposed
// scatter on a flattened carry writes them: passes/ad/cotangent_ref.h), natively and
// interpreted, against the interpreter on the plain form they stand for (the run clamped, then
// split row-major: passes/plain_decisions.h); fast when the run is in range.
void check_flat_run(const std::string& text, const std::vector<RtValue>& args) {
  SCOPED_TRACE(text);
  const Jaxpr decided = parse_jaxpr(text);
  std::optional<Jaxpr> storage;
  const Jaxpr& plain = plain_decisions(decided, storage);
  ASSERT_TRUE(storage.has_value()) << "no flat run to write out";
  EXPECT_FALSE(mentions(plain, "flat_run")) << print_jaxpr(plain);
  expect_decided_matches(plain, decided, args, 0.0);
}

const char* kFlatRunAccess = R"({ lambda ; a:f32[4,6] b:i32[] c:i32[]. let
    R:Ref{f32[4,6]} = new_ref a
    m:i32[] = mul b 6:i32[]
    s:i32[] = add m c
    g:f32[7] = get_flat_run[bound=23 length=7] R s
    z:f32[7] = mul g 2.0:f32[]
    o:f32[7] = swap_flat_run[bound=23 length=7] R s z
    h:f32[4,6] = freeze R
  in (g, o, h) })";

TEST(NativeContiguousRun, RefGetAndSwapOfAFlatRunMatchTheirPlainForm) {
  EXPECT_TRUE(has_memmove(kFlatRunAccess));
  std::optional<Jaxpr> storage;
  EXPECT_FALSE(has_memmove(plain_decisions(parse_jaxpr(kFlatRunAccess), storage)));
  for (auto [b, c] : std::vector<std::pair<int32_t, int32_t>>{
           {0, 0}, {1, 4}, {2, 3}, {3, -1}, {0, -3}, {3, 0}, {-1, 2}, {4, 0}, {0, INT_MAX - 3}}) {
    SCOPED_TRACE(::testing::Message() << "b " << b << " c " << c);
    check_flat_run(kFlatRunAccess, {random_array(at(DType::f32, {4, 6}), 10), i32(b), i32(c)});
  }
}

// After row trimming the clamp bound is larger than the (smaller) ref's last element: still
// the fast path, and every run the clamp or the access would change takes the general one.
TEST(NativeContiguousRun, ClampBoundBeyondTheRefKeepsTheFastPath) {
  std::string text = kFlatRunAccess;
  for (size_t at = text.find("bound=23"); at != std::string::npos; at = text.find("bound=23"))
    text.replace(at, 8, "bound=59");
  EXPECT_TRUE(has_memmove(text));
  for (auto [b, c] : std::vector<std::pair<int32_t, int32_t>>{
           {0, 0}, {1, 4}, {3, -1}, {3, 0}, {4, 0}, {5, 2}, {9, 9}, {-1, 2}})
    check_flat_run(text, {random_array(at(DType::f32, {4, 6}), 12), i32(b), i32(c)});
}

// A rank-3 ref addressed in strides 12 and 4, clamped at 40 (past its 24 elements): a position
// past the end keeps its place within dim 0's last block, as the index arrays' clamping of the
// first index leaves it; runs inside, across the end, wholly past it, below 0 and wrapping.
TEST(NativeContiguousRun, RankThreeFlatRunFoldsPastTheEnd) {
  const char* text = R"({ lambda ; a:f32[2,3,4] c:i32[]. let
    R:Ref{f32[2,3,4]} = new_ref a
    g:f32[5] = get_flat_run[bound=40 length=5] R c
    z:f32[5] = mul g 2.0:f32[]
    o:f32[5] = swap_flat_run[bound=40 length=5] R c z
    h:f32[2,3,4] = freeze R
  in (g, o, h) })";
  for (int32_t c : {0, 7, 19, 20, 22, 30, 38, 45, -2, -9, INT_MAX - 2}) {
    SCOPED_TRACE(::testing::Message() << "c " << c);
    check_flat_run(text, {random_array(at(DType::f32, {2, 3, 4}), 13), i32(c)});
  }
}

}  // namespace
}  // namespace refjit::testing
