// Windowed reductions (reduce_window_sum/max/min, select_and_gather_add,
// select_and_scatter_add) in native code against the interpreter, and the interpreter
// against hand-computed values: strides, padding (negative too), dilations, ties.
#include "refjit/ir/window.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "runtime/interpreter.h"
#include "test_util.h"

namespace refjit {
namespace {

using testing::as_array;
using testing::at;
using testing::check_text;
using testing::random_array;

struct WindowCase {
  Shape in;
  Window w;
};

Window window(IntList dims, IntList strides, std::vector<std::pair<int64_t, int64_t>> padding,
              IntList base_dilation, IntList window_dilation) {
  return Window{std::move(dims), std::move(strides), std::move(base_dilation),
                std::move(window_dilation), std::move(padding)};
}

const WindowCase kCases[] = {
    {{4, 6}, window({2, 2}, {2, 2}, {{0, 0}, {0, 0}}, {1, 1}, {1, 1})},
    {{5, 7}, window({3, 3}, {1, 2}, {{1, 1}, {0, 2}}, {1, 1}, {1, 1})},
    {{5, 7}, window({2, 3}, {1, 1}, {{0, -1}, {1, 0}}, {2, 1}, {1, 2})},
    {{2, 3, 6, 4},
     window({1, 1, 3, 2}, {1, 1, 2, 2}, {{0, 0}, {0, 0}, {1, 0}, {0, 1}}, {1, 1, 1, 1},
            {1, 1, 1, 1})},
    // A 2x2 max pool over NHWC: every position inside the operand, read without checks.
    {{2, 6, 6, 16},
     window({1, 2, 2, 1}, {1, 2, 2, 1}, {{0, 0}, {0, 0}, {0, 0}, {0, 0}}, {1, 1, 1, 1},
            {1, 1, 1, 1})},
    // 18 positions: more than the lowering writes out as straight-line code, so a loop.
    {{6, 9}, window({3, 6}, {2, 1}, {{1, 1}, {2, 0}}, {1, 1}, {1, 1})},
};

// The window's params as JAX prints them (for windows of rank 2 or more).
std::string params_text(const Window& w, bool dilations = true) {
  std::vector<std::string> pad;
  for (auto [lo, hi] : w.padding) pad.push_back(fmt::format("({}, {})", lo, hi));
  std::string s =
      fmt::format("padding=({}) window_dimensions=({}) window_strides=({})", fmt::join(pad, ", "),
                  fmt::join(w.dims, ", "), fmt::join(w.strides, ", "));
  if (dilations)
    s += fmt::format(" base_dilation=({}) window_dilation=({})", fmt::join(w.base_dilation, ", "),
                     fmt::join(w.window_dilation, ", "));
  return s;
}

TEST(NativeWindows, ReductionsMatchTheInterpreter) {
  for (const WindowCase& c : kCases)
    for (DType d : {DType::f32, DType::f64, DType::i32, DType::u8, DType::bf16}) {
      const ArrayType t = at(d, c.in);
      const ArrayType r = at(d, c.w.out_shape(c.in, "test"));
      const std::string p = params_text(c.w);
      check_text(fmt::format("{{ lambda ; a:{0}. let\n"
                             "    b:{1} = reduce_window_sum[{2}] a\n"
                             "    m:{1} = reduce_window_max[{2}] a\n"
                             "    n:{1} = reduce_window_min[{2}] a\n"
                             "  in (b, m, n) }}",
                             t.str(), r.str(), p),
                 {random_array(t, 3)}, d == DType::bf16 ? 1e-2 : 1e-6);
    }
}

TEST(NativeWindows, SelectionsMatchTheInterpreterWithTies) {
  for (const WindowCase& c : kCases)
    for (const char* select : {"ge", "le"}) {
      const ArrayType t = at(DType::f32, c.in);
      const ArrayType r = at(DType::f32, c.w.out_shape(c.in, "test"));
      Array x = random_array(at(DType::i32, c.in), 5);  // small integers: many ties
      Array xf(t);
      for (int64_t i = 0; i < x.size(); ++i) xf.set_from_double(i, x.as_double(i));
      check_text(fmt::format("{{ lambda ; t:{0} x:{0}. let\n"
                             "    g:{1} = select_and_gather_add[select_prim={2} {3}] t x\n"
                             "  in (g,) }}",
                             t.str(), r.str(), select, params_text(c.w)),
                 {random_array(t, 6), xf});
      bool dilated = false;
      for (int64_t b : c.w.base_dilation) dilated |= b != 1;
      for (int64_t b : c.w.window_dilation) dilated |= b != 1;
      if (dilated) continue;  // select_and_scatter_add has no dilations
      check_text(fmt::format("{{ lambda ; s:{1} x:{0}. let\n"
                             "    y:{0} = select_and_scatter_add[select_prim={2} {3}] s x\n"
                             "  in (y,) }}",
                             t.str(), r.str(), select, params_text(c.w, false)),
                 {random_array(r, 7), xf});
    }
}

// Values checked by hand: a 2x2 max pool with stride 2 over
//   [[1, 5, 2, 2],
//    [3, 5, 0, 1]]
// picks 5 (first of the tie, at (0,1)) and the first 2 (at (0,2)).
TEST(NativeWindows, MaxPoolAndItsGradientPickTheFirstMaximum) {
  const std::string text =
      "{ lambda ; x:f32[2,4] s:f32[1,2] t:f32[2,4]. let\n"
      "    m:f32[1,2] = reduce_window_max[base_dilation=(1, 1) padding=((0, 0), (0, 0)) "
      "window_dilation=(1, 1) window_dimensions=(2, 2) window_strides=(2, 2)] x\n"
      "    g:f32[2,4] = select_and_scatter_add[padding=((0, 0), (0, 0)) select_prim=ge "
      "window_dimensions=(2, 2) window_strides=(2, 2)] s x\n"
      "    u:f32[1,2] = select_and_gather_add[base_dilation=(1, 1) padding=((0, 0), (0, 0)) "
      "select_prim=ge window_dilation=(1, 1) window_dimensions=(2, 2) window_strides=(2, 2)] t x\n"
      "  in (m, g, u) }";
  Array x = Array::from_vector<float>({1, 5, 2, 2, 3, 5, 0, 1}, {2, 4});
  Array s = Array::from_vector<float>({10, 20}, {1, 2});
  Array t = Array::from_vector<float>({0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f}, {2, 4});
  std::vector<RtValue> args{x, s, t};
  std::vector<RtValue> out = interpret(parse_jaxpr(text), args);
  EXPECT_EQ(as_array(out[0]), Array::from_vector<float>({5, 2}, {1, 2}));
  EXPECT_EQ(as_array(out[1]), Array::from_vector<float>({0, 10, 20, 0, 0, 0, 0, 0}, {2, 4}));
  EXPECT_EQ(as_array(out[2]), Array::from_vector<float>({0.2f, 0.3f}, {1, 2}));
  check_text(text, args);
}

TEST(NativeWindows, SumOverPaddingAndHolesAddsNothing) {
  // Base dilation 2 puts a hole between the elements of [1, 2, 3]: [1, _, 2, _, 3]; padding
  // (1, 1) adds one position each side; windows of 2: [_,1] [1,_] [_,2] [2,_] [_,3] [3,_].
  const std::string text =
      "{ lambda ; x:f32[3]. let\n"
      "    y:f32[6] = reduce_window_sum[base_dilation=(2,) padding=((1, 1),) "
      "window_dilation=(1,) window_dimensions=(2,) window_strides=(1,)] x\n"
      "    z:f32[6] = reduce_window_max[base_dilation=(2,) padding=((1, 1),) "
      "window_dilation=(1,) window_dimensions=(2,) window_strides=(1,)] x\n"
      "  in (y, z) }";
  std::vector<RtValue> args{Array::from_vector<float>({1, 2, 3}, {3})};
  std::vector<RtValue> out = interpret(parse_jaxpr(text), args);
  EXPECT_EQ(as_array(out[0]), Array::from_vector<float>({1, 1, 2, 2, 3, 3}, {6}));
  EXPECT_EQ(as_array(out[1]), Array::from_vector<float>({1, 1, 2, 2, 3, 3}, {6}));
  check_text(text, args);
}

TEST(NativeWindows, BadWindowsAreTypeErrors) {
  EXPECT_THROW(parse_jaxpr("{ lambda ; x:f32[3]. let y:f32[2] = reduce_window_sum["
                           "base_dilation=(1,) padding=((0, 0),) window_dilation=(1,) "
                           "window_dimensions=(2, 2) window_strides=(1,)] x in (y,) }"),
               TypeError);
  EXPECT_THROW(parse_jaxpr("{ lambda ; x:f32[3]. let y:f32[2] = reduce_window_sum["
                           "base_dilation=(1,) padding=((0, 0),) window_dilation=(1,) "
                           "window_dimensions=(2,) window_strides=(0,)] x in (y,) }"),
               TypeError);
  EXPECT_THROW(parse_jaxpr("{ lambda ; s:f32[2] x:f32[3]. let y:f32[3] = select_and_scatter_add["
                           "padding=((0, 0),) select_prim=gt window_dimensions=(2,) "
                           "window_strides=(1,)] s x in (y,) }"),
               TypeError);
}

}  // namespace
}  // namespace refjit
