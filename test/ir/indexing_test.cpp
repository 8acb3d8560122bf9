#include "refjit/ir/indexing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ir/type_test_util.h"

namespace refjit {
namespace {

using ::testing::HasSubstr;
using namespace refjit::testing;

using Kind = IndexerDim::Kind;

IndexerDim full(int64_t size) { return {Kind::slice, 0, size, 1, false}; }
IndexerDim static_slice(int64_t start, int64_t size, int64_t stride = 1) {
  return {Kind::slice, start, size, stride, false};
}
IndexerDim dynamic_slice(int64_t size) { return {Kind::slice, 0, size, 1, true}; }
IndexerDim static_index(int64_t i) { return {Kind::index, i, 0, 1, false}; }
IndexerDim dynamic_index() { return {Kind::index, 0, 0, 1, true}; }
IndexerDim index_array() { return {Kind::index_array, 0, 0, 1, true}; }

const ArrayType k456{DType::f32, {4, 5, 6}};

TEST(IndexedShape, WholeRefKeepsItsShape) {
  EXPECT_EQ(indexed_shape(k456, Indexer{}, {}), (Shape{4, 5, 6}));
}

TEST(IndexedShape, SlicesKeepDimsAndIndicesDropThem) {
  Indexer idx{{static_slice(1, 2), static_index(4)}};
  EXPECT_EQ(indexed_shape(k456, idx, {}), (Shape{2, 6}));
}

TEST(IndexedShape, StridedSliceTakesSizeElements) {
  Indexer idx{{static_slice(0, 2, 3)}};  // rows 0 and 3
  EXPECT_EQ(indexed_shape(k456, idx, {}), (Shape{2, 5, 6}));
}

TEST(IndexedShape, DynamicPartsConsumeOperandsInDimOrder) {
  Indexer idx{{dynamic_index(), full(5), dynamic_slice(3)}};
  std::vector<Type> dyn{i32({}), i64({})};
  EXPECT_EQ(indexed_shape(k456, idx, dyn), (Shape{5, 3}));
}

TEST(IndexedShape, AdjacentIndexArraysGoWhereTheFirstStands) {
  // r[:, a, b] with a:i32[2,1], b:i32[3] -> broadcast [2,3] at position 1.
  Indexer idx{{full(4), index_array(), index_array()}};
  std::vector<Type> dyn{i32({2, 1}), i32({3})};
  IndexedLayout l = indexed_layout(k456, idx, dyn);
  EXPECT_EQ(l.shape, (Shape{4, 2, 3}));
  EXPECT_EQ(l.array_shape, (Shape{2, 3}));
  EXPECT_EQ(l.array_position, 1);
}

TEST(IndexedShape, SeparatedIndexArraysGoFirst) {
  // r[a, :, b] with a, b: i32[7] -> [7, 5].
  Indexer idx{{index_array(), full(5), index_array()}};
  std::vector<Type> dyn{i32({7}), i32({7})};
  IndexedLayout l = indexed_layout(k456, idx, dyn);
  EXPECT_EQ(l.shape, (Shape{7, 5}));
  EXPECT_EQ(l.array_position, 0);
}

TEST(IndexedShape, AnIntegerIndexDoesNotSeparateIndexArrays) {
  // r[:, 2, a] (a: i32[3]): NumPy would count 2 as advanced too (still adjacent); here the
  // array alone stands after one kept slice dim -> [4, 3].
  Indexer idx{{full(4), static_index(2), index_array()}};
  IndexedLayout l = indexed_layout(k456, idx, std::vector<Type>{i32({3})});
  EXPECT_EQ(l.shape, (Shape{4, 3}));
  EXPECT_EQ(l.array_position, 1);
  // r[2, :, a]: NumPy gives [3, 5] (2 and a are separated advanced indices); here the single
  // array stands after the one kept slice dim -> [5, 3].
  Indexer after{{static_index(2), full(5), index_array()}};
  EXPECT_EQ(indexed_layout(k456, after, std::vector<Type>{i32({3})}).array_position, 1);
  EXPECT_EQ(indexed_shape(k456, after, std::vector<Type>{i32({3})}), (Shape{5, 3}));
}

TEST(IndexedShape, WithoutIndexArraysThereIsNoArrayPosition) {
  Indexer idx{{static_index(0)}};
  EXPECT_EQ(indexed_layout(k456, idx, {}).array_position, -1);
}

TEST(IndexedShape, StaticOutOfBoundsIsRefError) {
  EXPECT_THAT(ref_error([] { indexed_shape(k456, Indexer{{static_index(4)}}, {}); }),
              HasSubstr("E12: Out-of-bounds index: index 4 at indexer dim 0 is outside [0, 4)"));
  EXPECT_THAT(ref_error([] { indexed_shape(k456, Indexer{{static_index(-1)}}, {}); }),
              HasSubstr("Out-of-bounds index"));
  EXPECT_THAT(ref_error([] { indexed_shape(k456, Indexer{{static_slice(3, 2)}}, {}); }),
              HasSubstr("E12: Out-of-bounds slice: indexer dim 0 covers [3, 5) but the ref "
                        "(f32[4,5,6]) has size 4 there"));
  EXPECT_THAT(ref_error([] { indexed_shape(k456, Indexer{{static_slice(0, 3, 2)}}, {}); }),
              HasSubstr("covers [0, 5)"));
  EXPECT_THAT(ref_error([] {
                indexed_shape(k456, Indexer{{dynamic_slice(5)}}, std::vector<Type>{i32({})});
              }),
              HasSubstr("E12: Out-of-bounds slice: indexer dim 0 takes 5 elements"));
}

TEST(IndexedShape, MalformedIndexersAreTypeErrors) {
  Indexer too_long{{full(4), full(5), full(6), full(1)}};
  EXPECT_THAT(type_error([&] { indexed_shape(k456, too_long, {}); }),
              HasSubstr("the indexer has 4 dims but the ref holds f32[4,5,6] of rank 3"));
  EXPECT_THAT(type_error([] { indexed_shape(k456, Indexer{{dynamic_index()}}, {}); }),
              HasSubstr("the indexer has 1 dynamic parts but 0 index operands were given"));
  EXPECT_THAT(type_error([] {
                indexed_shape(k456, Indexer{{dynamic_index()}}, std::vector<Type>{f32({})});
              }),
              HasSubstr("the dynamic index of indexer dim 0 has type f32[]"));
  EXPECT_THAT(type_error([] {
                indexed_shape(k456, Indexer{{dynamic_index()}}, std::vector<Type>{i32({2})});
              }),
              HasSubstr("must be an integer scalar"));
  EXPECT_THAT(type_error([] {
                indexed_shape(k456, Indexer{{index_array()}}, std::vector<Type>{f32({2})});
              }),
              HasSubstr("the index array of indexer dim 0 has type f32[2]"));
  Indexer two_arrays{{index_array(), index_array()}};
  EXPECT_THAT(type_error([&] {
                indexed_shape(k456, two_arrays, std::vector<Type>{i32({2}), i32({3})});
              }),
              HasSubstr("index arrays of shapes [2] and [3] do not broadcast together"));
}

TEST(BroadcastShapes, AlignsTrailingDims) {
  EXPECT_EQ(broadcast_shapes({2, 1}, {3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({}, {4, 5}), (Shape{4, 5}));
  EXPECT_EQ(broadcast_shapes({1, 5}, {4, 1}), (Shape{4, 5}));
}

}  // namespace
}  // namespace refjit
