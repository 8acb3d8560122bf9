// Slice moves: the move-windows pass (passes/simplify/move_windows.h) makes a
// dynamic_update_slice whose update is a dynamic_slice, or a concatenate containing one, a
// move_windows eqn, lowered as one memmove per piece. Each case runs the pass, then compares
// native code of the decided program with the interpreter on the original one, including
// clamped starts and overlapping shifts.
#include <gtest/gtest.h>

#include "passes/simplify/move_windows.h"
#include "test/backend/test_util.h"

namespace refjit::testing {
namespace {

RtValue i32(int32_t v) { return Array::from_vector<int32_t>({v}, {}); }

int count_prim(const Jaxpr& j, Prim p) {
  int n = 0;
  for (const Eqn& e : j.eqns) n += e.prim == p;
  return n;
}

// The program after move-windows: `moves` move_windows eqns at top level.
Jaxpr decided(const std::string& text, int moves) {
  Jaxpr j = with_patterns(parse_jaxpr(text), move_windows_patterns());
  EXPECT_EQ(count_prim(j, Prim::move_windows), moves) << print_jaxpr(j);
  return j;
}

// The pass's output against its input (test_util.h).
void check_decided(const std::string& text, int moves, const std::vector<RtValue>& args) {
  SCOPED_TRACE(text);
  expect_decided_matches(parse_jaxpr(text), decided(text, moves), args, 1e-6);
}

// A fresh value computed first and the updated value not returned, so the updated buffer
// is a workspace view at a non-zero offset (the address of a memmove must include the
// view's byte shift).
const char* kInsert = R"({ lambda ; y:f32[5] a:f32[3,8] b:i32[] c:i32[] d:f32[]. let
    z:f32[5] = mul y 2.0:f32[]
    e:f32[3,8] = mul a 1.0:f32[]
    f:f32[1,1] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 1)] d
    g:f32[1,4] = dynamic_slice[slice_sizes=(1, 4)] e b c
    h:f32[1,5] = concatenate[dimension=1] f g
    i:f32[3,8] = dynamic_update_slice e h b c
    q:f32[] = reduce_sum[axes=(0,)] z
    p:f32[8,3] = transpose[permutation=(1, 0)] i
  in (q, p) })";

TEST(NativeSliceMove, InsertShiftsTheRowSegmentRightLikeTheInterpreter) {
  for (auto [row, col] :
       std::vector<std::pair<int, int>>{{1, 2}, {0, 0}, {2, 3}, {1, 7}, {5, -3}, {-1, 4}}) {
    SCOPED_TRACE(::testing::Message() << "row " << row << " col " << col);
    check_decided(kInsert, 1,
                  {random_array(at(DType::f32, {5}), 1), random_array(at(DType::f32, {3, 8}), 2),
                   i32(row), i32(col), Array::from_vector<float>({-5.0f}, {})});
  }
}

TEST(NativeSliceMove, InsertIsOneMemmoveWithoutSliceTemporaries) {
  std::string mlir = emit_mlir(decided(kInsert, 1));
  EXPECT_NE(mlir.find("llvm.intr.memmove"), std::string::npos) << mlir;
  // Neither the dynamic_slice nor the concatenate gets a buffer of its own.
  EXPECT_EQ(mlir.find("memref<1x4xf32>"), std::string::npos) << mlir;
  EXPECT_EQ(mlir.find("memref<1x5xf32>"), std::string::npos) << mlir;
}

// The seed's delete inside a scan: shift state[row, col+1:col+1+4] left by one, every step.
TEST(NativeSliceMove, DeleteShiftsLeftInsideAScanCarry) {
  const char* text = R"({ lambda ; a:f32[3,9] r:i32[6] c:i32[6]. let
    b:f32[3,9] = scan[jaxpr={ lambda ; x:f32[3,9] i:i32[] k:i32[]. let
        n:i32[] = add k 1:i32[]
        s:f32[1,4] = dynamic_slice[slice_sizes=(1, 4)] x i n
        y:f32[3,9] = dynamic_update_slice x s i k
      in (y,) } length=6 num_carry=1 num_consts=0 reverse=False] a r c
  in (b,) })";
  const Jaxpr j = with_patterns(parse_jaxpr(text), move_windows_patterns());
  EXPECT_EQ(count_prim(*j.eqns.at(0).params.get<JaxprPtr>("jaxpr"), Prim::move_windows), 1);
  check_decided(text, 0,
                {random_array(at(DType::f32, {3, 9}), 3),
                 Array::from_vector<int32_t>({0, 2, 1, 2, 7, -2}, {6}),
                 Array::from_vector<int32_t>({0, 4, 3, 8, 1, 2}, {6})});
  EXPECT_NE(emit_mlir(j).find("llvm.intr.memmove"), std::string::npos);
}

TEST(NativeSliceMove, PieceFromAnotherBufferIsCopiedIn) {
  const char* text = R"({ lambda ; a:f32[3,8] o:f32[4,6] b:i32[] c:i32[]. let
    e:f32[3,8] = mul a 1.0:f32[]
    g:f32[1,5] = dynamic_slice[slice_sizes=(1, 5)] o c b
    i:f32[3,8] = dynamic_update_slice e g b c
  in (i,) })";
  for (auto [row, col] : std::vector<std::pair<int, int>>{{1, 2}, {2, 3}, {9, -1}})
    check_decided(text, 1,
                  {random_array(at(DType::f32, {3, 8}), 4), random_array(at(DType::f32, {4, 6}), 5),
                   i32(row), i32(col)});
}

// The slice's source is updated between the slice and the update: moving the slice there would
// keep e alive past that update (which would then copy e), so the slice stays where it is, and
// the result still matches.
TEST(NativeSliceMove, SliceWhoseSourceIsUpdatedInBetweenIsNotMoved) {
  const char* text = R"({ lambda ; a:f32[3,8] b:i32[] c:i32[]. let
    e:f32[3,8] = mul a 1.0:f32[]
    g:f32[1,4] = dynamic_slice[slice_sizes=(1, 4)] e b c
    z:f32[1,8] = broadcast_in_dim[broadcast_dimensions=() shape=(1, 8)] 7.0:f32[]
    f:f32[3,8] = dynamic_update_slice e z b 0:i32[]
    i:f32[3,8] = dynamic_update_slice f g b 1:i32[]
  in (i,) })";
  const Jaxpr j = decided(text, 0);
  EXPECT_EQ(count_prim(j, Prim::dynamic_slice), 1);
  check_decided(text, 0, {random_array(at(DType::f32, {3, 8}), 6), i32(1), i32(2)});
}

}  // namespace
}  // namespace refjit::testing
