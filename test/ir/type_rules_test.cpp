#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "ir/type_test_util.h"
#include "refjit/ir/builder.h"

namespace refjit {
namespace {

using ::testing::HasSubstr;
using namespace refjit::testing;

using Types = std::vector<Type>;

TEST(TypeRuleTable, EveryPrimitiveHasARule) {
  for (int i = 0; i < kNumPrims; ++i)
    EXPECT_NE(prim_info(static_cast<Prim>(i)).type_rule, nullptr)
        << prim_name(static_cast<Prim>(i));
}

// ---- Elementwise ----

TEST(ElementwiseTypes, FloatUnaryKeepsType) {
  for (Prim p :
       {Prim::exp, Prim::log, Prim::log1p, Prim::expm1, Prim::sin, Prim::cos, Prim::tan, Prim::tanh,
        Prim::logistic, Prim::sqrt, Prim::rsqrt, Prim::floor, Prim::ceil, Prim::round}) {
    EXPECT_EQ(infer(p, {f32({3, 2})}), Types{f32({3, 2})}) << prim_name(p);
    EXPECT_EQ(infer(p, {f64({})}), Types{f64({})}) << prim_name(p);
  }
}

TEST(ElementwiseTypes, FloatUnaryRejectsIntegers) {
  EXPECT_THAT(type_error([] { infer(Prim::exp, {i32({3})}); }),
              HasSubstr("exp: operand 0 has type i32[3] but a float or complex dtype is needed"));
  EXPECT_THAT(type_error([] { infer(Prim::floor, {boolean({})}); }), HasSubstr("floor: operand 0"));
}

TEST(ElementwiseTypes, NumberUnaryAcceptsIntsAndFloats) {
  for (Prim p : {Prim::neg, Prim::abs, Prim::sign}) {
    EXPECT_EQ(infer(p, {i32({4})}), Types{i32({4})}) << prim_name(p);
    EXPECT_EQ(infer(p, {f64({2, 2})}), Types{f64({2, 2})}) << prim_name(p);
    EXPECT_THAT(type_error([p] { infer(p, {boolean({4})}); }), HasSubstr("numeric dtype"));
  }
}

TEST(ElementwiseTypes, AnyDtypeUnaryKeepsType) {
  for (Prim p : {Prim::stop_gradient, Prim::copy}) {
    EXPECT_EQ(infer(p, {boolean({2})}), Types{boolean({2})});
    EXPECT_EQ(infer(p, {f32({})}), Types{f32({})});
  }
}

TEST(ElementwiseTypes, NotTakesBoolOrInt) {
  EXPECT_EQ(infer(Prim::not_, {boolean({5})}), Types{boolean({5})});
  EXPECT_EQ(infer(Prim::not_, {i64({})}), Types{i64({})});
  EXPECT_THAT(type_error([] { infer(Prim::not_, {f32({5})}); }),
              HasSubstr("not: operand 0 has type f32[5] but a bool or integer dtype is needed"));
}

TEST(ElementwiseTypes, RoundChecksRoundingMethod) {
  EXPECT_EQ(infer(Prim::round, {f32({2})}, {{"rounding_method", int64_t{1}}}), Types{f32({2})});
  EXPECT_THAT(type_error([] {
                infer(Prim::round, {f32({2})}, {{"rounding_method", int64_t{3}}});
              }),
              HasSubstr("rounding_method=3"));
}

TEST(ElementwiseTypes, IntegerPowNeedsNonNegativeExponentForInts) {
  EXPECT_EQ(infer(Prim::integer_pow, {i32({3})}, {{"y", int64_t{3}}}), Types{i32({3})});
  EXPECT_EQ(infer(Prim::integer_pow, {f32({3})}, {{"y", int64_t{-2}}}), Types{f32({3})});
  EXPECT_THAT(type_error([] {
                infer(Prim::integer_pow, {i32({3})}, {{"y", int64_t{-1}}});
              }),
              HasSubstr("exponent y=-1 is negative"));
  EXPECT_THAT(type_error([] { infer(Prim::integer_pow, {i32({3})}); }),
              HasSubstr("integer_pow: missing param 'y'"));
}

TEST(ElementwiseTypes, ConvertElementTypeGivesNewDtype) {
  EXPECT_EQ(infer(Prim::convert_element_type, {f32({2, 3})},
                  {{"new_dtype", DType::i32}, {"weak_type", false}}),
            Types{i32({2, 3})});
  EXPECT_EQ(infer(Prim::convert_element_type, {i32({})}, {{"new_dtype", DType::bool_}}),
            Types{boolean({})});
  EXPECT_THAT(type_error([] {
                infer(Prim::convert_element_type, {f32({2})}, {{"new_dtype", int64_t{1}}});
              }),
              HasSubstr("param 'new_dtype' has the wrong kind of value"));
}

TEST(ElementwiseTypes, BinaryBroadcastsAScalar) {
  for (Prim p : {Prim::add, Prim::add_any, Prim::sub, Prim::mul, Prim::div, Prim::max, Prim::min}) {
    EXPECT_EQ(infer(p, {f32({3}), f32({3})}), Types{f32({3})}) << prim_name(p);
    EXPECT_EQ(infer(p, {i32({}), i32({2, 2})}), Types{i32({2, 2})}) << prim_name(p);
    EXPECT_EQ(infer(p, {f64({4}), f64({})}), Types{f64({4})}) << prim_name(p);
  }
  EXPECT_EQ(infer(Prim::pow, {f32({3}), f32({})}), Types{f32({3})});
}

TEST(ElementwiseTypes, BinaryRejectsShapeMismatch) {
  EXPECT_THAT(type_error([] {
                infer(Prim::add, {f32({3}), f32({4})});
              }),
              HasSubstr("add: operand 1 has type f32[4] but operand 0 has type f32[3]; binary "
                        "operands must have equal shapes or one must be a scalar"));
}

TEST(ElementwiseTypes, BinaryRejectsDtypeMismatch) {
  EXPECT_THAT(type_error([] {
                infer(Prim::mul, {f32({3}), i32({3})});
              }),
              HasSubstr("mul: operand 1 has type i32[3] but operand 0 has type f32[3]; binary "
                        "operands must have the same dtype"));
}

TEST(ElementwiseTypes, BinaryRejectsBoolArithmeticAndIntPow) {
  EXPECT_THAT(type_error([] {
                infer(Prim::add, {boolean({}), boolean({})});
              }),
              HasSubstr("add: operand 0 has type bool[] but a numeric dtype"));
  EXPECT_THAT(type_error([] {
                infer(Prim::pow, {i32({}), i32({})});
              }),
              HasSubstr("pow: operand 0 has type i32[] but a float or complex dtype"));
}

TEST(ElementwiseTypes, BinaryRejectsRefOperand) {
  EXPECT_THAT(type_error([] {
                infer(Prim::add, {ref_f32({3}), f32({3})});
              }),
              HasSubstr("add: operand 0 has type Ref{f32[3]} but an array is needed"));
}

TEST(ElementwiseTypes, ComparisonsGiveBool) {
  for (Prim p : {Prim::eq, Prim::ne, Prim::lt, Prim::le, Prim::gt, Prim::ge}) {
    EXPECT_EQ(infer(p, {f32({2}), f32({})}), Types{boolean({2})}) << prim_name(p);
    EXPECT_EQ(infer(p, {boolean({}), boolean({})}), Types{boolean({})}) << prim_name(p);
  }
}

TEST(ElementwiseTypes, LogicalOpsTakeBoolOrInt) {
  for (Prim p : {Prim::and_, Prim::or_}) {
    EXPECT_EQ(infer(p, {boolean({2}), boolean({2})}), Types{boolean({2})});
    EXPECT_EQ(infer(p, {i32({2}), i32({})}), Types{i32({2})});
    EXPECT_THAT(type_error([p] {
                  infer(p, {f32({2}), f32({2})});
                }),
                HasSubstr("operand 0 has type f32[2] but a bool or integer dtype"));
  }
}

TEST(ElementwiseTypes, SelectNPicksCaseType) {
  EXPECT_EQ(infer(Prim::select_n, {boolean({3}), f32({3}), f32({3})}), Types{f32({3})});
  EXPECT_EQ(infer(Prim::select_n, {boolean({}), f32({3}), f32({3})}), Types{f32({3})});
  EXPECT_EQ(infer(Prim::select_n, {i32({3}), i64({3}), i64({3}), i64({3})}), Types{i64({3})});
  EXPECT_EQ(infer(Prim::select_n, {i32({}), f32({})}), Types{f32({})});
}

TEST(ElementwiseTypes, SelectNErrors) {
  EXPECT_THAT(type_error([] {
                infer(Prim::select_n, {boolean({}), f32({}), f32({}), f32({})});
              }),
              HasSubstr("a bool predicate selects between exactly 2 cases, got 3"));
  EXPECT_THAT(type_error([] {
                infer(Prim::select_n, {f32({}), f32({}), f32({})});
              }),
              HasSubstr("operand 0 (the predicate) has type f32[] but must be bool or i32"));
  EXPECT_THAT(type_error([] {
                infer(Prim::select_n, {boolean({}), f32({2}), f32({3})});
              }),
              HasSubstr("operand 2 has type f32[3] but operand 1 has type f32[2]"));
  EXPECT_THAT(type_error([] {
                infer(Prim::select_n, {boolean({2}), f32({3}), f32({3})});
              }),
              HasSubstr("the predicate must be a scalar or have the cases' shape"));
  EXPECT_THAT(type_error([] { infer(Prim::select_n, {boolean({})}); }),
              HasSubstr("select_n: expected at least 2 operands, got 1"));
}

TEST(ElementwiseTypes, WrongOperandCount) {
  EXPECT_THAT(type_error([] {
                infer(Prim::neg, {f32({}), f32({})});
              }),
              HasSubstr("neg: expected 1 operand, got 2"));
  EXPECT_THAT(type_error([] { infer(Prim::sub, {f32({})}); }),
              HasSubstr("sub: expected 2 operands, got 1"));
}

// ---- Shapes ----

TEST(ShapeTypes, BroadcastInDim) {
  Params p{{"shape", IntList{2, 3, 4}},
           {"broadcast_dimensions", IntList{0, 2}},
           {"sharding", NoneParam{}}};
  EXPECT_EQ(infer(Prim::broadcast_in_dim, {f32({2, 1})}, p), Types{f32({2, 3, 4})});
  EXPECT_EQ(infer(Prim::broadcast_in_dim, {f32({})},
                  {{"shape", IntList{5}}, {"broadcast_dimensions", IntList{}}}),
            Types{f32({5})});
  EXPECT_THAT(type_error([&] {
                infer(Prim::broadcast_in_dim, {f32({2, 3})}, p);
              }),
              HasSubstr("operand 0 (f32[2,3]) dim 1 has size 3 but output dim 2 has size 4"));
  EXPECT_THAT(type_error([] {
                infer(Prim::broadcast_in_dim, {f32({2})},
                      {{"shape", IntList{2, 2}}, {"broadcast_dimensions", IntList{}}});
              }),
              HasSubstr("broadcast_dimensions () has 0 entries but operand 0 (f32[2]) has rank 1"));
  EXPECT_THAT(type_error([] {
                infer(Prim::broadcast_in_dim, {f32({1, 1})},
                      {{"shape", IntList{2, 2}}, {"broadcast_dimensions", IntList{1, 0}}});
              }),
              HasSubstr("must be strictly increasing"));
}

TEST(ShapeTypes, Reshape) {
  EXPECT_EQ(infer(Prim::reshape, {i32({2, 6})},
                  {{"new_sizes", IntList{3, 4}}, {"dimensions", NoneParam{}}}),
            Types{i32({3, 4})});
  EXPECT_EQ(infer(Prim::reshape, {f32({1})}, {{"new_sizes", IntList{}}}), Types{f32({})});
  EXPECT_THAT(type_error([] {
                infer(Prim::reshape, {i32({2, 6})}, {{"new_sizes", IntList{5}}});
              }),
              HasSubstr("reshape: operand 0 (i32[2,6]) has 12 elements but new_sizes (5,) has 5"));
}

TEST(ShapeTypes, Squeeze) {
  EXPECT_EQ(infer(Prim::squeeze, {f32({1, 3, 1})}, {{"dimensions", IntList{0, 2}}}),
            Types{f32({3})});
  EXPECT_THAT(type_error([] {
                infer(Prim::squeeze, {f32({1, 3})}, {{"dimensions", IntList{1}}});
              }),
              HasSubstr("cannot squeeze dim 1 of operand 0 (f32[1,3]): its size is 3, not 1"));
  EXPECT_THAT(type_error([] {
                infer(Prim::squeeze, {f32({1})}, {{"dimensions", IntList{1}}});
              }),
              HasSubstr("dimensions entry 1 is out of range for an operand of rank 1"));
}

TEST(ShapeTypes, ExpandDims) {
  EXPECT_EQ(infer(Prim::expand_dims, {f32({3, 4})}, {{"dimensions", IntList{0, 2}}}),
            Types{f32({1, 3, 1, 4})});
  EXPECT_EQ(infer(Prim::expand_dims, {f32({})}, {{"dimensions", IntList{0}}}), Types{f32({1})});
  EXPECT_THAT(type_error([] {
                infer(Prim::expand_dims, {f32({3})}, {{"dimensions", IntList{2}}});
              }),
              HasSubstr("out of range for an operand of rank 2"));
}

TEST(ShapeTypes, Transpose) {
  EXPECT_EQ(infer(Prim::transpose, {f32({2, 3, 4})}, {{"permutation", IntList{2, 0, 1}}}),
            Types{f32({4, 2, 3})});
  EXPECT_THAT(type_error([] {
                infer(Prim::transpose, {f32({2, 3})}, {{"permutation", IntList{0, 0}}});
              }),
              HasSubstr("permutation entry (0, 0) has axis 0 twice"));
  EXPECT_THAT(type_error([] {
                infer(Prim::transpose, {f32({2, 3})}, {{"permutation", IntList{0}}});
              }),
              HasSubstr("permutation (0,) has 1 entries but operand 0 (f32[2,3]) has rank 2"));
}

TEST(ShapeTypes, Concatenate) {
  EXPECT_EQ(infer(Prim::concatenate, {f32({2, 3}), f32({2, 5}), f32({2, 1})},
                  {{"dimension", int64_t{1}}}),
            Types{f32({2, 9})});
  EXPECT_THAT(type_error([] {
                infer(Prim::concatenate, {f32({2, 3}), f32({3, 3})}, {{"dimension", int64_t{1}}});
              }),
              HasSubstr("operand 1 has type f32[3,3] but operand 0 has type f32[2,3]; operands "
                        "must have the same dtype and shape except along dimension 1"));
  EXPECT_THAT(type_error([] {
                infer(Prim::concatenate, {f32({2}), i32({2})}, {{"dimension", int64_t{0}}});
              }),
              HasSubstr("operand 1 has type i32[2]"));
}

TEST(ShapeTypes, ConcatWindows) {
  // x[:, 1:4:2] (2 columns) and all of y (3 columns), side by side.
  const Params p{{"dimension", int64_t{1}},
                 {"start_indices", IntListList{{0, 1}, {0, 0}}},
                 {"limit_indices", IntListList{{2, 4}, {2, 3}}},
                 {"strides", IntListList{{1, 2}, {1, 1}}}};
  EXPECT_EQ(infer(Prim::concat_windows, {f32({2, 5}), f32({2, 3})}, p), Types{f32({2, 5})});
  EXPECT_THAT(type_error([&] {
                infer(Prim::concat_windows, {f32({2, 5}), f32({2, 2})}, p);
              }),
              HasSubstr("window 1: dim 1: start 0 and limit 3"));
  Params rows = p;
  rows.set("limit_indices", IntListList{{1, 4}, {2, 3}});
  EXPECT_THAT(
      type_error([&] {
        infer(Prim::concat_windows, {f32({2, 5}), f32({2, 3})}, rows);
      }),
      HasSubstr("window 1 (f32, shape (2, 3)) does not match window 0 (f32, shape (1, 2))"));
  EXPECT_THAT(type_error([&] {
                infer(Prim::concat_windows, {f32({2, 5})}, p);
              }),
              HasSubstr("need one entry per operand (1), got 2"));
}

TEST(ShapeTypes, GatherRunAndScatterRun) {
  // gather_run x start: x with `length` entries along `axis`; scatter_run x start u: x.
  const Params gp{{"axis", int64_t{1}}, {"length", int64_t{3}}};
  EXPECT_EQ(infer(Prim::gather_run, {f32({2, 5}), i32({})}, gp), Types{f32({2, 3})});
  EXPECT_EQ(infer(Prim::gather_run, {f32({2, 5}), Type(ArrayType{DType::i64, {}})}, gp),
            Types{f32({2, 3})});
  EXPECT_THAT(type_error([&] {
                infer(Prim::gather_run, {f32({2, 5}), i32({3})}, gp);
              }),
              HasSubstr("operand 1 (the run's first index) has type i32[3]"));
  Params bad_axis = gp;
  bad_axis.set("axis", int64_t{2});
  EXPECT_THAT(type_error([&] {
                infer(Prim::gather_run, {f32({2, 5}), i32({})}, bad_axis);
              }),
              HasSubstr("axis"));
  EXPECT_THAT(type_error([&] {
                infer(Prim::gather_run, {f32({2, 0}), i32({})}, gp);
              }),
              HasSubstr("has size 0 along axis 1; there is nothing to gather"));

  const Params sp{{"axis", int64_t{1}}, {"combine", std::string("add")}};
  EXPECT_EQ(infer(Prim::scatter_run, {f32({2, 5}), i32({}), f32({2, 7})}, sp), Types{f32({2, 5})});
  EXPECT_THAT(
      type_error([&] {
        infer(Prim::scatter_run, {f32({2, 5}), i32({}), f32({3, 2})}, sp);
      }),
      HasSubstr("operand 2 (the updates) has type f32[3,2] but must be operand 0 (f32[2,5]) "
                "with any size along axis 1"));
  Params xor_ = sp;
  xor_.set("combine", std::string("xor"));
  EXPECT_THAT(type_error([&] {
                infer(Prim::scatter_run, {f32({2, 5}), i32({}), f32({2, 2})}, xor_);
              }),
              HasSubstr("combine 'xor' is none of set, add, mul, min, max"));
  // min and max compare: a bool array has no order to combine by, as for scatter-min.
  Params min = sp;
  min.set("combine", std::string("min"));
  const Type b{ArrayType{DType::bool_, {2, 5}}};
  EXPECT_THAT(type_error([&] {
                infer(Prim::scatter_run, {b, i32({}), Type(ArrayType{DType::bool_, {2, 1}})}, min);
              }),
              HasSubstr("scatter_run"));
}

TEST(ShapeTypes, MoveWindows) {
  // x[r, c:c+5] = concatenate(v, y[r', c':c'+4]) along dim 1: a whole [1, 1] piece, then a
  // [1, 4] window of y; the result is x's type.
  const Type i = i32({});
  const Params p{{"dimension", int64_t{1}}, {"slice_sizes", IntListList{{1, 1}, {1, 4}}}};
  const Types ok{f32({3, 8}), i, i, f32({1, 1}), i, i, f32({2, 6}), i, i};
  EXPECT_EQ(infer(Prim::move_windows, ok, p), Types{f32({3, 8})});
  EXPECT_THAT(type_error([&] {
                Types short_of_one = ok;
                short_of_one.pop_back();
                infer(Prim::move_windows, short_of_one, p);
              }),
              HasSubstr("so 9 operands are needed (the array, 2 start indices, then each "
                        "window's source and 2 start indices); got 8"));
  EXPECT_THAT(type_error([&] {
                Types wrong_source = ok;
                wrong_source[6] = i32({2, 6});
                infer(Prim::move_windows, wrong_source, p);
              }),
              HasSubstr("window 1: its source (operand 6, i32[2,6]) must have the dtype"));
  EXPECT_THAT(type_error([&] {
                Types float_index = ok;
                float_index[7] = f32({});
                infer(Prim::move_windows, float_index, p);
              }),
              HasSubstr("start index"));
  Params too_big = p;
  too_big.set("slice_sizes", IntListList{{1, 1}, {1, 7}});
  EXPECT_THAT(type_error([&] { infer(Prim::move_windows, ok, too_big); }),
              HasSubstr("window 1: size 7 of dim 1 must be in [0, 6]"));
  Params rows = p;
  rows.set("slice_sizes", IntListList{{1, 1}, {2, 4}});
  EXPECT_THAT(type_error([&] { infer(Prim::move_windows, ok, rows); }),
              HasSubstr("window 1 (sizes (2, 4)) does not match window 0 (sizes (1, 1))"));
  Params wide = p;
  wide.set("slice_sizes", IntListList{{1, 3}, {1, 6}});
  const Types wide_ok{f32({3, 8}), i, i, f32({1, 3}), i, i, f32({2, 6}), i, i};
  EXPECT_THAT(type_error([&] { infer(Prim::move_windows, wide_ok, wide); }),
              HasSubstr("the windows together (shape (1, 9)) do not fit in operand 0 (f32[3,8])"));
}

TEST(ShapeTypes, Pad) {
  Params p{{"padding_config", IntListList{{1, 2, 0}, {0, -1, 1}}}};
  // dim 0: 1+2+3 = 6; dim 1: 0-1+4+3*1 = 6.
  EXPECT_EQ(infer(Prim::pad, {f32({3, 4}), f32({})}, p), Types{f32({6, 6})});
  EXPECT_THAT(type_error([&] {
                infer(Prim::pad, {f32({3, 4}), i32({})}, p);
              }),
              HasSubstr("operand 1 (the padding value) has type i32[] but must be a scalar f32[]"));
  EXPECT_THAT(
      type_error([] {
        infer(Prim::pad, {f32({3}), f32({})}, {{"padding_config", IntListList{{-5, 0, 0}}}});
      }),
      HasSubstr("gives dim 0 a negative size -2"));
}

TEST(ShapeTypes, Slice) {
  EXPECT_EQ(infer(Prim::slice, {f32({10, 4})},
                  {{"start_indices", IntList{1, 0}},
                   {"limit_indices", IntList{8, 4}},
                   {"strides", IntList{3, 1}}}),
            Types{f32({3, 4})});
  EXPECT_EQ(
      infer(
          Prim::slice, {f32({10})},
          {{"start_indices", IntList{2}}, {"limit_indices", IntList{5}}, {"strides", NoneParam{}}}),
      Types{f32({3})});
  EXPECT_THAT(type_error([] {
                infer(Prim::slice, {f32({10})},
                      {{"start_indices", IntList{2}}, {"limit_indices", IntList{11}}});
              }),
              HasSubstr("dim 0: start 2 and limit 11 must satisfy 0 <= start <= limit <= 10"));
}

TEST(ShapeTypes, DynamicSlice) {
  EXPECT_EQ(infer(Prim::dynamic_slice, {f32({10, 4}), i32({}), i64({})},
                  {{"slice_sizes", IntList{3, 4}}}),
            Types{f32({3, 4})});
  EXPECT_THAT(type_error([] {
                infer(Prim::dynamic_slice, {f32({10}), i32({})}, {{"slice_sizes", IntList{11}}});
              }),
              HasSubstr("slice_sizes entry 0 is 11 but must be in [0, 10]"));
  EXPECT_THAT(
      type_error([] {
        infer(Prim::dynamic_slice, {f32({10, 4}), i32({})}, {{"slice_sizes", IntList{1, 1}}});
      }),
      HasSubstr("operand 0 (f32[10,4]) has rank 2 so 2 start indices are needed, got 1"));
  EXPECT_THAT(type_error([] {
                infer(Prim::dynamic_slice, {f32({10}), f32({})}, {{"slice_sizes", IntList{1}}});
              }),
              HasSubstr("operand 1 (a start index) has type f32[] but an integer scalar"));
}

TEST(ShapeTypes, DynamicUpdateSlice) {
  EXPECT_EQ(infer(Prim::dynamic_update_slice, {f32({10, 4}), f32({2, 4}), i32({}), i32({})}),
            Types{f32({10, 4})});
  EXPECT_THAT(type_error([] {
                infer(Prim::dynamic_update_slice, {f32({10}), f32({11}), i32({})});
              }),
              HasSubstr("operand 1 (the update) has type f32[11] but operand 0 has type f32[10]"));
}

TEST(ShapeTypes, Iota) {
  EXPECT_EQ(infer(Prim::iota, {},
                  {{"dtype", DType::i32},
                   {"shape", IntList{2, 3}},
                   {"dimension", int64_t{1}},
                   {"sharding", NoneParam{}}}),
            Types{i32({2, 3})});
  EXPECT_THAT(type_error([] {
                infer(Prim::iota, {},
                      {{"dtype", DType::i32}, {"shape", IntList{2}}, {"dimension", int64_t{1}}});
              }),
              HasSubstr("iota: dimension 1 is out of range for an operand of rank 1"));
  EXPECT_THAT(type_error([] {
                infer(Prim::iota, {},
                      {{"dtype", DType::bool_}, {"shape", IntList{2}}, {"dimension", int64_t{0}}});
              }),
              HasSubstr("dtype bool is not numeric"));
}

TEST(ShapeTypes, Gather) {
  EXPECT_EQ(infer(Prim::gather, {f32({5, 6, 7}), i32({2, 3})}, {{"axis", int64_t{1}}}),
            Types{f32({5, 2, 3, 7})});
  EXPECT_EQ(infer(Prim::gather, {f32({5}), i64({})}, {{"axis", int64_t{0}}}), Types{f32({})});
  EXPECT_EQ(infer(Prim::gather, {f32({0, 2}), i32({0})}, {{"axis", int64_t{0}}}),
            Types{f32({0, 2})});
  EXPECT_THAT(type_error([] {
                infer(Prim::gather, {f32({0}), i32({1})}, {{"axis", int64_t{0}}});
              }),
              HasSubstr("gather: operand 0 (f32[0]) has size 0 along axis 0"));
  EXPECT_THAT(type_error([] {
                infer(Prim::gather, {f32({5}), f32({2})}, {{"axis", int64_t{0}}});
              }),
              HasSubstr("operand 1 (the indices) has type f32[2] but must have an integer dtype"));
  EXPECT_THAT(type_error([] {
                infer(Prim::gather, {f32({5}), i32({2})}, {{"axis", int64_t{1}}});
              }),
              HasSubstr("axis 1 is out of range"));
}

TEST(ShapeTypes, ScatterAndScatterAdd) {
  for (Prim p : {Prim::scatter, Prim::scatter_add}) {
    EXPECT_EQ(infer(p, {f32({5, 6}), i32({3}), f32({5, 3})}, {{"axis", int64_t{1}}}),
              Types{f32({5, 6})});
    EXPECT_THAT(type_error([p] {
                  infer(p, {f32({5, 6}), i32({3}), f32({3, 6})}, {{"axis", int64_t{1}}});
                }),
                HasSubstr("operand 2 (the updates) has type f32[3,6] but f32[5,3] is needed"));
  }
  EXPECT_EQ(infer(Prim::scatter, {boolean({4}), i32({}), boolean({})}, {{"axis", int64_t{0}}}),
            Types{boolean({4})});
  EXPECT_THAT(
      type_error([] {
        infer(Prim::scatter_add, {boolean({4}), i32({}), boolean({})}, {{"axis", int64_t{0}}});
      }),
      HasSubstr("scatter-add: operand 0 has type bool[4]"));
}

// ---- Reductions ----

TEST(ReduceTypes, ReductionsDropAxes) {
  for (Prim p : {Prim::reduce_sum, Prim::reduce_max, Prim::reduce_min}) {
    EXPECT_EQ(infer(p, {f32({2, 3, 4})}, {{"axes", IntList{0, 2}}}), Types{f32({3})});
    EXPECT_EQ(infer(p, {i32({2})}, {{"axes", IntList{}}}), Types{i32({2})});
    EXPECT_THAT(type_error([p] {
                  infer(p, {f32({2})}, {{"axes", IntList{1}}});
                }),
                HasSubstr("axes entry 1 is out of range for an operand of rank 1"));
  }
  EXPECT_THAT(type_error([] {
                infer(Prim::reduce_sum, {f32({2, 2})}, {{"axes", IntList{1, 1}}});
              }),
              HasSubstr("has axis 1 twice"));
}

TEST(ReduceTypes, Argmax) {
  EXPECT_EQ(infer(Prim::argmax, {f32({2, 5})}, {{"axes", IntList{1}}, {"index_dtype", DType::i32}}),
            Types{i32({2})});
  EXPECT_THAT(
      type_error([] {
        infer(Prim::argmax, {f32({2, 5})}, {{"axes", IntList{0, 1}}, {"index_dtype", DType::i32}});
      }),
      HasSubstr("axes (0, 1) must name exactly one axis"));
  EXPECT_THAT(
      type_error([] {
        infer(Prim::argmax, {f32({5})}, {{"axes", IntList{0}}, {"index_dtype", DType::f32}});
      }),
      HasSubstr("index_dtype float32 is not an integer dtype"));
  EXPECT_THAT(
      type_error([] {
        infer(Prim::argmax, {f32({0})}, {{"axes", IntList{0}}, {"index_dtype", DType::i32}});
      }),
      HasSubstr("size 0 along axis 0"));
}

TEST(ReduceTypes, DotGeneralOrdersBatchThenFreeDims) {
  DotDims dims{{2}, {1}, {0}, {0}};  // contract lhs 2 with rhs 1; batch lhs 0 with rhs 0
  EXPECT_EQ(infer(Prim::dot_general, {f32({8, 3, 4}), f32({8, 4, 5})},
                  {{"dimension_numbers", dims},
                   {"precision", NoneParam{}},
                   {"preferred_element_type", NoneParam{}}}),
            Types{f32({8, 3, 5})});
  // A plain matrix-vector product.
  EXPECT_EQ(infer(Prim::dot_general, {f32({3, 4}), f32({4})},
                  {{"dimension_numbers", DotDims{{1}, {0}, {}, {}}}}),
            Types{f32({3})});
  EXPECT_EQ(infer(Prim::dot_general, {i32({3}), i32({3})},
                  {{"dimension_numbers", DotDims{{0}, {0}, {}, {}}},
                   {"preferred_element_type", DType::i64}}),
            Types{i64({})});
}

TEST(ReduceTypes, DotGeneralErrors) {
  EXPECT_THAT(type_error([] {
                infer(Prim::dot_general, {f32({3, 4}), f32({5})},
                      {{"dimension_numbers", DotDims{{1}, {0}, {}, {}}}});
              }),
              HasSubstr("contracting lhs dim 1 (size 4 in f32[3,4]) with rhs dim 0 (size 5 in "
                        "f32[5]); the sizes must be equal"));
  EXPECT_THAT(type_error([] {
                infer(Prim::dot_general, {f32({3}), f64({3})},
                      {{"dimension_numbers", DotDims{{0}, {0}, {}, {}}}});
              }),
              HasSubstr("operand 1 has type f64[3] but operand 0 has type f32[3]"));
  EXPECT_THAT(type_error([] {
                infer(Prim::dot_general, {f32({3}), f32({3})},
                      {{"dimension_numbers", DotDims{{0}, {}, {}, {}}}});
              }),
              HasSubstr("contract 1 lhs dims with 0 rhs dims"));
  EXPECT_THAT(type_error([] {
                infer(Prim::dot_general, {f32({3, 3}), f32({3, 3})},
                      {{"dimension_numbers", DotDims{{0}, {0}, {0}, {1}}}});
              }),
              HasSubstr("lhs dim 0 is both a contracting and a batch dim"));
}

// ---- Refs ----

Indexer slice_dim(int64_t start, int64_t size) {
  return Indexer{{IndexerDim{IndexerDim::Kind::slice, start, size, 1, false}}};
}
Indexer dyn_index() { return Indexer{{IndexerDim{IndexerDim::Kind::index, 0, 0, 1, true}}}; }

TEST(RefTypes, NewRefWrapsTheValue) {
  EXPECT_EQ(infer(Prim::new_ref, {f32({3})}), Types{ref_f32({3})});
  EXPECT_EQ(infer(Prim::new_ref, {i32({})},
                  {{"kind", NoneParam{}}, {"memory_space", NoneParam{}}, {"pin", false}}),
            Types{ref_i32({})});
  std::string e = ref_error([] { infer(Prim::new_ref, {ref_f32({3})}); });
  EXPECT_THAT(e, HasSubstr("E12: new_ref: operand 0 has type Ref{f32[3]}; a ref cannot hold "
                           "another ref"));
}

TEST(RefTypes, GetReadsTheIndexedShape) {
  EXPECT_EQ(infer(Prim::get, {ref_f32({4, 5})}, {{"indexer", Indexer{}}}), Types{f32({4, 5})});
  EXPECT_EQ(infer(Prim::get, {ref_f32({4, 5})}), Types{f32({4, 5})});
  Indexer dyn{{IndexerDim{IndexerDim::Kind::slice, 0, 2, 1, true}}};
  EXPECT_EQ(infer(Prim::get, {ref_f32({4, 5}), i32({})}, {{"indexer", dyn}}), Types{f32({2, 5})});
  EXPECT_THAT(ref_error([] { infer(Prim::get, {f32({4})}); }),
              HasSubstr("E12: get: operand 0 has type f32[4] but a ref is needed"));
  EXPECT_THAT(ref_error([] {
                infer(Prim::get, {ref_f32({4})}, {{"indexer", slice_dim(3, 2)}});
              }),
              HasSubstr("E12: get: Out-of-bounds slice: indexer dim 0 covers [3, 5)"));
  EXPECT_THAT(type_error([] {
                infer(Prim::get, {ref_f32({4, 5})}, {{"indexer", dyn_index()}});
              }),
              HasSubstr("get: the indexer has 1 dynamic parts but 0 index operands were given"));
}

TEST(RefTypes, SwapReturnsTheOldValue) {
  EXPECT_EQ(infer(Prim::swap, {ref_f32({4, 5}), f32({5}), i32({})}, {{"indexer", dyn_index()}}),
            Types{f32({5})});
  EXPECT_EQ(infer(Prim::swap, {ref_i32({}), i32({})}), Types{i32({})});
  EXPECT_THAT(ref_error([] {
                infer(Prim::swap, {ref_f32({4, 5}), f32({4}), i32({})}, {{"indexer", dyn_index()}});
              }),
              HasSubstr("E12: swap: operand 1 has type f32[4] but the indexed ref Ref{f32[4,5]} "
                        "selects f32[5]"));
  EXPECT_THAT(ref_error([] {
                infer(Prim::swap, {ref_i32({3}), f32({3})});
              }),
              HasSubstr("E12: swap: operand 1 has type f32[3] but the ref holds Ref{i32[3]}"));
  EXPECT_THAT(ref_error([] {
                infer(Prim::swap, {ref_f32({3}), ref_f32({3})});
              }),
              HasSubstr("E12: swap: operand 1 has type Ref{f32[3]}; a ref cannot be stored into "
                        "another ref"));
  EXPECT_THAT(ref_error([] {
                infer(Prim::swap, {f32({3}), f32({3})});
              }),
              HasSubstr("E12: swap: operand 0 has type f32[3] but a ref is needed"));
}

TEST(RefTypes, AddupdateHasNoResult) {
  EXPECT_EQ(infer(Prim::addupdate, {ref_f32({10}), f32({1}), i32({})},
                  {{"indexer", Indexer{{IndexerDim{IndexerDim::Kind::slice, 0, 1, 1, true}}}}}),
            Types{});
  EXPECT_THAT(ref_error([] {
                infer(Prim::addupdate, {ref_f32({10}), f32({2})});
              }),
              HasSubstr("E12: addupdate: operand 1 has type f32[2] but the indexed ref "
                        "Ref{f32[10]} selects f32[10]"));
  EXPECT_THAT(type_error([] {
                infer(Prim::addupdate, {Type::ref(ArrayType{DType::bool_, {}}), boolean({})});
              }),
              HasSubstr("addupdate: operand 1 has type bool[] but accumulation needs"));
}

TEST(RefTypes, FreezeGivesTheHeldArray) {
  EXPECT_EQ(infer(Prim::freeze, {ref_f32({2, 2})}), Types{f32({2, 2})});
  EXPECT_THAT(ref_error([] { infer(Prim::freeze, {f32({2})}); }),
              HasSubstr("E12: freeze: operand 0 has type f32[2] but a ref is needed"));
}

TEST(RefTypes, FlatRunsReadAndWriteLengthElements) {
  const Params p{{"length", int64_t{5}}, {"bound", int64_t{30}}};
  EXPECT_EQ(infer(Prim::get_flat_run, {ref_f32({4, 6}), i32({})}, p), Types{f32({5})});
  EXPECT_EQ(infer(Prim::swap_flat_run, {ref_f32({4, 6}), i32({}), f32({5})}, p), Types{f32({5})});
  EXPECT_THAT(type_error([&] {
                infer(Prim::swap_flat_run, {ref_f32({4, 6}), i32({}), f32({4})}, p);
              }),
              HasSubstr("operand 2 (the values written) has type f32[4] but the run is f32[5]"));
  EXPECT_THAT(ref_error([&] {
                infer(Prim::get_flat_run, {f32({4, 6}), i32({})}, p);
              }),
              HasSubstr("a ref is needed"));
  EXPECT_THAT(type_error([&] {
                infer(Prim::get_flat_run, {ref_f32({}), i32({})}, p);
              }),
              HasSubstr("a run needs rank 1 or more"));
  Params negative = p;
  negative.set("bound", int64_t{-1});
  EXPECT_THAT(type_error([&] {
                infer(Prim::get_flat_run, {ref_f32({4, 6}), i32({})}, negative);
              }),
              HasSubstr("bound -1 is negative"));
  EXPECT_THAT(type_error([&] {
                infer(Prim::get_flat_run, {ref_f32({4, 6}), f32({})}, p);
              }),
              HasSubstr("the run's first index"));
}

// ---- Structured ----

// { lambda ; a:f32[3] b:f32[]. let c = mul a b in (c,) }
JaxprPtr scale_body() {
  JaxprBuilder b;
  Var x = b.add_invar(f32({3}));
  Var s = b.add_invar(f32({}));
  b.set_outvars({b.add_eqn1(Prim::mul, {x, s})});
  return std::make_shared<Jaxpr>(b.finish());
}

TEST(StructuredTypes, JitResultsAreTheBodyOutputs) {
  Params p{{"jaxpr", scale_body()}, {"name", std::string("scale")}};
  EXPECT_EQ(infer(Prim::jit, {f32({3}), f32({})}, p), Types{f32({3})});
  EXPECT_THAT(type_error([&] {
                infer(Prim::jit, {f32({3}), f64({})}, p);
              }),
              HasSubstr("jit: operand 1 has type f64[] but the jit body input 1 has type f32[]"));
  EXPECT_THAT(type_error([&] { infer(Prim::jit, {f32({3})}, p); }),
              HasSubstr("jit: the jit body takes 2 inputs but 1 operands were given"));
  EXPECT_THAT(type_error([] { infer(Prim::jit, {f32({3})}); }),
              HasSubstr("jit: missing param 'jaxpr'"));
}

TEST(StructuredTypes, JitRejectsARefOutput) {
  JaxprBuilder b;
  Var r = b.add_invar(ref_f32({3}));
  b.set_outvars({r});
  Params p{{"jaxpr", std::make_shared<Jaxpr>(b.finish())}, {"name", std::string("f")}};
  EXPECT_THAT(ref_error([&] { infer(Prim::jit, {ref_f32({3})}, p); }),
              HasSubstr("E9: jit: the jit body returns a ref as output 0 (Ref{f32[3]})"));
}

// Body of a cumulative sum with a closed-over ref `r` it reads:
// consts: r:Ref{f32[]}; carry: c:f32[]; xs slice: x:f32[2] -> (c + sum(x) + r[...], y = x * c)
JaxprPtr cumsum_body() {
  JaxprBuilder b;
  Var r = b.add_invar(ref_f32({}));
  Var c = b.add_invar(f32({}));
  Var x = b.add_invar(f32({2}));
  Var s = b.add_eqn1(Prim::reduce_sum, {x}, {{"axes", IntList{0}}});
  Var rv = b.add_eqn1(Prim::get, {r});
  Var c2 = b.add_eqn1(Prim::add, {b.add_eqn1(Prim::add, {c, s}), rv});
  Var y = b.add_eqn1(Prim::mul, {x, c});
  b.set_outvars({c2, y});
  return std::make_shared<Jaxpr>(b.finish());
}

Params scan_params(JaxprPtr body, int64_t length, int64_t num_consts, int64_t num_carry) {
  return Params{{"jaxpr", std::move(body)}, {"length", length},         {"reverse", false},
                {"num_consts", num_consts}, {"num_carry", num_carry},   {"linear", NoneParam{}},
                {"unroll", int64_t{1}},     {"_split_transpose", false}};
}

TEST(StructuredTypes, ScanStacksYs) {
  Params p = scan_params(cumsum_body(), 5, 1, 1);
  EXPECT_EQ(infer(Prim::scan, {ref_f32({}), f32({}), f32({5, 2})}, p),
            (Types{f32({}), f32({5, 2})}));
}

TEST(StructuredTypes, ScanErrors) {
  Params p = scan_params(cumsum_body(), 5, 1, 1);
  EXPECT_THAT(type_error([&] {
                infer(Prim::scan, {ref_f32({}), f32({}), f32({4, 2})}, p);
              }),
              HasSubstr("scan: operand 2 (an xs) has type f32[4,2] but must have a leading dim "
                        "of size length=5"));
  EXPECT_THAT(type_error([&] {
                infer(Prim::scan, {ref_f32({}), f64({}), f32({5, 2})}, p);
              }),
              HasSubstr("scan: operand 1 (a carry) has type f64[] but the scan body's input 1 "
                        "has type f32[]"));
  EXPECT_THAT(type_error([&] {
                infer(Prim::scan, {ref_f32({}), f32({}), f32({5, 3})}, p);
              }),
              HasSubstr("operand 2 (an xs) has type f32[5,3], so the scan body's input 2 must have "
                        "type f32[3] but it has type f32[2]"));
  Params bad_counts = scan_params(cumsum_body(), 5, 2, 2);
  EXPECT_THAT(type_error([&] {
                infer(Prim::scan, {ref_f32({}), f32({}), f32({5, 2})}, bad_counts);
              }),
              HasSubstr("num_consts=2 and num_carry=2 do not fit the 3 operands"));
}

TEST(StructuredTypes, ScanCarryMustKeepItsType) {
  // carry f32[] -> body returns f32[2] as the carry.
  JaxprBuilder b;
  Var c = b.add_invar(f32({}));
  Var x = b.add_invar(f32({2}));
  b.set_outvars({b.add_eqn1(Prim::mul, {x, c})});
  Params p = scan_params(std::make_shared<Jaxpr>(b.finish()), 3, 0, 1);
  EXPECT_THAT(type_error([&] {
                infer(Prim::scan, {f32({}), f32({3, 2})}, p);
              }),
              HasSubstr("the scan body's carry output 0 has type f32[2] but the carry input "
                        "(operand 0) has type f32[]"));
}

TEST(StructuredTypes, ScanOverARefGivesTheBodyARowRef) {
  // xs: Ref{f32[4,3]}; the body sees Ref{f32[3]} and writes x into it; no outputs.
  JaxprBuilder b;
  Var row = b.add_invar(ref_f32({3}));
  Var v = b.add_invar(f32({3}));
  b.add_eqn(Prim::swap, {row, v});
  b.set_outvars({});
  Params p = scan_params(std::make_shared<Jaxpr>(b.finish()), 4, 0, 0);
  EXPECT_EQ(infer(Prim::scan, {ref_f32({4, 3}), f32({4, 3})}, p), Types{});
}

TEST(StructuredTypes, ScanRejectsARefCarry) {
  JaxprBuilder b;
  Var r = b.add_invar(ref_f32({}));
  b.set_outvars({r});
  Params p = scan_params(std::make_shared<Jaxpr>(b.finish()), 2, 0, 1);
  EXPECT_THAT(ref_error([&] { infer(Prim::scan, {ref_f32({})}, p); }),
              HasSubstr("E9: scan: operand 0 (Ref{f32[]}) is a carry but refs cannot be scan "
                        "carries"));
}

JaxprPtr unary_branch(Prim prim, Type t) {
  JaxprBuilder b;
  Var x = b.add_invar(t);
  b.set_outvars({b.add_eqn1(prim, {x})});
  return std::make_shared<Jaxpr>(b.finish());
}

TEST(StructuredTypes, CondGivesTheBranchOutputs) {
  Params p{{"branches",
            JaxprList{unary_branch(Prim::neg, f32({2})), unary_branch(Prim::exp, f32({2}))}}};
  EXPECT_EQ(infer(Prim::cond, {i32({}), f32({2})}, p), Types{f32({2})});
  EXPECT_EQ(infer(Prim::cond, {boolean({}), f32({2})}, p), Types{f32({2})});
}

TEST(StructuredTypes, CondErrors) {
  Params p{{"branches",
            JaxprList{unary_branch(Prim::neg, f32({2})), unary_branch(Prim::exp, f32({2}))}}};
  EXPECT_THAT(type_error([&] {
                infer(Prim::cond, {i32({1}), f32({2})}, p);
              }),
              HasSubstr("cond: operand 0 (the branch index) has type i32[1] but must be i32[] or "
                        "bool[]"));
  EXPECT_THAT(type_error([&] {
                infer(Prim::cond, {i32({}), f32({3})}, p);
              }),
              HasSubstr("cond: operand 1 has type f32[3] but branch 0 input 0 has type f32[2]"));
  JaxprBuilder b;
  Var x = b.add_invar(f32({2}));
  b.set_outvars({b.add_eqn1(Prim::lt, {x, x})});
  Params diff{{"branches",
               JaxprList{unary_branch(Prim::neg, f32({2})), std::make_shared<Jaxpr>(b.finish())}}};
  EXPECT_THAT(type_error([&] {
                infer(Prim::cond, {i32({}), f32({2})}, diff);
              }),
              HasSubstr("branch 1 returns (bool[2]) but branch 0 returns (f32[2])"));
  Params three{
      {"branches", JaxprList{unary_branch(Prim::neg, f32({2})), unary_branch(Prim::neg, f32({2})),
                             unary_branch(Prim::neg, f32({2}))}}};
  EXPECT_THAT(type_error([&] {
                infer(Prim::cond, {boolean({}), f32({2})}, three);
              }),
              HasSubstr("a bool index selects between exactly 2 branches, got 3"));
}

TEST(StructuredTypes, CustomVjpCallGivesThePrimalOutputs) {
  // primal: sin x; fwd: (sin x, cos x); bwd: (cos_x, g) -> g * cos_x
  JaxprPtr primal = unary_branch(Prim::sin, f32({3}));
  JaxprBuilder fb;
  Var x = fb.add_invar(f32({3}));
  fb.set_outvars({fb.add_eqn1(Prim::sin, {x}), fb.add_eqn1(Prim::cos, {x})});
  JaxprBuilder bb;
  Var res = bb.add_invar(f32({3}));
  Var g = bb.add_invar(f32({3}));
  bb.set_outvars({bb.add_eqn1(Prim::mul, {g, res})});
  Params p{{"call_jaxpr", primal},
           {"fwd_jaxpr", std::make_shared<Jaxpr>(fb.finish())},
           {"bwd_jaxpr", std::make_shared<Jaxpr>(bb.finish())},
           {"num_res", int64_t{1}}};
  EXPECT_EQ(infer(Prim::custom_vjp_call, {f32({3})}, p), Types{f32({3})});
  EXPECT_THAT(type_error([&] { infer(Prim::custom_vjp_call, {f32({4})}, p); }),
              HasSubstr("custom_vjp_call: operand 0 has type f32[4] but call_jaxpr input 0 has "
                        "type f32[3]"));
  Params wrong_res = p;
  wrong_res.set("num_res", int64_t{2});
  EXPECT_THAT(type_error([&] { infer(Prim::custom_vjp_call, {f32({3})}, wrong_res); }),
              HasSubstr("fwd_jaxpr returns 2 outputs but 1 primal outputs and num_res=2 "
                        "residuals are expected"));
}

TEST(StructuredTypes, LinearSolveGivesTheRightHandSidesTypesAndChecksEachJaxpr) {
  // consts (d:f32[3]), b:f32[3]; solve: b / d; matvec: d * x.
  auto binary = [](Prim p) {
    JaxprBuilder b;
    Var d = b.add_invar(f32({3}));
    Var x = b.add_invar(f32({3}));
    b.set_outvars({b.add_eqn1(p, {x, d})});
    return std::make_shared<Jaxpr>(b.finish());
  };
  Params p{{"num_consts", int64_t{1}},
           {"solve_jaxpr", binary(Prim::div)},
           {"matvec_jaxpr", binary(Prim::mul)}};
  EXPECT_EQ(infer(Prim::linear_solve, {f32({3}), f32({3})}, p), Types{f32({3})});
  EXPECT_THAT(type_error([&] {
                infer(Prim::linear_solve, {f32({3}), f32({4})}, p);
              }),
              HasSubstr("linear_solve: operand 1 has type f32[4] but solve_jaxpr input 1 has "
                        "type f32[3]"));
  Params no_rhs = p;
  no_rhs.set("num_consts", int64_t{2});
  EXPECT_THAT(type_error([&] {
                infer(Prim::linear_solve, {f32({3}), f32({3})}, no_rhs);
              }),
              HasSubstr("num_consts=2 leaves no right-hand side among its 2 operand(s)"));
  Params no_solve{{"num_consts", int64_t{1}}, {"matvec_jaxpr", binary(Prim::mul)}};
  EXPECT_THAT(type_error([&] {
                infer(Prim::linear_solve, {f32({3}), f32({3})}, no_solve);
              }),
              HasSubstr("linear_solve: has no solve_jaxpr"));
  EXPECT_THAT(type_error([&] {
                infer(Prim::linear_solve, {ref_f32({3}), f32({3})}, p);
              }),
              HasSubstr("operand 0 is a ref (Ref{f32[3]}); a linear solve takes arrays only"));
}

TEST(StructuredTypes, CustomVjpPrimalMayNotReturnARef) {
  JaxprBuilder b;
  Var r = b.add_invar(ref_f32({}));
  b.set_outvars({r});
  Params p{{"call_jaxpr", std::make_shared<Jaxpr>(b.finish())}};
  EXPECT_THAT(ref_error([&] { infer(Prim::custom_vjp_call, {ref_f32({})}, p); }),
              HasSubstr("E10: custom_vjp_call: call_jaxpr returns a ref as output 0"));
}

// A custom_vjp over (r:Ref{f32[]}, x:f32[]) whose fwd passes r on as a residual (or, with
// `fresh_ref`, returns a new ref instead).
Params ref_residual_custom_vjp(bool fresh_ref) {
  JaxprBuilder pb;
  pb.add_invar(ref_f32({}));
  Var px = pb.add_invar(f32({}));
  pb.set_outvars({pb.add_eqn1(Prim::sin, {px})});
  JaxprBuilder fb;
  Var fr = fb.add_invar(ref_f32({}));
  Var fx = fb.add_invar(f32({}));
  Var res = fresh_ref ? fb.add_eqn1(Prim::new_ref, {fx}) : fr;
  fb.set_outvars({fb.add_eqn1(Prim::sin, {fx}), res});
  JaxprBuilder bb;
  bb.add_invar(ref_f32({}));
  Var g = bb.add_invar(f32({}));
  bb.set_outvars({Literal::of_float(DType::f32, 0.0), g});
  return Params{{"call_jaxpr", std::make_shared<Jaxpr>(pb.finish())},
                {"fwd_jaxpr", std::make_shared<Jaxpr>(fb.finish())},
                {"bwd_jaxpr", std::make_shared<Jaxpr>(bb.finish())},
                {"num_res", int64_t{1}}};
}

TEST(StructuredTypes, CustomVjpFwdMayPassItsOwnRefOnAsAResidual) {
  EXPECT_EQ(infer(Prim::custom_vjp_call, {ref_f32({}), f32({})}, ref_residual_custom_vjp(false)),
            Types{f32({})});
  EXPECT_THAT(ref_error([] {
                infer(Prim::custom_vjp_call, {ref_f32({}), f32({})}, ref_residual_custom_vjp(true));
              }),
              HasSubstr("E10: custom_vjp_call: fwd_jaxpr returns a ref as output 1 (Ref{f32[]}) "
                        "that is not one of its inputs"));
}

TEST(BuilderTypes, AddEqnReportsTheRuleError) {
  JaxprBuilder b;
  Var x = b.add_invar(f32({3}));
  Var y = b.add_invar(f32({4}));
  EXPECT_THAT(type_error([&] {
                b.add_eqn(Prim::add, {x, y});
              }),
              HasSubstr("add: operand 1 has type f32[4] but operand 0 has type f32[3]"));
  Var z = b.add_eqn1(Prim::add, {x, Literal::of_float(DType::f32, 2.0)});
  EXPECT_EQ(b.type_of(z), f32({3}));
}

}  // namespace
}  // namespace refjit
