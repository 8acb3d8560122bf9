#include "eval_test_util.h"

namespace refjit {
namespace {

using namespace refjit::test;

TEST(BroadcastInDim, ExpandsSizeOneAndNewDims) {
  Array x = arr<int32_t>({1, 2, 3}, {3, 1});
  Array y = eval1(Prim::broadcast_in_dim, {x},
                  {{"shape", IntList{2, 3, 2}},
                   {"broadcast_dimensions", IntList{1, 2}},
                   {"sharding", NoneParam{}}},
                  at(DType::i32, {2, 3, 2}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  Array s =
      eval1(Prim::broadcast_in_dim, {Array::scalar<bool>(true)},
            {{"shape", IntList{2}}, {"broadcast_dimensions", IntList{}}}, at(DType::bool_, {2}));
  EXPECT_EQ(values<bool>(s), (std::vector<bool>{true, true}));
}

TEST(Reshape, KeepsRowMajorOrder) {
  Array x = arr<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array y = eval1(Prim::reshape, {x}, {{"new_sizes", IntList{3, 2}}, {"dimensions", NoneParam{}}},
                  at(DType::f64, {3, 2}));
  EXPECT_EQ(y, arr<double>({1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_THROW(eval1(Prim::reshape, {x}, {{"new_sizes", IntList{4}}}, at(DType::f64, {4})), Error);
}

TEST(SqueezeExpandDims, DropAndInsertUnitDims) {
  Array x = arr<int64_t>({7, 8}, {1, 2, 1});
  EXPECT_EQ(eval1(Prim::squeeze, {x}, {{"dimensions", IntList{0, 2}}}, at(DType::i64, {2})),
            vec<int64_t>({7, 8}));
  EXPECT_THROW(eval1(Prim::squeeze, {x}, {{"dimensions", IntList{1}}}, at(DType::i64, {1, 1})),
               Error);
  EXPECT_EQ(eval1(Prim::expand_dims, {vec<int64_t>({7, 8})}, {{"dimensions", IntList{0, 2}}},
                  at(DType::i64, {1, 2, 1})),
            x);
}

TEST(Transpose, PermutesDims) {
  Array x = arr<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2});
  Array y =
      eval1(Prim::transpose, {x}, {{"permutation", IntList{2, 0, 1}}}, at(DType::i32, {2, 2, 3}));
  // y[a][b][c] = x[b][c][a]
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11}));
}

TEST(Concatenate, JoinsAlongDimension) {
  Array a = arr<float>({1, 2, 3, 4}, {2, 2});
  Array b = arr<float>({5, 6}, {2, 1});
  Array y = eval1(Prim::concatenate, {a, b}, {{"dimension", int64_t{1}}}, at(DType::f32, {2, 3}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{1, 2, 5, 3, 4, 6}));
  Array z = eval1(Prim::concatenate, {vec<bool>({true}), vec<bool>({false, true})},
                  {{"dimension", int64_t{0}}}, at(DType::bool_, {3}));
  EXPECT_EQ(values<bool>(z), (std::vector<bool>{true, false, true}));
}

TEST(Pad, LowHighAndInteriorPadding) {
  Array x = vec<int32_t>({1, 2, 3});
  Array y = eval1(Prim::pad, {x, Array::scalar<int32_t>(0)},
                  {{"padding_config", IntListList{{2, 1, 1}}}}, at(DType::i32, {8}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{0, 0, 1, 0, 2, 0, 3, 0}));
}

TEST(Pad, NegativePaddingCrops) {
  Array x = arr<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  // dim 0: lo=1 hi=0; dim 1: lo=-1, hi=-1, interior 1 -> 3+2-2 = 3.
  Array y =
      eval1(Prim::pad, {x, Array::scalar<float>(-1)},
            {{"padding_config", IntListList{{1, 0, 0}, {-1, -1, 1}}}}, at(DType::f32, {3, 3}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{-1, -1, -1, -1, 2, -1, -1, 5, -1}));
}

TEST(Slice, StaticStridedWindow) {
  Array x = arr<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  Array y = eval1(Prim::slice, {x},
                  {{"start_indices", IntList{1, 0}},
                   {"limit_indices", IntList{3, 4}},
                   {"strides", IntList{1, 3}}},
                  at(DType::i32, {2, 2}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{4, 7, 8, 11}));
  Array z = eval1(Prim::slice, {x},
                  {{"start_indices", IntList{0, 1}},
                   {"limit_indices", IntList{1, 3}},
                   {"strides", NoneParam{}}},
                  at(DType::i32, {1, 2}));
  EXPECT_EQ(values<int32_t>(z), (std::vector<int32_t>{1, 2}));
}

TEST(DynamicSlice, ClampsStartIntoRange) {
  Array x = vec<double>({0, 1, 2, 3, 4});
  auto ds = [&](int32_t i) {
    return values<double>(eval1(Prim::dynamic_slice, {x, Array::scalar<int32_t>(i)},
                                {{"slice_sizes", IntList{2}}}, at(DType::f64, {2})));
  };
  EXPECT_EQ(ds(1), (std::vector<double>{1, 2}));
  EXPECT_EQ(ds(4), (std::vector<double>{3, 4}));
  EXPECT_EQ(ds(100), (std::vector<double>{3, 4}));
  EXPECT_EQ(ds(-3), (std::vector<double>{0, 1}));
}

TEST(DynamicSlice, TwoDimensionalWithInt64Starts) {
  Array x = arr<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8}, {3, 3});
  Array y = eval1(Prim::dynamic_slice, {x, Array::scalar<int64_t>(2), Array::scalar<int64_t>(1)},
                  {{"slice_sizes", IntList{2, 2}}}, at(DType::i32, {2, 2}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{4, 5, 7, 8}));
}

TEST(DynamicUpdateSlice, WritesAtClampedStart) {
  Array x = vec<int32_t>({0, 0, 0, 0});
  Array u = vec<int32_t>({7, 8});
  auto dus = [&](int32_t i) {
    return values<int32_t>(
        eval1(Prim::dynamic_update_slice, {x, u, Array::scalar<int32_t>(i)}, {}, x.type()));
  };
  EXPECT_EQ(dus(1), (std::vector<int32_t>{0, 7, 8, 0}));
  EXPECT_EQ(dus(3), (std::vector<int32_t>{0, 0, 7, 8}));
  EXPECT_EQ(dus(-1), (std::vector<int32_t>{7, 8, 0, 0}));
  EXPECT_EQ(values<int32_t>(x), (std::vector<int32_t>{0, 0, 0, 0}));  // input unchanged
}

TEST(Iota, CountsAlongDimension) {
  Array y = eval1(Prim::iota, {},
                  {{"dtype", DType::i32},
                   {"shape", IntList{2, 3}},
                   {"dimension", int64_t{1}},
                   {"sharding", NoneParam{}}},
                  at(DType::i32, {2, 3}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  Array f = eval1(Prim::iota, {},
                  {{"dtype", DType::f32}, {"shape", IntList{3, 1}}, {"dimension", int64_t{0}}},
                  at(DType::f32, {3, 1}));
  EXPECT_EQ(values<float>(f), (std::vector<float>{0, 1, 2}));
}

TEST(Gather, TakesRowsAndClampsIndices) {
  Array x = arr<float>({0, 1, 2, 10, 11, 12}, {2, 3});
  Array idx = arr<int32_t>({2, -1, 5, 0}, {2, 2});
  Array y = eval1(Prim::gather, {x, idx}, {{"axis", int64_t{1}}}, at(DType::f32, {2, 2, 2}));
  // y[r][a][b] = x[r][clamp(idx[a][b])]: idx clamps to {2, 0, 2, 0}.
  EXPECT_EQ(values<float>(y), (std::vector<float>{2, 0, 2, 0, 12, 10, 12, 10}));
  Array z = eval1(Prim::gather, {x, vec<int64_t>({1, 1})}, {{"axis", int64_t{0}}},
                  at(DType::f32, {2, 3}));
  EXPECT_EQ(values<float>(z), (std::vector<float>{10, 11, 12, 10, 11, 12}));
}

TEST(Scatter, DropsOutOfRangeAndLastDuplicateWins) {
  Array x = vec<int32_t>({0, 0, 0, 0});
  Array idx = vec<int32_t>({1, 7, 1, -1, 3});
  Array u = vec<int32_t>({5, 6, 9, 8, 4});
  Array y = eval1(Prim::scatter, {x, idx, u}, {{"axis", int64_t{0}}}, x.type());
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{0, 9, 0, 4}));
}

TEST(ScatterAdd, AccumulatesDuplicatesAndDropsOutOfRange) {
  Array x = arr<double>({1, 1, 1, 1, 1, 1}, {2, 3});
  Array idx = vec<int32_t>({0, 2, 0, 3});
  Array u = arr<double>({1, 2, 3, 4, 10, 20, 30, 40}, {2, 4});
  Array y = eval1(Prim::scatter_add, {x, idx, u}, {{"axis", int64_t{1}}}, x.type());
  EXPECT_EQ(values<double>(y), (std::vector<double>{5, 1, 3, 41, 1, 21}));
}

TEST(Scatter, WrongUpdateShapeIsAnError) {
  EXPECT_THROW(eval1(Prim::scatter, {vec<int32_t>({0, 0}), vec<int32_t>({0}), vec<int32_t>({1, 2})},
                     {{"axis", int64_t{0}}}, at(DType::i32, {2})),
               Error);
}

}  // namespace
}  // namespace refjit
