// JVP (finite differences) and transpose identity for the shape, slicing, indexing,
// reduction and contraction primitives, plus structural checks of the sparse transposes.
#include <gtest/gtest.h>

#include "passes/ad/vjp.h"
#include "test/passes/ad_check.h"

namespace refjit {
namespace {

using namespace refjit::testing;

AdCase Case(const std::string& text, std::map<size_t, Array> fixed = {}) {
  AdCase c{parse(text)};
  c.fixed = std::move(fixed);
  return c;
}

Array i32s(std::vector<int32_t> v, Shape s) { return Array::from_vector<int32_t>(v, s); }

TEST(ShapeAd, BroadcastReshapeSqueezeExpandTranspose) {
  check_ad(Case(R"({ lambda ; a:f64[3] b:f64[3,1]. let
    c:f64[2,3] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(2, 3) sharding=None] a
    d:f64[3,4] = broadcast_in_dim[broadcast_dimensions=(0, 1) shape=(3, 4) sharding=None] b
    e:f64[3,2] = reshape[dimensions=None new_sizes=(3, 2)] c
    f:f64[3] = squeeze[dimensions=(1,)] b
    g:f64[1,3] = expand_dims[dimensions=(0,)] a
    h:f64[4,3] = transpose[permutation=(1, 0)] d
  in (e, f, g, h) })"));
}

TEST(ShapeAd, ConcatenateAndPad) {
  check_ad(Case(R"({ lambda ; a:f64[2] b:f64[3] p:f64[]. let
    c:f64[5] = concatenate[dimension=0] a b
    d:f64[8] = pad[padding_config=((1, 2, 1),)] b p
    e:f64[3] = pad[padding_config=((-1, 2, 0),)] a p
  in (c, d, e) })"));
}

TEST(ShapeAd, StaticAndDynamicSlices) {
  check_ad(Case(R"({ lambda ; a:f64[6] i:i32[] u:f64[2]. let
    b:f64[3] = slice[limit_indices=(6,) start_indices=(1,) strides=(2,)] a
    c:f64[2] = dynamic_slice[slice_sizes=(2,)] a i
    d:f64[6] = dynamic_update_slice a u i
    e:f64[2] = mul c c
  in (b, e, d) })",
                {{1, i32(3)}}));
  // A start past the end clamps, in the JVP, the linearization and the transpose alike.
  check_ad(Case(R"({ lambda ; a:f64[6] i:i32[]. let
    c:f64[2] = dynamic_slice[slice_sizes=(2,)] a i
  in (c,) })",
                {{1, i32(9)}}));
}

TEST(ShapeAd, GatherScatterAndScatterAdd) {
  check_ad(Case(R"({ lambda ; a:f64[4,3] i:i32[3] u:f64[3,3]. let
    b:f64[3,3] = gather[axis=0] a i
    c:f64[4,3] = scatter-add[axis=0] a i u
  in (b, c) })",
                {{1, i32s({2, 0, 2}, {3})}}));  // duplicates accumulate
  check_ad(Case(R"({ lambda ; a:f64[4,3] i:i32[2] u:f64[2,3]. let
    c:f64[4,3] = scatter[axis=0] a i u
  in (c,) })",
                {{1, i32s({3, 1}, {2})}}));
  check_ad(Case(R"({ lambda ; a:f64[3,5] i:i32[2]. let
    b:f64[3,2] = gather[axis=1] a i
  in (b,) })",
                {{1, i32s({4, 1}, {2})}}));
}

TEST(ShapeAd, Reductions) {
  check_ad(Case(R"({ lambda ; a:f64[2,3]. let
    b:f64[2] = reduce_sum[axes=(1,)] a
    c:f64[3] = reduce_max[axes=(0,)] a
    d:f64[] = reduce_min[axes=(0, 1)] a
  in (b, c, d) })"));
}

TEST(ShapeAd, DotGeneralContractionsAndBatches) {
  check_ad(Case(R"({ lambda ; a:f64[2,3] b:f64[3,4]. let
    c:f64[2,4] = dot_general[dimension_numbers=(([1], [0]), ([], [])) precision=None preferred_element_type=None] a b
  in (c,) })"));
  check_ad(Case(R"({ lambda ; a:f64[2,3,4] b:f64[2,4,5]. let
    c:f64[2,3,5] = dot_general[dimension_numbers=(([2], [1]), ([0], [0])) precision=None preferred_element_type=None] a b
  in (c,) })"));
  check_ad(Case(R"({ lambda ; a:f64[3,2] b:f64[4,3]. let
    c:f64[2,4] = dot_general[dimension_numbers=(([0], [1]), ([], [])) precision=None preferred_element_type=None] a b
  in (c,) })"));
  check_ad(Case(R"({ lambda ; a:f64[3,2,4] b:f64[4,5,3]. let
    c:f64[2,5] = dot_general[dimension_numbers=(([0, 2], [2, 0]), ([], [])) precision=None preferred_element_type=None] a b
  in (c,) })"));
}

TEST(ShapeAd, IotaAndArgmaxHaveZeroTangent) {
  check_ad(Case(R"({ lambda ; a:f64[3]. let
    b:f64[3] = iota[dimension=0 dtype=float64 shape=(3,) sharding=None]
    c:f64[3] = mul a b
    d:i32[] = argmax[axes=(0,) index_dtype=int32] a
  in (c, d) })"));
}

// W @ x with x DontWant: the backward pass has one dot_general (for W), not two.
TEST(ShapeAd, DontWantOnOneSideOfMatmulEmitsOneDot) {
  Jaxpr f = parse(R"({ lambda ; w:f32[4,4] x:f32[4]. let
    y:f32[4] = dot_general[dimension_numbers=(([1], [0]), ([], [])) precision=None preferred_element_type=None] w x
  in (y,) })");
  VjpJaxprs both = vjp_jaxpr(f, {true, true}, {AccumKind::value, AccumKind::value});
  VjpJaxprs only_w = vjp_jaxpr(f, {true, true}, {AccumKind::value, AccumKind::dont_want});
  EXPECT_EQ(count_prim(print_jaxpr(both.backward), "dot_general"), 2);
  EXPECT_EQ(count_prim(print_jaxpr(only_w.backward), "dot_general"), 1)
      << print_jaxpr(only_w.backward);
  EXPECT_EQ(only_w.backward.outvars.size(), 1u);
  // W_bar[0] = [1, 1, 1, 1] for ones inputs and cotangent.
  Array ones44 = Array::full(ArrayType{DType::f32, {4, 4}}, 1.0);
  Array ones4 = Array::full(ArrayType{DType::f32, {4}}, 1.0);
  auto fwd = run(only_w.forward, {ones44, ones4});
  std::vector<RtValue> args(fwd.begin() + 1, fwd.end());
  args.push_back(ones4);
  auto out = run(only_w.backward, args);
  EXPECT_EQ(values(arr(out[0])), std::vector<double>(16, 1.0));
}

// The residuals of a dynamic_slice read are the index and the read slice, not the array.
TEST(ShapeAd, DynamicSliceResidualsAreIndexAndSlice) {
  Jaxpr f = parse(R"({ lambda ; a:f32[1000] i:i32[]. let
    b:f32[4] = dynamic_slice[slice_sizes=(4,)] a i
    c:f32[4] = mul b b
  in (c,) })");
  Linearized l = linearize_jaxpr(f, {true, false});
  ASSERT_EQ(l.num_residuals, 2);
  std::vector<std::string> types;
  for (int k = 0; k < l.num_residuals; ++k)
    types.push_back(l.linear.type_of(l.linear.invars[k]).str());
  std::sort(types.begin(), types.end());
  EXPECT_EQ(types, (std::vector<std::string>{"f32[4]", "i32[]"}));
}

// With a value accumulator that already holds a dense cotangent, a slice contribution is an
// add into just the slice (an addupdate), not a dense one-hot plus a dense add.
TEST(ShapeAd, SparseContributionToDenseValueAccumulatorIsSliceSized) {
  Jaxpr f = parse(R"({ lambda ; a:f32[100] i:i32[]. let
    b:f32[1] = dynamic_slice[slice_sizes=(1,)] a i
    c:f32[] = squeeze[dimensions=(0,)] b
    d:f32[] = reduce_sum[axes=(0,)] a
    e:f32[] = add c d
  in (e,) })");
  VjpJaxprs v = vjp_jaxpr(f, {true, false}, {AccumKind::value});
  const std::string text = print_jaxpr(v.backward);
  EXPECT_EQ(count_prim(text, "add_any"), 0) << text;
  EXPECT_EQ(count_prim(text, "dynamic_update_slice"), 0) << text;
  EXPECT_NE(text.find("+="), std::string::npos) << text;
  Array x(ArrayType{DType::f32, {100}});
  auto fwd = run(v.forward, {x, i32(7)});
  std::vector<RtValue> args(fwd.begin() + 1, fwd.end());
  args.push_back(f32(1.0f));
  Array g = arr(run(v.backward, args)[0]);
  for (int k = 0; k < 100; ++k) EXPECT_EQ(g.as_double(k), k == 7 ? 2.0 : 1.0);
}

// Slice and gather transposes with a ref accumulator are addupdates of the touched entries.
TEST(ShapeAd, SliceAndGatherTransposeIntoRefAreSparse) {
  Jaxpr f = parse(R"({ lambda ; a:f32[50] i:i32[3]. let
    b:f32[3] = gather[axis=0] a i
    c:f32[5] = slice[limit_indices=(10,) start_indices=(0,) strides=(2,)] a
    d:f32[] = reduce_sum[axes=(0,)] b
    e:f32[] = reduce_sum[axes=(0,)] c
    g:f32[] = add d e
  in (g,) })");
  VjpJaxprs v = vjp_jaxpr(f, {true, false}, {AccumKind::ref});
  const std::string text = print_jaxpr(v.backward);
  EXPECT_EQ(count_prim(text, "new_ref"), 0) << text;
  EXPECT_EQ(text.find("f32[50] ="), std::string::npos) << text;
  Array x(ArrayType{DType::f32, {50}});
  auto fwd = run(v.forward, {x, i32s({4, 4, 1}, {3})});
  RefBufferPtr g = ref_of(Array::full(ArrayType{DType::f32, {50}}, 10.0));
  std::vector<RtValue> args(fwd.begin() + 1, fwd.end());
  args.push_back(g);
  args.push_back(f32(1.0f));
  run(v.backward, args);
  for (int k = 0; k < 50; ++k) {
    double expect = 10.0 + (k == 4 ? 2 : 0) + (k == 1 ? 1 : 0) + (k < 10 && k % 2 == 0 ? 1 : 0);
    EXPECT_EQ(g->value().as_double(k), expect) << k;
  }
}

}  // namespace
}  // namespace refjit

namespace refjit {
namespace {

using namespace refjit::testing;

// Windows: the JVP against finite differences, the transposes by the identity (distinct
// values, so no tie moves a window's maximum within the finite-difference step).
TEST(WindowAd, ReductionsAndSelectionsDifferentiateAndTranspose) {
  const std::string w =
      "base_dilation=(1, 2) padding=((1, 0), (0, 2)) window_dilation=(1, 1) "
      "window_dimensions=(2, 3) window_strides=(1, 2)";
  for (const char* p : {"reduce_window_sum", "reduce_window_max", "reduce_window_min"}) {
    SCOPED_TRACE(p);
    AdCase c{parse(std::string("{ lambda ; a:f64[3,4]. let b:f64[3,4] = ") + p + "[" + w +
                   "] a; d:f64[3,4] = mul b b in (d,) }")};
    check_ad(c);
  }
  AdCase gather{
      parse("{ lambda ; t:f64[3,4] x:f64[3,4]. let g:f64[3,4] = "
            "select_and_gather_add[select_prim=ge " +
            w + "] t x in (g,) }")};
  gather.fixed.emplace(1, random_array(ArrayType{DType::f64, {3, 4}}, 9));
  check_ad(gather);
  AdCase scatter{parse(
      "{ lambda ; s:f64[2,2] x:f64[3,4]. let y:f64[3,4] = select_and_scatter_add["
      "padding=((0, 0), (0, 0)) select_prim=le window_dimensions=(2, 3) window_strides=(1, 1)]"
      " s x in (y,) }")};
  scatter.fixed.emplace(1, random_array(ArrayType{DType::f64, {3, 4}}, 10));
  check_ad(scatter);
}

}  // namespace
}  // namespace refjit
