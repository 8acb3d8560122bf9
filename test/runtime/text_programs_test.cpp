// End-to-end: jaxpr text (as JAX prints it) parsed and then interpreted.
#include <cmath>

#include "eval_test_util.h"
#include "refjit/ir/text.h"

namespace refjit {
namespace {

using namespace refjit::test;

std::vector<float> iota_f32(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

TEST(TextPrograms, SeedTakeVjpAccumulatesIntoTheGradientRef) {
  Jaxpr j = parse_jaxpr(R"({ lambda a:f32[10] b:Ref{f32[10]}; . let
    _:f32[] c:i32[] = jit[
      name=take
      jaxpr={ lambda ; a:f32[10] d:i32[]. let
          e:bool[] = lt d 0:i32[]
          f:i32[] = convert_element_type[new_dtype=int32 weak_type=False] d
          g:i32[] = add f 10:i32[]
          c:i32[] = select_n e d g
          h:f32[1] = dynamic_slice[slice_sizes=(1,)] a c
          _:f32[] = squeeze[dimensions=(0,)] h
        in (_, c) }
    ] a -3:i32[]
    jit[
      name=take
      jaxpr={ lambda ; c:i32[] b:Ref{f32[10]} i:f32[]. let
          j:f32[1] = broadcast_in_dim i
          b[c:c+1] += j
        in () }
    ] c b 1.0:f32[]
  in () })");
  auto grad = std::make_shared<RefBuffer>(Array(at(DType::f32, {10})));
  const std::byte* storage = grad->value().data();
  EXPECT_TRUE(interpret(j, {vec<float>(iota_f32(10)), grad}).empty());
  std::vector<float> want(10, 0.0f);
  want[7] = 1.0f;  // index -3 wraps to 7 in the program itself
  EXPECT_EQ(values<float>(grad->value()), want);
  EXPECT_EQ(grad->value().data(), storage);
}

TEST(TextPrograms, IndexingForms) {
  Jaxpr j = parse_jaxpr(R"({ lambda ; a:Ref{f32[4,10]} b:i32[] c:i32[] d:i32[5] e:f32[3]. let
    f:f32[4,10] <- a[...]
    j:f32[5] <- a[1,::2]
    k:f32[4,3] <- a[:,1:7:2]
    l:f32[3] <- a[b,c:c+3]
    m:f32[5,10] <- a[d]
    o:f32[3], a[3,4:7] <- a[3,4:7], e
    a[b,c:c+3] <- e
    a[0,:3] += e
    p:f32[] <- a[b,c]
    r:f32[1,10] <- a[3:i32[]:3:i32[]+1]
  in (f, j, k, l, m, o, p, r) })");
  auto ref = std::make_shared<RefBuffer>(arr<float>(iota_f32(40), {4, 10}));
  std::vector<RtValue> out =
      interpret(j, {ref, Array::scalar<int32_t>(1), Array::scalar<int32_t>(2),
                    vec<int32_t>({0, 3, 1, 2, 3}), vec<float>({100, 200, 300})});
  EXPECT_EQ(values<float>(as_array(out[0])), iota_f32(40));
  EXPECT_EQ(values<float>(as_array(out[1])), (std::vector<float>{10, 12, 14, 16, 18}));
  EXPECT_EQ(values<float>(as_array(out[2])),
            (std::vector<float>{1, 3, 5, 11, 13, 15, 21, 23, 25, 31, 33, 35}));
  EXPECT_EQ(values<float>(as_array(out[3])), (std::vector<float>{12, 13, 14}));
  std::vector<float> m = values<float>(as_array(out[4]));
  EXPECT_EQ(m[10], 30.0f);  // row 1 of m is a[3]
  EXPECT_EQ(m[49], 39.0f);
  EXPECT_EQ(values<float>(as_array(out[5])), (std::vector<float>{34, 35, 36}));
  EXPECT_EQ(values<float>(as_array(out[6])), (std::vector<float>{100}));
  EXPECT_EQ(values<float>(as_array(out[7])),
            (std::vector<float>{30, 31, 32, 33, 100, 200, 300, 37, 38, 39}));
  std::vector<float> final_values = values<float>(ref->value());
  EXPECT_EQ(std::vector<float>(final_values.begin(), final_values.begin() + 4),
            (std::vector<float>{100, 201, 302, 3}));
}

TEST(TextPrograms, ForeachScanOverClosedOverRef) {
  Jaxpr j = parse_jaxpr(R"({ lambda a:Ref{i32[]}; b:i32[10]. let
    c:i32[10] = scan[
      _split_transpose=False
      jaxpr={ lambda ; d:Ref{i32[]} e:i32[]. let
          d[...] += e
          f:i32[] = mul e 2:i32[]
        in (f,) }
      length=10
      linear=(False, False)
      num_carry=0
      num_consts=1
      reverse=False
      unroll=1
    ] a b
  in (c,) })");
  auto acc = std::make_shared<RefBuffer>(Array::scalar<int32_t>(5));
  std::vector<RtValue> out = interpret(j, {acc, vec<int32_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9})});
  EXPECT_EQ(values<int32_t>(as_array(out[0])),
            (std::vector<int32_t>{0, 2, 4, 6, 8, 10, 12, 14, 16, 18}));
  EXPECT_EQ(acc->value().as_int(0), 50);
}

TEST(TextPrograms, CondClampsTheIndex) {
  Jaxpr j = parse_jaxpr(R"({ lambda ; a:i32[] b:f32[3]. let
    c:f32[3] = cond[
      branches=(
        { lambda ; d:f32[3]. let
            e:f32[3] = sin d
          in (e,) }
        { lambda ; f:f32[3]. let  in (f,) }
      )
    ] a b
  in (c,) })");
  Array b = vec<float>({0.5f, 1.0f, 2.0f});
  Array sin_b = vec<float>({std::sin(0.5f), std::sin(1.0f), std::sin(2.0f)});
  EXPECT_EQ(as_array(interpret(j, {Array::scalar<int32_t>(0), b})[0]), sin_b);
  EXPECT_EQ(as_array(interpret(j, {Array::scalar<int32_t>(-4), b})[0]), sin_b);
  EXPECT_EQ(as_array(interpret(j, {Array::scalar<int32_t>(9), b})[0]), b);
}

TEST(TextPrograms, ParamsOfCommonPrimitives) {
  Jaxpr j = parse_jaxpr(R"({ lambda ; a:f32[2,3] b:f32[3,4] c:i32[3]. let
    d:f32[2,6] = pad[padding_config=((0, 0, 0), (1, 2, 0))] a 0.0:f32[]
    e:f32[2,4] = dot_general[dimension_numbers=(([1], [0]), ([], [])) precision=None preferred_element_type=float32] a b
    f:f32[3] = convert_element_type[new_dtype=float32 weak_type=False] c
    m:f32[2,3] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(2, 3) sharding=None] f
    k:i32[3] = argmax[axes=(0,) index_dtype=int32] a
    n:f32[2,3] = integer_pow[y=2] a
    o:f32[2,3] = mul n -1.5:f32[]
    r:Ref{f32[2,3]} = new_ref o
    s:f32[2,3] = freeze r
    u:bool[] = not True:bool[]
  in (d, e, m, k, s, u) })");
  Array a = arr<float>({1, 5, 3, 4, 2, 6}, {2, 3});
  Array b = arr<float>({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1}, {3, 4});
  std::vector<RtValue> out = interpret(j, {a, b, vec<int32_t>({7, 8, 9})});
  EXPECT_EQ(values<float>(as_array(out[0])),
            (std::vector<float>{0, 1, 5, 3, 0, 0, 0, 4, 2, 6, 0, 0}));
  EXPECT_EQ(values<float>(as_array(out[1])), (std::vector<float>{1, 5, 3, 3, 4, 2, 6, 6}));
  EXPECT_EQ(values<float>(as_array(out[2])), (std::vector<float>{7, 8, 9, 7, 8, 9}));
  EXPECT_EQ(values<int32_t>(as_array(out[3])), (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(values<float>(as_array(out[4])),
            (std::vector<float>{-1.5, -37.5, -13.5, -24, -6, -54}));
  EXPECT_EQ(values<bool>(as_array(out[5])), (std::vector<bool>{false}));
}

}  // namespace
}  // namespace refjit
