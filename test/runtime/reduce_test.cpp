#include <cmath>
#include <limits>

#include "eval_test_util.h"

namespace refjit {
namespace {

using namespace refjit::test;

Array reduce(Prim p, const Array& x, IntList axes, Shape out) {
  return eval1(p, {x}, {{"axes", axes}}, at(x.dtype(), out));
}

TEST(Reduce, SumOverOneOrManyAxes) {
  Array x = arr<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(values<int32_t>(reduce(Prim::reduce_sum, x, {0}, {3})),
            (std::vector<int32_t>{5, 7, 9}));
  EXPECT_EQ(values<int32_t>(reduce(Prim::reduce_sum, x, {1}, {2})), (std::vector<int32_t>{6, 15}));
  EXPECT_EQ(values<int32_t>(reduce(Prim::reduce_sum, x, {0, 1}, {})), (std::vector<int32_t>{21}));
  EXPECT_EQ(values<double>(reduce(Prim::reduce_sum, arr<double>({0.5, 0.25}, {2}), {0}, {})),
            (std::vector<double>{0.75}));
}

TEST(Reduce, F32SumAccumulatesInFloat) {
  // In float, 1e8 + 1 + 1 == 1e8 (each 1 is lost); a double accumulator would give 1e8 + 2.
  Array x = vec<float>({1e8f, 1.0f, 1.0f});
  EXPECT_EQ(values<float>(reduce(Prim::reduce_sum, x, {0}, {}))[0], 1e8f);
}

TEST(Reduce, MaxMinAndTheirEmptyIdentities) {
  Array x = arr<float>({3, -1, 7, 2}, {2, 2});
  EXPECT_EQ(values<float>(reduce(Prim::reduce_max, x, {1}, {2})), (std::vector<float>{3, 7}));
  EXPECT_EQ(values<float>(reduce(Prim::reduce_min, x, {0}, {2})), (std::vector<float>{3, -1}));
  Array empty(at(DType::f32, {0}));
  EXPECT_EQ(values<float>(reduce(Prim::reduce_max, empty, {0}, {}))[0],
            -std::numeric_limits<float>::infinity());
  EXPECT_EQ(values<float>(reduce(Prim::reduce_min, empty, {0}, {}))[0],
            std::numeric_limits<float>::infinity());
  Array iempty(at(DType::i64, {0}));
  EXPECT_EQ(values<int64_t>(reduce(Prim::reduce_max, iempty, {0}, {}))[0],
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(values<int64_t>(reduce(Prim::reduce_min, iempty, {0}, {}))[0],
            std::numeric_limits<int64_t>::max());
}

TEST(Reduce, MaxPropagatesNaN) {
  Array x = vec<double>({1.0, std::nan(""), 5.0});
  EXPECT_TRUE(std::isnan(values<double>(reduce(Prim::reduce_max, x, {0}, {}))[0]));
  EXPECT_TRUE(std::isnan(values<double>(reduce(Prim::reduce_min, x, {0}, {}))[0]));
}

TEST(Reduce, BoolOperandIsAnError) {
  EXPECT_THROW(reduce(Prim::reduce_sum, vec<bool>({true}), {0}, {}), Error);
}

Array argmax(const Array& x, int64_t axis, Shape out, DType idx = DType::i32) {
  return eval1(Prim::argmax, {x}, {{"axes", IntList{axis}}, {"index_dtype", idx}}, at(idx, out));
}

TEST(Argmax, FirstMaximalIndex) {
  Array x = arr<int32_t>({1, 5, 5, 9, 2, 9}, {2, 3});
  EXPECT_EQ(values<int32_t>(argmax(x, 1, {2})), (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(values<int64_t>(argmax(x, 0, {3}, DType::i64)), (std::vector<int64_t>{1, 0, 1}));
}

TEST(Argmax, NaNCountsAsMaximal) {
  Array x = vec<float>({1.0f, std::nanf(""), 7.0f, std::nanf("")});
  EXPECT_EQ(values<int32_t>(argmax(x, 0, {})), (std::vector<int32_t>{1}));
}

Array dot(const Array& l, const Array& r, DotDims dd, ArrayType out) {
  return eval1(Prim::dot_general, {l, r},
               {{"dimension_numbers", dd},
                {"precision", NoneParam{}},
                {"preferred_element_type", NoneParam{}}},
               out);
}

TEST(DotGeneral, MatrixProduct) {
  Array a = arr<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array b = arr<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  Array c = dot(a, b, DotDims{{1}, {0}, {}, {}}, at(DType::f32, {2, 2}));
  EXPECT_EQ(values<float>(c), (std::vector<float>{4, 5, 10, 11}));
}

TEST(DotGeneral, BatchDimsComeFirstThenLhsFreeThenRhsFree) {
  // lhs [k=2, b=2, m=1], rhs [b=2, n=3, k=2]; out [b, m, n].
  Array l = arr<int32_t>({1, 2, 3, 4}, {2, 2, 1});  // l[k][b][0]
  Array r = arr<int32_t>({1, 0, 0, 1, 1, 1, 2, 0, 0, 2, 1, 1}, {2, 3, 2});
  Array c = dot(l, r, DotDims{{0}, {2}, {1}, {0}}, at(DType::i32, {2, 1, 3}));
  // b=0: lhs vec (l[0][0], l[1][0]) = (1, 3); rhs rows (1,0),(0,1),(1,1) -> 1, 3, 4
  // b=1: lhs vec (2, 4); rhs rows (2,0),(0,2),(1,1) -> 4, 8, 6
  EXPECT_EQ(values<int32_t>(c), (std::vector<int32_t>{1, 3, 4, 4, 8, 6}));
}

TEST(DotGeneral, OuterProductAndPreferredType) {
  Array a = vec<int32_t>({1, 2});
  Array b = vec<int32_t>({3, 4, 5});
  Array c = dot(a, b, DotDims{}, at(DType::i32, {2, 3}));
  EXPECT_EQ(values<int32_t>(c), (std::vector<int32_t>{3, 4, 5, 6, 8, 10}));
  Array d = eval1(
      Prim::dot_general, {a, vec<int32_t>({3, 4})},
      {{"dimension_numbers", DotDims{{0}, {0}, {}, {}}}, {"preferred_element_type", DType::f32}},
      at(DType::f32, {}));
  EXPECT_EQ(values<float>(d), (std::vector<float>{11}));
}

TEST(DotGeneral, MismatchedContractingSizesAreAnError) {
  EXPECT_THROW(
      dot(vec<float>({1, 2}), vec<float>({1, 2, 3}), DotDims{{0}, {0}, {}, {}}, at(DType::f32, {})),
      Error);
}

}  // namespace
}  // namespace refjit
