// dot_general through the runtime's matrix kernel (compiler/backend/lower_dot.cpp): which
// products call it, and native results against the interpreter in every operand layout,
// with batches, grouped dims, operands that are views, and results in the workspace.
#include <fmt/format.h>

#include "test_util.h"

namespace refjit::testing {
namespace {

// sum over c = dot_general(a, b) with the given dims, and c itself.
std::string product(const std::string& a, const std::string& b, const std::string& c,
                    const std::string& dims, const std::string& dtype = "f32") {
  return fmt::format(
      "{{ lambda ; a:{0}{1} b:{0}{2}. let c:{0}{3} = dot_general[dimension_numbers={4}] a b "
      "in (c,) }}",
      dtype, a, b, c, dims);
}

TEST(DotKernel, LargeFloatProductsCallTheKernelInEveryLayout) {
  struct Case {
    const char *a, *b, *c, *dims;
  } cases[] = {
      {"[40,50]", "[50,30]", "[40,30]", "(([1], [0]), ([], []))"},            // A B
      {"[50,40]", "[50,30]", "[40,30]", "(([0], [0]), ([], []))"},            // A^T B
      {"[40,50]", "[30,50]", "[40,30]", "(([1], [1]), ([], []))"},            // A B^T
      {"[50,40]", "[30,50]", "[40,30]", "(([0], [1]), ([], []))"},            // A^T B^T
      {"[3,40,50]", "[3,50,30]", "[3,40,30]", "(([2], [1]), ([0], [0]))"},    // batched
      {"[40,5,10]", "[5,10,30]", "[40,30]", "(([1, 2], [0, 1]), ([], []))"},  // grouped k
      {"[4,10,50]", "[50,30]", "[4,10,30]", "(([2], [0]), ([], []))"},        // grouped m
      {"[300,200]", "[200]", "[300]", "(([1], [0]), ([], []))"},              // matrix-vector
      {"[200]", "[200,300]", "[300]", "(([0], [0]), ([], []))"},              // vector-matrix
  };
  uint32_t seed = 1;
  for (const Case& k : cases) {
    for (const char* dtype : {"f32", "f64"}) {
      std::string text = product(k.a, k.b, k.c, k.dims, dtype);
      SCOPED_TRACE(text);
      Jaxpr j = parse_jaxpr(text);
      EXPECT_EQ(count(emit_mlir(j, {}), fmt::format("call @refjit_gemm_{}", dtype)), 1u);
      const DType d = std::string(dtype) == "f32" ? DType::f32 : DType::f64;
      expect_matches_interpreter(
          j,
          {random_array(at(d, j.type_of(j.invars[0]).array.shape), seed),
           random_array(at(d, j.type_of(j.invars[1]).array.shape), seed + 1)},
          1e-4);  // sums of 200 products of numbers in [-3, 3]
      seed += 2;
    }
  }
}

TEST(DotKernel, SmallIntegerAndStandAloneProductsStayLoops) {
  Jaxpr small = parse_jaxpr(product("[3,4]", "[4,5]", "[3,5]", "(([1], [0]), ([], []))"));
  EXPECT_EQ(count(emit_mlir(small, {}), "refjit_gemm"), 0u);
  Jaxpr ints =
      parse_jaxpr(product("[40,50]", "[50,30]", "[40,30]", "(([1], [0]), ([], []))", "i32"));
  EXPECT_EQ(count(emit_mlir(ints, {}), "refjit_gemm"), 0u);
  // `refjit compile` objects need only libc and libm: no runtime kernel.
  Jaxpr large = parse_jaxpr(product("[40,50]", "[50,30]", "[40,30]", "(([1], [0]), ([], []))"));
  EXPECT_EQ(count(emit_mlir(large, {.runtime_kernels = false}), "refjit_gemm"), 0u);
  expect_matches_interpreter(
      large, {random_array(at(DType::f32, {40, 50}), 3), random_array(at(DType::f32, {50, 30}), 4)},
      1e-5, {.runtime_kernels = false});
}

// Operands that are views (a scan's row of xs, a row of the carry) and products whose
// operands and results live at offsets in the workspace.
TEST(DotKernel, ViewsAndWorkspaceOffsets) {
  // Scaled so that tanh does not saturate: rounding differences then stay small.
  check_text(
      R"({ lambda ; v:f32[64,64] xs:f32[5,64,64]. let
    w:f32[64,64] = mul v 0.02:f32[]
    h:f32[64,64] ys:f32[5,64,64] = scan[length=5 num_consts=1 num_carry=1 reverse=False
      linear=(False, False, False) unroll=1 jaxpr={ lambda ; w:f32[64,64] h:f32[64,64] x:f32[64,64]. let
        a:f32[64,64] = dot_general[dimension_numbers=(([1], [0]), ([], []))] h w
        b:f32[64,64] = dot_general[dimension_numbers=(([0], [1]), ([], []))] x a
        c:f32[64,64] = tanh b
      in (c, a) }] w w xs
    s:f32[] = reduce_sum[axes=(0, 1)] h
  in (s, ys) })",
      {random_array(at(DType::f32, {64, 64}), 5), random_array(at(DType::f32, {5, 64, 64}), 6)},
      1e-4);
  // The gradient of sum(a @ b): its products read the workspace at nonzero offsets.
  Jaxpr j = parse_jaxpr(R"({ lambda ; a:f32[3,20,30] b:f32[3,40,20]. let
    c:f32[3,30,40] = dot_general[dimension_numbers=(([1], [2]), ([0], [0]))] a b
    d:f32[3,30,40] = sin c
    e:f32[3,30,20] = dot_general[dimension_numbers=(([2], [1]), ([0], [0]))] d b
    f:f32[] = reduce_sum[axes=(0, 1, 2)] e
  in (f,) })");
  expect_matches_interpreter(
      j,
      {random_array(at(DType::f32, {3, 20, 30}), 7), random_array(at(DType::f32, {3, 40, 20}), 8)},
      1e-4);
}

// `ref[...] += dot_general(...)` inside a scan, as the gradient of an RNN accumulates its
// weight gradients: the kernel adds each product straight into the ref (a product
// accumulation); small products fall back to a product buffer and an add. Both against the
// interpreter, with the ref's final contents compared.
TEST(DotKernel, ProductsAccumulateIntoRefs) {
  for (int n : {64, 8}) {  // 64: the kernel adds in place; 8: below its threshold, loops
    const std::string text =
        fmt::format(R"({{ lambda ; w:Ref{{f32[{0},{0}]}} xs:f32[5,1,{0}] hs:f32[5,1,{0}]. let
    scan[length=5 num_consts=1 num_carry=0 reverse=False linear=(False, False, False) unroll=1
      jaxpr={{ lambda ; g:Ref{{f32[{0},{0}]}} x:f32[1,{0}] h:f32[1,{0}]. let
        p:f32[{0},{0}] = dot_general[dimension_numbers=(([0], [0]), ([], []))] x h
        g[...] += p
      in () }}] w xs hs
  in () }})",
                    n);
    SCOPED_TRACE(text);
    Jaxpr j = parse_jaxpr(text);
    const std::string mlir = emit_mlir(j, {});
    EXPECT_EQ(count(mlir, "call @refjit_gemm_f32"), n == 64 ? 1u : 0u);
    expect_matches_interpreter(
        j,
        {ref_of(random_array(at(DType::f32, {n, n}), 1)),
         random_array(at(DType::f32, {5, 1, n}), 2), random_array(at(DType::f32, {5, 1, n}), 3)},
        1e-5);
  }
}

}  // namespace
}  // namespace refjit::testing
