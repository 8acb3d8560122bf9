// dot_general through the runtime's matrix kernel (backend/lower_dot.cpp): which
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

// A product and its elementwise consumer (product_epilogues.h): the kernel runs the
// consumer's loops on each block of rows as it is final (`refjit_gemm_*_then` with an outlined
// `refjit_epilogue_N`), and no other loop reads the product. Results against the interpreter
// on every path of the kernel and on the fallbacks (products that stay loops, and a
// matrix-vector product, whose result has no column dim, lowered one after the other).
TEST(DotKernel, ElementwiseConsumersRunAsTheKernelsEpilogue) {
  struct Case {
    std::string text;
    bool epilogue;  // expected as a kernel epilogue (false: product, then the consumer)
  } cases[] = {
      // relu(x @ w + b) (JAX's [1, n] broadcast of b becomes this one in `canonicalize`).
      {R"({ lambda ; x:f32[64,100] w:f32[100,80] b:f32[80]. let
    p:f32[64,80] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x w
    c:f32[64,80] = broadcast_in_dim[broadcast_dimensions=(1,) shape=(64, 80)] b
    d:f32[64,80] = add p c
    e:f32[64,80] = max d 0.0:f32[]
  in (e,) })",
       true},
      // A batch, in f64, with a scalar operand from outside.
      {R"({ lambda ; x:f64[3,40,50] w:f64[3,50,30] s:f64[]. let
    p:f64[3,40,30] = dot_general[dimension_numbers=(([2], [1]), ([0], [0]))] x w
    d:f64[3,40,30] = mul p s
    e:f64[3,40,30] = tanh d
  in (e,) })",
       true},
      // Grouped free dims: rows are the flattened [4, 10].
      {R"({ lambda ; x:f32[4,10,50] w:f32[50,30]. let
    p:f32[4,10,30] = dot_general[dimension_numbers=(([2], [0]), ([], []))] x w
    e:f32[4,10,30] = logistic p
  in (e,) })",
       true},
      // A vector times a matrix: one row.
      {R"({ lambda ; x:f32[200] w:f32[200,300] b:f32[300]. let
    p:f32[300] = dot_general[dimension_numbers=(([0], [0]), ([], []))] x w
    d:f32[300] = add p b
    e:f32[300] = tanh d
  in (e,) })",
       true},
      // A single consumer (no group) reading an array of the product's shape.
      {R"({ lambda ; x:f32[64,100] w:f32[100,80] y:f32[64,80]. let
    p:f32[64,80] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x w
    e:f32[64,80] = sub y p
  in (e,) })",
       true},
      // An unrelated eqn between the product and its consumer stays where it is.
      {R"({ lambda ; x:f32[64,100] w:f32[100,80] y:f32[64,80] v:f32[50]. let
    p:f32[64,80] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x w
    s:f32[50] = sin v
    e:f32[64,80] = add p y
  in (e, s) })",
       true},
      // The shallow kernel (depth 4), threads splitting rows, threads splitting columns.
      {R"({ lambda ; x:f32[300,4] w:f32[4,64]. let
    p:f32[300,64] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x w
    e:f32[300,64] = exp p
  in (e,) })",
       true},
      {R"({ lambda ; x:f32[512,256] w:f32[256,512]. let
    p:f32[512,512] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x w
    e:f32[512,512] = max p 0.0:f32[]
  in (e,) })",
       true},
      {R"({ lambda ; x:f32[32,300] w:f32[300,2048]. let
    p:f32[32,2048] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x w
    e:f32[32,2048] = max p 0.0:f32[]
  in (e,) })",
       true},
      // Inside a scan's body, with the product's operands views of the carry and of xs (w
      // scaled so that rounding differences stay small through the steps).
      {R"({ lambda ; v:f32[64,64] xs:f32[5,64,64]. let
    w:f32[64,64] = mul v 0.02:f32[]
    h:f32[64,64] ys:f32[5,64,64] = scan[length=5 num_consts=1 num_carry=1 reverse=False
      linear=(False, False, False) unroll=1 jaxpr={ lambda ; w:f32[64,64] h:f32[64,64] x:f32[64,64]. let
        a:f32[64,64] = dot_general[dimension_numbers=(([1], [0]), ([], []))] h w
        b:f32[64,64] = dot_general[dimension_numbers=(([0], [1]), ([], []))] x a
        c:f32[64,64] = mul b 0.05:f32[]
        d:f32[64,64] = tanh c
      in (d, a) }] w w xs
  in (h, ys) })",
       true},
      // Fallbacks: a matrix-vector product; a product too small for the kernel.
      {R"({ lambda ; x:f32[300,200] v:f32[200]. let
    p:f32[300] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x v
    e:f32[300] = tanh p
  in (e,) })",
       false},
      {R"({ lambda ; x:f32[3,4] w:f32[4,5]. let
    p:f32[3,5] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x w
    e:f32[3,5] = max p 0.0:f32[]
  in (e,) })",
       false},
  };
  uint32_t seed = 11;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.text);
    Jaxpr j = parse_jaxpr(k.text);
    const std::string mlir = emit_mlir(with_fusion(j), {});
    EXPECT_EQ(count(mlir, "_then(%"), k.epilogue ? 1u : 0u);
    EXPECT_EQ(count(mlir, "func.func private @refjit_epilogue_0("), k.epilogue ? 1u : 0u);
    // The consumer is not a loop of its own: no parallel loop reads the product.
    if (k.epilogue) EXPECT_EQ(count(mlir, "call @refjit_parallel_for"), 0u);
    std::vector<RtValue> args;
    for (const Var& v : j.invars) {
      const ArrayType t = j.type_of(v).array;
      args.push_back(random_array(t, seed++));
    }
    expect_matches_interpreter(j, args, 1e-4);
  }
}

// The plan's conditions: no epilogue when the product is also returned, read by an eqn
// outside the consumer, or when an eqn between the two computes or writes what the consumer
// reads.
TEST(DotKernel, EpiloguesOnlyWhereTheConsumerMayRunAtTheProduct) {
  const char* refused[] = {
      R"({ lambda ; x:f32[64,100] w:f32[100,80]. let
    p:f32[64,80] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x w
    e:f32[64,80] = max p 0.0:f32[]
  in (e, p) })",
      R"({ lambda ; x:f32[64,100] w:f32[100,80]. let
    p:f32[64,80] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x w
    e:f32[64,80] = max p 0.0:f32[]
    s:f32[] = reduce_sum[axes=(0, 1)] p
  in (e, s) })",
      R"({ lambda ; x:f32[64,100] w:f32[100,80] r:Ref{f32[64,80]} y:f32[64,80]. let
    p:f32[64,80] = dot_general[dimension_numbers=(([1], [0]), ([], []))] x w
    r[...] += y
    z:f32[64,80] <- r[...]
    e:f32[64,80] = mul p z
  in (e,) })",
  };
  for (const char* text : refused) {
    SCOPED_TRACE(text);
    Jaxpr j = parse_jaxpr(text);
    EXPECT_EQ(count(emit_mlir(with_fusion(j), {}), "_then(%"), 0u);
    std::vector<RtValue> args;
    uint32_t seed = 1;
    for (const Var& v : j.invars) {
      const Type t = j.type_of(v);
      Array a = random_array(t.array, seed++);
      args.push_back(t.is_ref ? ref_of(std::move(a)) : RtValue(std::move(a)));
    }
    expect_matches_interpreter(j, args, 1e-4);
  }
}

}  // namespace
}  // namespace refjit::testing
