// im2col_dot (refjit/ir/im2col.h): the runtime's implicit-im2col product against the
// interpreter over window geometries that reach every micro-panel shape, and the
// implicit-im2col pass that makes it from a convolution's windows.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "passes/simplify/implicit_im2col.h"
#include "test_util.h"

namespace refjit::testing {
namespace {

struct Geometry {
  Shape x;
  std::vector<IntList> starts;
  IntList strides, window;
  int64_t cols;  // k's columns: the product's last dim
};

// The starts of a kh x kw grid of windows, `dilation` apart, in dims 1 and 2 of a rank-4 x.
std::vector<IntList> grid(int64_t kh, int64_t kw, int64_t dilation = 1) {
  std::vector<IntList> starts;
  for (int64_t a = 0; a < kh; ++a)
    for (int64_t b = 0; b < kw; ++b) starts.push_back({0, a * dilation, b * dilation, 0});
  return starts;
}

std::string ints(const IntList& v) { return fmt::format("({})", fmt::join(v, ", ")); }

std::string shape_text(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ",")); }

// y = im2col_dot x k, or with `transposed` y = im2col_tdot x g.
std::string im2col_program(const Geometry& g, const char* dtype, bool transposed = false) {
  std::vector<std::string> starts;
  for (const IntList& s : g.starts) starts.push_back(ints(s));
  Shape rows(g.window.begin(), g.window.end() - 1);
  rows.push_back(g.cols);
  Shape depth = {static_cast<int64_t>(g.starts.size()) * g.window.back(), g.cols};
  if (transposed) std::swap(rows, depth);
  return fmt::format(
      "{{ lambda ; x:{0}{1} k:{0}{2}. let y:{0}{3} = {7}[starts=({4}) strides={5} "
      "window={6}] x k in (y,) }}",
      dtype, shape_text(g.x), shape_text(depth), shape_text(rows), fmt::join(starts, ", "),
      ints(g.strides), ints(g.window), transposed ? "im2col_tdot" : "im2col_dot");
}

std::vector<RtValue> random_args(const Jaxpr& j, uint32_t seed) {
  std::vector<RtValue> args;
  for (Var v : j.invars) args.emplace_back(random_array(j.type_of(v).array, seed++));
  return args;
}

TEST(Im2colDot, TheKernelMatchesTheInterpreterOnEveryPanelShape) {
  const Geometry cases[] = {
      // 3x3 windows of 3 channels; rows of 10 (an 8-row panel and 2 packed), 5 columns
      {{2, 10, 12, 3}, grid(3, 3), {1, 1, 1, 1}, {2, 8, 10, 3}, 5},
      // the same with 40 columns: a whole panel of columns and a ragged one
      {{2, 10, 12, 3}, grid(3, 3), {1, 1, 1, 1}, {2, 8, 10, 3}, 40},
      // strided and dilated: windows 2 apart, so no two are contiguous (runs of 4 channels)
      {{1, 15, 15, 4}, grid(3, 3, 2), {1, 2, 2, 1}, {1, 6, 6, 4}, 16},
      // 1-D: rows of 48 (14-row panels, then 4, then 2 packed)
      {{3, 50, 8}, {{0, 0, 0}, {0, 1, 0}, {0, 2, 0}}, {1, 1, 1}, {3, 48, 8}, 33},
      // large enough to run on several threads: the peer benchmark's convolution
      {{4, 34, 34, 16}, grid(3, 3), {1, 1, 1, 1}, {4, 32, 32, 16}, 32},
      // depth 360 > one depth block of 192: blocks start inside a run
      {{1, 6, 7, 40}, grid(3, 3), {1, 1, 1, 1}, {1, 4, 5, 40}, 20},
      // rows of 1 and of 29 (28 + 1 packed on the narrow tile)
      {{2, 3, 31, 2}, grid(3, 3), {1, 1, 1, 1}, {2, 1, 29, 2}, 7},
      // rows of 14 and of 8: in place as 6 + 4 + 4 and 4 + 4 on AVX2, none packed
      {{2, 3, 16, 2}, grid(3, 3), {1, 1, 1, 1}, {2, 1, 14, 2}, 20},
      {{2, 3, 10, 2}, grid(3, 3), {1, 1, 1, 1}, {2, 1, 8, 2}, 20},
  };
  uint32_t seed = 1;
  for (const Geometry& g : cases) {
    for (bool transposed : {false, true}) {
      for (const char* dtype : {"f32", "f64"}) {
        const std::string text = im2col_program(g, dtype, transposed);
        SCOPED_TRACE(text);
        const Jaxpr j = parse_jaxpr(text);
        const char* entry = transposed ? "im2col_tgemm" : "im2col_gemm";
        EXPECT_EQ(count(emit_mlir(j, {}), fmt::format("call @refjit_{}_{}", entry, dtype)), 1u);
        // Sums of up to 360 products of numbers in [-3, 3] (im2col_tdot: of 4096).
        const double rtol = dtype[1] == '3' ? (transposed ? 2e-2 : 2e-3) : 1e-10;
        expect_matches_interpreter(j, random_args(j, seed), rtol);
        seed += 2;
      }
    }
  }
}

// A bias and a ReLU after the product run on its rows inside the kernel call (an epilogue),
// with rows of 10 so that the kernel's chunks of segments end inside the product.
TEST(Im2colDot, ABiasAndReluRunAsTheKernelsEpilogue) {
  const std::string text = R"({ lambda ; x:f32[3,10,12,3] k:f32[27,20] b:f32[20]. let
    y:f32[3,8,10,20] = im2col_dot[starts=((0, 0, 0, 0), (0, 0, 1, 0), (0, 0, 2, 0), (0, 1, 0, 0), (0, 1, 1, 0), (0, 1, 2, 0), (0, 2, 0, 0), (0, 2, 1, 0), (0, 2, 2, 0)) strides=(1, 1, 1, 1) window=(3, 8, 10, 3)] x k
    c:f32[3,8,10,20] = broadcast_in_dim[broadcast_dimensions=(3,) shape=(3, 8, 10, 20)] b
    z:f32[3,8,10,20] = add y c
    r:f32[3,8,10,20] = max z 0.0:f32[]
  in (r,) })";
  const Jaxpr j = parse_jaxpr(text);
  EXPECT_EQ(count(emit_mlir(with_fusion(j), {}), "call @refjit_im2col_gemm_f32_then"), 1u);
  expect_matches_interpreter(j, random_args(j, 21), 2e-4);
}

TEST(Im2colDot, StandAloneCodeAndOtherDtypesUseLoops) {
  const Geometry g = {{2, 10, 12, 3}, grid(3, 3), {1, 1, 1, 1}, {2, 8, 10, 3}, 5};
  for (bool transposed : {false, true}) {
    const Jaxpr j = parse_jaxpr(im2col_program(g, "f32", transposed));
    EXPECT_EQ(count(emit_mlir(j, {.runtime_kernels = false}), "refjit_im2col"), 0u);
    // The loops add in the interpreter's order.
    expect_matches_interpreter(j, random_args(j, 7), 1e-5, {.runtime_kernels = false});
    const Jaxpr half = parse_jaxpr(im2col_program(g, "f16", transposed));
    EXPECT_EQ(count(emit_mlir(half, {}), "refjit_im2col"), 0u);
    expect_matches_interpreter(half, random_args(half, 9), 1e-2);
  }
}

TEST(Im2colDot, TheTypeRuleNamesWhatDoesNotFit) {
  auto error_of = [](const std::string& text) {
    try {
      parse_jaxpr(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Geometry g = {{1, 5, 5, 2}, grid(2, 2), {1, 1, 1, 1}, {1, 4, 4, 2}, 3};
  EXPECT_EQ(error_of(im2col_program(g, "f32")), "no error");
  g.window = {1, 5, 4, 2};  // the window at (0, 1, 0, 0) reaches row 5 of 5
  EXPECT_NE(error_of(im2col_program(g, "f32")).find("leaves operand 0 along dim 1"),
            std::string::npos);
  g.window = {1, 4, 4, 1};  // not every channel
  EXPECT_NE(error_of(im2col_program(g, "f32")).find("span the last dim"), std::string::npos);
  EXPECT_NE(
      error_of(im2col_program({{1, 5, 5, 2}, grid(2, 2), {1, 1, 1, 1}, {1, 4, 4, 2}, 3}, "i32"))
          .find("im2col_dot"),
      std::string::npos);
}

// A 'SAME' 3x3 convolution as import/jax/conv.cpp reads it: pad, nine windows side by
// side, one product with the kernel (k transposed when `transposed_kernel`).
std::string conv_program(bool transposed_kernel) {
  std::string text =
      "{ lambda ; a:f32[2,6,7,3] w:f32[__K__]. let\n"
      "  c:f32[2,8,9,3] = pad[padding_config=((0, 0, 0), (1, 1, 0), (1, 1, 0), (0, 0, 0))] a "
      "0.0:f32[]\n";
  std::string pieces;
  const char* names[] = {"d", "e", "f", "g", "h", "i", "j", "k", "l"};
  int t = 0;
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 3; ++b, ++t) {
      text += fmt::format(
          "  {}:f32[2,6,7,3] = slice[limit_indices=(2, {}, {}, 3) start_indices=(0, {}, {}, 0) "
          "strides=(1, 1, 1, 1)] c\n",
          names[t], a + 6, b + 7, a, b);
      pieces += std::string(" ") + names[t];
    }
  text += "  m:f32[2,6,7,27] = concatenate[dimension=3]" + pieces + "\n";
  text += transposed_kernel
              ? "  y:f32[2,6,7,4] = dot_general[dimension_numbers=(([3], [1]), ([], []))] m w\n"
              : "  y:f32[2,6,7,4] = dot_general[dimension_numbers=(([3], [0]), ([], []))] m w\n";
  text += "  in (y, m) }";
  const std::string k = transposed_kernel ? "4,27" : "27,4";
  text.replace(text.find("__K__"), 5, k);
  return text;
}

size_t count_prim(const Jaxpr& j, Prim p) {
  size_t n = 0;
  for (const Eqn& e : j.eqns) n += e.prim == p;
  return n;
}

TEST(ImplicitIm2col, AConvolutionsProductReadsItsWindowsInPlace) {
  for (bool transposed : {false, true}) {
    const Jaxpr j = parse_jaxpr(conv_program(transposed));
    int changes = 0;
    const Jaxpr r = implicit_im2col(j, &changes);
    EXPECT_EQ(changes, 1);
    EXPECT_EQ(count_prim(r, Prim::im2col_dot), 1u);
    EXPECT_EQ(count_prim(r, Prim::dot_general), 0u);
    // m is still returned, so its windows stay.
    EXPECT_EQ(count_prim(r, Prim::concatenate), 1u);
    // The same bits as the product of the concatenation, on the interpreter.
    const std::vector<RtValue> args = random_args(j, 11);
    const std::vector<RtValue> want = interpret(j, deep_copy(args));
    const std::vector<RtValue> got = interpret(r, deep_copy(args));
    expect_close(as_array(got[0]), as_array(want[0]), 0.0, "the product");
    expect_matches_interpreter(r, args, 1e-4);
  }
}

TEST(ImplicitIm2col, AKernelGradientReadsTheWindowsInPlace) {
  // The products the transpose of a convolution makes with its cotangent ct, on either side.
  std::string text = conv_program(false);
  text.replace(text.find("w:f32[27,4]."), 12, "w:f32[27,4] ct:f32[2,6,7,4].");
  text.replace(text.find("  in (y, m) }"), 13,
               "  t:f32[27,4] = dot_general[dimension_numbers=(([0, 1, 2], [0, 1, 2]), ([], []))] "
               "m ct\n"
               "  u:f32[4,27] = dot_general[dimension_numbers=(([0, 1, 2], [0, 1, 2]), ([], []))] "
               "ct m\n"
               "  in (y, t, u) }");
  const Jaxpr j = parse_jaxpr(text);
  int changes = 0;
  const Jaxpr r = implicit_im2col(j, &changes);
  EXPECT_EQ(changes, 3);
  EXPECT_EQ(count_prim(r, Prim::im2col_tdot), 2u);
  EXPECT_EQ(count_prim(r, Prim::dot_general), 0u);
  const std::vector<RtValue> args = random_args(j, 13);
  const std::vector<RtValue> want = interpret(j, deep_copy(args));
  const std::vector<RtValue> got = interpret(r, deep_copy(args));
  for (size_t i = 0; i < want.size(); ++i)
    expect_close(as_array(got[i]), as_array(want[i]), 0.0, "output " + std::to_string(i));
  expect_matches_interpreter(r, args, 1e-4);
}

TEST(ImplicitIm2col, OtherProductsOfConcatenationsStay) {
  // Windows of one array are rewritten (a 1-D convolution without a batch dim), windows of
  // two arrays are not.
  const std::string windows = R"({ lambda ; x:f32[8,3] z:f32[8,3] k:f32[6,5]. let
    a:f32[6,3] = slice[limit_indices=(6, 3) start_indices=(0, 0) strides=(1, 1)] x
    b:f32[6,3] = slice[limit_indices=(7, 3) start_indices=(1, 0) strides=(1, 1)] SECOND
    m:f32[6,6] = concatenate[dimension=1] a b
    y:f32[6,5] = dot_general[dimension_numbers=(([1], [0]), ([], []))] m k
  in (y,) })";
  int changes = -1;
  std::string one = windows;
  one.replace(one.find("SECOND"), 6, "x");
  implicit_im2col(parse_jaxpr(one), &changes);
  EXPECT_EQ(changes, 1);
  std::string two = windows;
  two.replace(two.find("SECOND"), 6, "z");
  implicit_im2col(parse_jaxpr(two), &changes);
  EXPECT_EQ(changes, 0);
  // A concatenation along another dim; windows that take part of the last dim.
  const char* others[] = {
      R"({ lambda ; x:f32[8,6] k:f32[6,5]. let
    a:f32[4,6] = slice[limit_indices=(4, 6) start_indices=(0, 0) strides=(1, 1)] x
    b:f32[4,6] = slice[limit_indices=(8, 6) start_indices=(4, 0) strides=(1, 1)] x
    m:f32[8,6] = concatenate[dimension=0] a b
    y:f32[8,5] = dot_general[dimension_numbers=(([1], [0]), ([], []))] m k
  in (y,) })",
      R"({ lambda ; x:f32[8,6] k:f32[6,5]. let
    a:f32[8,3] = slice[limit_indices=(8, 3) start_indices=(0, 0) strides=(1, 1)] x
    b:f32[8,3] = slice[limit_indices=(8, 6) start_indices=(0, 3) strides=(1, 1)] x
    m:f32[8,6] = concatenate[dimension=1] a b
    y:f32[8,5] = dot_general[dimension_numbers=(([1], [0]), ([], []))] m k
  in (y,) })"};
  for (const char* text : others) {
    implicit_im2col(parse_jaxpr(text), &changes);
    EXPECT_EQ(changes, 0) << text;
  }
}

}  // namespace
}  // namespace refjit::testing
