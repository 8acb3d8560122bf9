// Differential tests (native vs interpreter) of data movement, reductions and dot_general.
#include <fmt/format.h>

#include "test_util.h"

namespace refjit {
namespace {

using testing::at;
using testing::check_text;
using testing::random_array;

Array ints(std::vector<int32_t> v) {
  Shape s{static_cast<int64_t>(v.size())};
  return Array::from_vector<int32_t>(v, s);
}

TEST(NativeShape, BroadcastReshapeSqueezeExpandDims) {
  for (DType d : {DType::f32, DType::i64, DType::bool_}) {
    std::string t = std::string(short_name(d));
    check_text(
        fmt::format("{{ lambda ; a:{0}[3,1]. let b:{0}[2,3,4] = broadcast_in_dim["
                    "broadcast_dimensions=(1, 2) shape=(2, 3, 4) sharding=None] a in (b,) }}",
                    t),
        {random_array(at(d, {3, 1}), 1)});
    check_text(fmt::format("{{ lambda ; a:{0}[]. let b:{0}[2,2] = broadcast_in_dim["
                           "broadcast_dimensions=() shape=(2, 2) sharding=None] a in (b,) }}",
                           t),
               {random_array(at(d, {}), 1)});
    check_text(fmt::format(
                   "{{ lambda ; a:{0}[2,6]. let b:{0}[3,4] = reshape[dimensions=None "
                   "new_sizes=(3, 4)] a; c:{0}[4,3] = transpose[permutation=(1, 0)] b in (c, b) }}",
                   t),
               {random_array(at(d, {2, 6}), 2)});
  }
  check_text(
      "{ lambda ; a:f32[3,1,2]. let b:f32[3,2] = squeeze[dimensions=(1,)] a; "
      "c:f32[1,3,2] = expand_dims[dimensions=(0,)] b in (b, c) }",
      {random_array(at(DType::f32, {3, 1, 2}), 3)});
  check_text(
      "{ lambda ; a:i32[0,3]. let b:i32[3,0] = reshape[dimensions=None new_sizes=(3, 0)] a "
      "in (b,) }",
      {Array(at(DType::i32, {0, 3}))});
}

TEST(NativeShape, TransposeConcatenateSliceIotaPad) {
  check_text(
      "{ lambda ; a:i32[2,3,4]. let b:i32[4,2,3] = transpose[permutation=(2, 0, 1)] a "
      "in (b,) }",
      {random_array(at(DType::i32, {2, 3, 4}), 1)});
  check_text(
      "{ lambda ; a:f64[2,3] b:f64[2,1] c:f64[2,0]. let d:f64[2,4] = "
      "concatenate[dimension=1] a b c in (d,) }",
      {random_array(at(DType::f64, {2, 3}), 1), random_array(at(DType::f64, {2, 1}), 2),
       Array(at(DType::f64, {2, 0}))});
  check_text(
      "{ lambda ; a:f32[7,5]. let b:f32[2,2] = slice[limit_indices=(7, 4) "
      "start_indices=(1, 0) strides=(3, 2)] a; c:f32[3,5] = slice[limit_indices=(3, 5) "
      "start_indices=(0, 0) strides=None] a in (b, c) }",
      {random_array(at(DType::f32, {7, 5}), 1)});
  check_text(
      "{ lambda ; . let a:f32[3,4] = iota[dimension=1 dtype=float32 shape=(3, 4) "
      "sharding=None] ; b:i64[3,4] = iota[dimension=0 dtype=int64 shape=(3, 4) "
      "sharding=None]  in (a, b) }",
      {});
  check_text(
      "{ lambda ; a:i32[4,3] p:i32[]. let b:i32[3,8] = pad[padding_config=((-1, 0, 0), "
      "(1, 2, 1))] a p in (b,) }",
      {random_array(at(DType::i32, {4, 3}), 2), Array::scalar<int32_t>(-7)});
}

TEST(NativeShape, DynamicSliceClampsStartIntoRange) {
  ArrayType t = at(DType::f32, {5, 4});
  Array x = random_array(t, 1);
  for (auto [i, j] : {std::pair{0, 0}, {2, 1}, {-3, 9}, {100, -100}, {4, 2}}) {
    check_text(
        "{ lambda ; a:f32[5,4] i:i32[] j:i32[]. let b:f32[2,3] = "
        "dynamic_slice[slice_sizes=(2, 3)] a i j in (b,) }",
        {x, Array::scalar<int32_t>(i), Array::scalar<int32_t>(j)});
    check_text(
        "{ lambda ; a:f32[5,4] u:f32[2,3] i:i64[] j:i64[]. let b:f32[5,4] = "
        "dynamic_update_slice a u i j in (b,) }",
        {x, random_array(at(DType::f32, {2, 3}), 2), Array::scalar<int64_t>(i),
         Array::scalar<int64_t>(j)});
  }
  // Hand-checked: the start 7 clamps to 5 - 2 = 3.
  auto out =
      compile_native(parse_jaxpr("{ lambda ; a:i32[5] i:i32[]. let b:i32[2] = "
                                 "dynamic_slice[slice_sizes=(2,)] a i in (b,) }"))(
          {ints({10, 11, 12, 13, 14}), Array::scalar<int32_t>(7)});
  EXPECT_EQ(testing::as_array(out[0]), ints({13, 14}));
}

TEST(NativeShape, GatherClampsAndScatterDropsOutOfRange) {
  Array idx = ints({2, -1, 7, 0, 2});
  check_text("{ lambda ; a:f32[3,4] i:i32[5]. let b:f32[3,5] = gather[axis=1] a i in (b,) }",
             {random_array(at(DType::f32, {3, 4}), 1), idx});
  check_text(
      "{ lambda ; a:f32[3,4] i:i32[5] u:f32[3,5]. let b:f32[3,4] = scatter[axis=1] a i u "
      "in (b,) }",
      {random_array(at(DType::f32, {3, 4}), 1), idx, random_array(at(DType::f32, {3, 5}), 2)});
  check_text(
      "{ lambda ; a:i32[4,2] i:i32[5] u:i32[5,2]. let b:i32[4,2] = scatter-add[axis=0] "
      "a i u in (b,) }",
      {random_array(at(DType::i32, {4, 2}), 1), idx, random_array(at(DType::i32, {5, 2}), 2)});
}

TEST(NativeReduce, SumMaxMinOverAxesIncludingEmpty) {
  for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64})
    for (const char* p : {"reduce_sum", "reduce_max", "reduce_min"}) {
      std::string t(short_name(d));
      check_text(fmt::format("{{ lambda ; a:{0}[3,4,5]. let b:{0}[4] = {1}[axes=(0, 2)] a; "
                             "c:{0}[] = {1}[axes=(0, 1, 2)] a; d:{0}[3,4,5] = {1}[axes=()] a "
                             "in (b, c, d) }}",
                             t, p),
                 {random_array(at(d, {3, 4, 5}), 3)}, 1e-5);
      check_text(
          fmt::format("{{ lambda ; a:{0}[0,2]. let b:{0}[2] = {1}[axes=(0,)] a in (b,) }}", t, p),
          {Array(at(d, {0, 2}))});
    }
}

TEST(NativeReduce, ArgmaxTakesFirstMaximumAndNaN) {
  Array x = Array::from_vector<float>({1, 3, 3, 2, std::nanf(""), 5, 0, 0, 0}, {3, 3});
  check_text(
      "{ lambda ; a:f32[3,3]. let b:i32[3] = argmax[axes=(1,) index_dtype=int32] a; "
      "c:i64[3] = argmax[axes=(0,) index_dtype=int64] a in (b, c) }",
      {x});
  check_text(
      "{ lambda ; a:i32[4,5]. let b:i32[5] = argmax[axes=(0,) index_dtype=int32] a in (b,) }",
      {random_array(at(DType::i32, {4, 5}), 2)});
}

TEST(NativeReduce, DotGeneralMatmulBatchAndVector) {
  for (DType d : {DType::f32, DType::f64, DType::i32}) {
    std::string t(short_name(d));
    check_text(fmt::format("{{ lambda ; a:{0}[3,4] b:{0}[4,5]. let c:{0}[3,5] = dot_general["
                           "dimension_numbers=(([1], [0]), ([], [])) precision=None "
                           "preferred_element_type={1}] a b in (c,) }}",
                           t, long_name(d)),
               {random_array(at(d, {3, 4}), 1), random_array(at(d, {4, 5}), 2)}, 1e-5);
    check_text(fmt::format("{{ lambda ; a:{0}[2,3,4] b:{0}[2,5,4]. let c:{0}[2,3,5] = dot_general["
                           "dimension_numbers=(([2], [2]), ([0], [0])) precision=None "
                           "preferred_element_type={1}] a b in (c,) }}",
                           t, long_name(d)),
               {random_array(at(d, {2, 3, 4}), 1), random_array(at(d, {2, 5, 4}), 2)}, 1e-5);
    check_text(fmt::format("{{ lambda ; a:{0}[5,4,3] b:{0}[2,4,3]. let c:{0}[5,2] = dot_general["
                           "dimension_numbers=(([1, 2], [1, 2]), ([], [])) precision=None "
                           "preferred_element_type={1}] a b in (c,) }}",
                           t, long_name(d)),
               {random_array(at(d, {5, 4, 3}), 1), random_array(at(d, {2, 4, 3}), 2)}, 1e-5);
    check_text(fmt::format("{{ lambda ; a:{0}[3,4] b:{0}[4]. let c:{0}[3] = dot_general["
                           "dimension_numbers=(([1], [0]), ([], [])) precision=None "
                           "preferred_element_type={1}] a b in (c,) }}",
                           t, long_name(d)),
               {random_array(at(d, {3, 4}), 1), random_array(at(d, {4}), 2)}, 1e-5);
    check_text(fmt::format("{{ lambda ; a:{0}[6] b:{0}[6]. let c:{0}[] = dot_general["
                           "dimension_numbers=(([0], [0]), ([], [])) precision=None "
                           "preferred_element_type={1}] a b in (c,) }}",
                           t, long_name(d)),
               {random_array(at(d, {6}), 1), random_array(at(d, {6}), 2)}, 1e-5);
  }
}

}  // namespace
}  // namespace refjit
