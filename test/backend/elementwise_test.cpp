// Differential tests (native vs interpreter) of the elementwise primitives.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "test_util.h"

namespace refjit {
namespace {

using testing::at;
using testing::check_text;
using testing::random_array;

const Shape kShapes[] = {{}, {0}, {2, 3}, {3, 1, 17}};

std::string unary_text(std::string_view prim, const ArrayType& in, const ArrayType& out,
                       std::string params = "") {
  return fmt::format("{{ lambda ; a:{}. let b:{} = {}{} a in (b,) }}", in.str(), out.str(), prim,
                     params.empty() ? "" : "[" + params + "]");
}

std::string binary_text(std::string_view prim, const ArrayType& x, const ArrayType& y,
                        const ArrayType& out) {
  return fmt::format("{{ lambda ; a:{} b:{}. let c:{} = {} a b in (c,) }}", x.str(), y.str(),
                     out.str(), prim);
}

TEST(NativeElementwise, AddsTwoF32Vectors) {
  JaxprBuilder b;
  Var x = b.add_invar(at(DType::f32, {4}));
  Var y = b.add_invar(at(DType::f32, {4}));
  Var z = b.new_var(at(DType::f32, {4}));
  b.add_eqn_with_outs(Prim::add, {x, y}, {}, {z});
  b.set_outvars({z});
  CompiledFunction f = compile_native(b.finish());
  auto out = f({Array::from_vector<float>({1, 2, 3, 4}, {4}),
                Array::from_vector<float>({10, 20, 30, 40}, {4})});
  ASSERT_EQ(out.size(), 1u);
  auto v = testing::as_array(out[0]).values<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.end()), (std::vector<float>{11, 22, 33, 44}));
}

// One jaxpr applying every listed primitive to the same operand(s), one output each, so a
// sweep costs one compilation per dtype and shape.
std::string many_text(const std::vector<std::string>& prims, const std::vector<ArrayType>& ins,
                      const ArrayType& out) {
  std::string binders, args, body, outs;
  for (size_t i = 0; i < ins.size(); ++i) {
    binders += fmt::format(" x{}:{}", i, ins[i].str());
    args += fmt::format(" x{}", i);
  }
  for (size_t k = 0; k < prims.size(); ++k) {
    body += fmt::format("    o{}:{} = {}{}\n", k, out.str(), prims[k], args);
    outs += fmt::format("o{}, ", k);
  }
  return fmt::format("{{ lambda ;{}. let\n{}  in ({}) }}", binders, body, outs);
}

TEST(NativeElementwise, FloatUnaryMathMatchesInterpreter) {
  // Positive operands for log/sqrt/rsqrt/log1p; the rest also see negative ones.
  std::vector<std::string> positive{"log", "log1p", "sqrt", "rsqrt"};
  std::vector<std::string> any{"neg",   "exp",      "expm1", "sin",        "cos",       "tan",
                               "tanh",  "logistic", "abs",   "sign",       "floor",     "ceil",
                               "round", "atan",     "sinh",  "cosh",       "asinh",     "erf",
                               "erfc",  "cbrt",     "exp2",  "bessel_i0e", "bessel_i1e"};
  // The 16-bit floats compute in f32 and round once: native and interpreter may then differ by
  // one unit in the last place where f32 results straddle a rounding boundary.
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16})
    for (const Shape& s : kShapes) {
      ArrayType t = at(d, s);
      double rtol = d == DType::f32    ? 2e-6
                    : d == DType::f16  ? 1e-3
                    : d == DType::bf16 ? 8e-3
                                       : 1e-12;
      Array x = random_array(t, 7);
      check_text(many_text(any, {t}, t), {x}, rtol);
      for (int64_t i = 0; i < x.size(); ++i) x.set_from_double(i, std::abs(x.as_double(i)) + 0.01);
      check_text(many_text(positive, {t}, t), {x}, rtol);
      // asin/acos/atanh on (-1, 1); acosh on [1, inf); is_finite on inf, nan and numbers.
      Array u = random_array(t, 8);
      for (int64_t i = 0; i < u.size(); ++i) u.set_from_double(i, u.as_double(i) / 3.5);
      check_text(many_text({"asin", "acos", "atanh"}, {t}, t), {u}, rtol);
      for (int64_t i = 0; i < u.size(); ++i) u.set_from_double(i, std::abs(u.as_double(i)) + 1.0);
      check_text(many_text({"acosh"}, {t}, t), {u}, rtol);
      for (int64_t i = 0; i < u.size(); i += 3) u.set_from_double(i, i % 2 ? NAN : INFINITY);
      check_text(unary_text("is_finite", t, at(DType::bool_, s)), {u});
    }
}

TEST(NativeElementwise, RoundHalfToEvenAndAwayFromZero) {
  Array x = Array::from_vector<float>({-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.7f}, {7});
  for (int method : {0, 1})
    check_text(unary_text("round", x.type(), x.type(), fmt::format("rounding_method={}", method)),
               {x});
}

TEST(NativeElementwise, IntAndBoolUnaryMatchInterpreter) {
  for (DType d : kAllDTypes)
    if (is_int(d))
      for (const Shape& s : kShapes)
        check_text(many_text({"neg", "abs", "sign", "not"}, {at(d, s)}, at(d, s)),
                   {random_array(at(d, s), 3)});
  check_text(unary_text("not", at(DType::bool_, {6}), at(DType::bool_, {6})),
             {random_array(at(DType::bool_, {6}), 1)});
  // INT_MIN wraps under neg and abs.
  Array m = Array::from_vector<int32_t>({std::numeric_limits<int32_t>::min(), -1, 0}, {3});
  check_text(many_text({"neg", "abs"}, {m.type()}, m.type()), {m});
}

TEST(NativeElementwise, IntegerPowBySquaring) {
  for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64})
    for (int y : {0, 1, 2, 3, 5, 8, -2}) {
      if (y < 0 && !is_float(d)) continue;
      ArrayType t = at(d, {2, 3});
      check_text(unary_text("integer_pow", t, t, fmt::format("y={}", y)), {random_array(t, 5)},
                 1e-6);
    }
}

TEST(NativeElementwise, ConvertElementTypeFollowsXla) {
  Array specials =
      Array::from_vector<double>({std::nan(""), std::numeric_limits<double>::infinity(),
                                  -std::numeric_limits<double>::infinity(), 1e10, -1e10, -2.7, 2.7,
                                  0.0, -0.0, 3e9, -3e9, 2147483647.0, -2147483648.0, 1e19, -1e19},
                                 {15});
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      Array x = random_array(at(from, {7}), 11);
      std::string params = fmt::format("new_dtype={} weak_type=False", long_name(to));
      check_text(unary_text("convert_element_type", x.type(), at(to, {7}), params), {x});
      if (is_float(from)) {
        Array s(at(from, {15}));
        for (int64_t i = 0; i < 15; ++i) s.set_from_double(i, specials.as_double(i));
        check_text(unary_text("convert_element_type", s.type(), at(to, {15}), params), {s});
      }
    }
}

TEST(NativeElementwise, BinaryOpsMatchInterpreterForAllDTypes) {
  std::vector<std::string> numeric{"add", "add_any", "sub", "mul", "div", "rem", "max", "min"};
  std::vector<std::string> compares{"eq", "ne", "lt", "le", "gt", "ge"};
  // Complex numbers: test/backend/complex_test.cpp.
  for (DType d : kAllDTypes)
    for (const Shape& s : kShapes) {
      if (is_complex(d)) continue;
      ArrayType t = at(d, s);
      Array x = random_array(t, 1), y = random_array(t, 2);
      if (d != DType::bool_) check_text(many_text(numeric, {t, t}, t), {x, y});
      check_text(many_text(compares, {t, t}, at(DType::bool_, s)), {x, y});
      if (!is_float(d)) check_text(many_text({"and", "or"}, {t, t}, t), {x, y});
      if (is_float(d)) {
        Array px = random_array(t, 4);
        for (int64_t i = 0; i < px.size(); ++i)
          px.set_from_double(i, std::abs(px.as_double(i)) + 0.1);
        check_text(many_text({"pow"}, {t, t}, t), {px, y}, 1e-6);
        check_text(many_text({"atan2"}, {t, t}, t), {x, y}, 1e-6);
      }
    }
}

TEST(NativeElementwise, ScalarOperandBroadcasts) {
  ArrayType v = at(DType::f32, {4}), s = at(DType::f32, {});
  check_text(binary_text("sub", v, s, v), {random_array(v, 1), random_array(s, 2)});
  check_text(binary_text("sub", s, v, v), {random_array(s, 3), random_array(v, 4)});
  check_text("{ lambda ; a:f32[3]. let b:f32[3] = mul a 2.5:f32[] in (b,) }",
             {random_array(at(DType::f32, {3}), 5)});
}

TEST(NativeElementwise, IntDivisionByZeroAndOverflowFollowXla) {
  for (DType d : {DType::i32, DType::i64}) {
    int64_t mn =
        d == DType::i32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
    Array x(at(d, {6})), y(at(d, {6}));
    int64_t xs[] = {7, -7, 0, mn, mn, 9}, ys[] = {0, 0, 0, -1, 2, -2};
    for (int i = 0; i < 6; ++i) {
      x.set_from_double(i, static_cast<double>(xs[i]));
      y.set_from_double(i, static_cast<double>(ys[i]));
    }
    ArrayType t = x.type();
    auto out = compile_native(parse_jaxpr(binary_text("div", t, t, t)))({x, y});
    const Array& q = testing::as_array(out[0]);
    EXPECT_EQ(q.as_int(0), -1);
    EXPECT_EQ(q.as_int(1), -1);
    EXPECT_EQ(q.as_int(2), -1);
    EXPECT_EQ(q.as_int(3), mn);
    EXPECT_EQ(q.as_int(4), mn / 2);
    EXPECT_EQ(q.as_int(5), -4);
    check_text(binary_text("div", t, t, t), {x, y});
  }
}

TEST(NativeElementwise, NarrowAndUnsignedIntsWrapAndFollowXla) {
  // u8: 200 + 100 wraps to 44; 3 - 5 wraps to 254; x / 0 is all ones (255); x rem 0 is x;
  // unsigned comparisons and max see 254 as large.
  Array a = Array::from_vector<uint8_t>({200, 3, 7, 254, 0, 9}, {6});
  Array b = Array::from_vector<uint8_t>({100, 5, 0, 1, 0, 4}, {6});
  ArrayType t = a.type();
  auto run = [&](const char* prim) {
    auto out = compile_native(parse_jaxpr(binary_text(prim, t, t, t)))({a, b});
    return testing::as_array(out[0]);
  };
  EXPECT_EQ(run("add").as_int(0), 44);
  EXPECT_EQ(run("sub").as_int(1), 254);
  EXPECT_EQ(run("div").as_int(2), 255);
  EXPECT_EQ(run("rem").as_int(2), 7);
  EXPECT_EQ(run("max").as_int(3), 254);
  EXPECT_EQ(run("div").as_int(5), 2);
  for (const char* p : {"add", "sub", "mul", "div", "rem", "max", "min"})
    check_text(binary_text(p, t, t, t), {a, b});
  check_text(binary_text("lt", t, t, at(DType::bool_, {6})), {a, b});
  // i8: -128 / -1 stays -128, -128 rem -1 is 0; u64 values past INT64_MAX stay unsigned.
  Array m = Array::from_vector<int8_t>({-128, -128, 100, -7}, {4});
  Array n = Array::from_vector<int8_t>({-1, -1, 100, 2}, {4});
  ArrayType i8 = m.type();
  for (const char* p : {"div", "rem", "mul", "add"}) check_text(binary_text(p, i8, i8, i8), {m, n});
  Array big = Array::from_vector<uint64_t>({~uint64_t{0}, uint64_t{1} << 63, 5}, {3});
  ArrayType u64 = big.type();
  check_text(binary_text("gt", u64, u64, at(DType::bool_, {3})), {big, big.reshaped({3})});
  check_text(unary_text("convert_element_type", u64, at(DType::f64, {3}),
                        "new_dtype=float64 weak_type=False"),
             {big});
}

TEST(NativeElementwise, BitwiseAndShiftsFollowXla) {
  for (DType d : kAllDTypes) {
    if (!is_int(d)) continue;
    ArrayType t = at(d, {8});
    Array x = random_array(t, 21);
    Array y(t);  // shift amounts: in range, the bit width, past it, and -1 (huge as unsigned)
    int64_t amounts[] = {0, 1, 3, bit_width(d) - 1, bit_width(d), bit_width(d) + 5, 2, -1};
    for (int i = 0; i < 8; ++i)
      y.set_from_double(i,
                        is_unsigned(d) && amounts[i] < 0 ? 255.0 : static_cast<double>(amounts[i]));
    check_text(many_text({"xor", "shift_left", "shift_right_logical", "shift_right_arithmetic"},
                         {t, t}, t),
               {x, y});
    check_text(unary_text("population_count", t, t), {x});
  }
  // Exact values on i8: -128 >> 9 arithmetic is -1, logical is 0; 1 << 8 is 0.
  Array a = Array::from_vector<int8_t>({-128, -128, 1, 6}, {4});
  Array b = Array::from_vector<int8_t>({9, 9, 8, 1}, {4});
  auto run = [&](const char* prim) {
    ArrayType t = a.type();
    return testing::as_array(compile_native(parse_jaxpr(binary_text(prim, t, t, t)))({a, b})[0]);
  };
  EXPECT_EQ(run("shift_right_arithmetic").as_int(0), -1);
  EXPECT_EQ(run("shift_right_logical").as_int(1), 0);
  EXPECT_EQ(run("shift_left").as_int(2), 0);
  EXPECT_EQ(run("xor").as_int(3), 7);
}

TEST(NativeElementwise, LgammaDigammaNextafterMatchTheInterpreter) {
  for (DType d : {DType::f32, DType::f64}) {
    Array x(at(d, {8}));
    double xs[] = {0.5, 1.0, 2.5, 7.3, 30.0, -0.5, -2.7, -3.0};  // -3 is a pole of digamma
    for (int i = 0; i < 8; ++i) x.set_from_double(i, xs[i]);
    check_text(many_text({"lgamma", "digamma"}, {x.type()}, x.type()), {x},
               d == DType::f32 ? 2e-6 : 1e-12);
    Array y = testing::as_array(
        interpret(parse_jaxpr(unary_text("digamma", x.type(), x.type())), {x})[0]);
    EXPECT_NEAR(y.as_double(1), -0.57721566490153286, 1e-6);  // -Euler's gamma
    EXPECT_TRUE(std::isnan(y.as_double(7)));
    check_text(binary_text("nextafter", x.type(), x.type(), x.type()),
               {x, random_array(x.type(), 3)});
  }
}

TEST(NativeElementwise, PolygammaMatchesJaxAndTheInterpreter) {
  // JAX 0.10's jax.scipy.special.polygamma at these points (f32), negative x included.
  const double xs[] = {-1.5, -0.5, 0.0, 0.3, 1.0, 2.5, 10.0, 100.0};
  const double jax1[] = {9.3792467, 8.9348021,  INFINITY,   12.245364,
                         1.6449341, 0.49035776, 0.10516632, 0.010050166};
  const double jax2[] = {-0.23620448, -0.82879686, NAN,          -75.272537,
                         -2.4041145,  -0.23620412, -0.011049839, -1.0100502e-4};
  const double jax3[] = {194.59445, 193.40926,  INFINITY,     743.14227,
                         6.4939461, 0.22390607, 0.0023199033, 2.0302018e-06};
  for (DType d : {DType::f32, DType::f64}) {
    Array x(at(d, {8}));
    for (int i = 0; i < 8; ++i) x.set_from_double(i, xs[i]);
    for (int order = 0; order <= 3; ++order) {
      Array m(at(d, {8}));
      for (int i = 0; i < 8; ++i) m.set_from_double(i, order);
      const std::string text = binary_text("polygamma", m.type(), x.type(), x.type());
      check_text(text, {m, x}, d == DType::f32 ? 2e-6 : 1e-12);
      Array y = testing::as_array(interpret(parse_jaxpr(text), {m, x})[0]);
      const double* want = order == 1 ? jax1 : order == 2 ? jax2 : order == 3 ? jax3 : nullptr;
      for (int i = 0; i < 8; ++i) {
        const double got = y.as_double(i);
        if (!want) {  // polygamma(0, x) is digamma
          Array dg = testing::as_array(
              interpret(parse_jaxpr(unary_text("digamma", x.type(), x.type())), {x})[0]);
          if (std::isnan(dg.as_double(i)))
            EXPECT_TRUE(std::isnan(got));
          else
            EXPECT_DOUBLE_EQ(got, dg.as_double(i));
        } else if (std::isnan(want[i])) {
          EXPECT_TRUE(std::isnan(got)) << "order " << order << " x " << xs[i];
        } else if (std::isinf(want[i])) {
          EXPECT_EQ(got, want[i]) << "order " << order << " x " << xs[i];
        } else {
          EXPECT_NEAR(got, want[i], 2e-6 * std::abs(want[i]))
              << "order " << order << " x " << xs[i];
        }
      }
    }
    // A non-integer order is NaN.
    Array half(at(d, {8}));
    for (int i = 0; i < 8; ++i) half.set_from_double(i, 1.5);
    Array y = testing::as_array(interpret(
        parse_jaxpr(binary_text("polygamma", half.type(), x.type(), x.type())), {half, x})[0]);
    EXPECT_TRUE(std::isnan(y.as_double(3)));
  }
}

TEST(NativeSort, LongLanesAreMergeSortedLikeTheInterpreter) {
  // Lanes of 5 (insertion sort) and of 33, 64 and 1000 (merge sort, runs of unequal length),
  // along either dimension, with two keys full of ties, NaNs and -0.0: the permutation
  // operand shows stability and that every operand moves with its keys.
  for (int64_t n : {5, 33, 64, 1000}) {
    for (int dim : {0, 1}) {
      SCOPED_TRACE(fmt::format("lane {} along dim {}", n, dim));
      const Shape shape = dim == 1 ? Shape{3, n} : Shape{n, 3};
      ArrayType ft = at(DType::f32, shape), it = at(DType::i32, shape);
      Array key(ft), key2(it);
      for (int64_t i = 0; i < key.size(); ++i) {
        const int64_t r = (i * 7919) % 97;
        key.set_from_double(i, r % 11 == 0   ? NAN
                               : r % 13 == 0 ? -0.0
                                             : static_cast<double>(r % 17));
        key2.set_from_double(i, static_cast<double>((i * 31) % 5));
      }
      const std::string text = fmt::format(
          "{{ lambda ; a:{0} b:{1}. let\n"
          "    c:{1} = iota[dimension={2} dtype=int32 shape=({3}, {4})]\n"
          "    d:{0} e:{1} f:{1} = sort[dimension={2} is_stable=True num_keys=2] a b c\n"
          "  in (d, e, f) }}",
          ft.str(), it.str(), dim, shape[0], shape[1]);
      check_text(text, {key, key2});
    }
  }
}

TEST(NativeElementwise, ErfInvInvertsErfAndBitcastKeepsTheBits) {
  for (DType d : {DType::f32, DType::f64}) {
    Array x(at(d, {9}));
    double xs[] = {-1.0, -0.999999, -0.7, -0.1, 0.0, 0.3, 0.5, 0.9999, 1.0};
    for (int i = 0; i < 9; ++i) x.set_from_double(i, xs[i]);
    check_text(unary_text("erf_inv", x.type(), x.type()), {x}, d == DType::f32 ? 1e-6 : 1e-13);
    Array y = testing::as_array(
        interpret(parse_jaxpr(unary_text("erf_inv", x.type(), x.type())), {x})[0]);
    EXPECT_EQ(y.as_double(0), -INFINITY);
    EXPECT_EQ(y.as_double(8), INFINITY);
    for (int i = 1; i < 8; ++i) EXPECT_NEAR(std::erf(y.as_double(i)), xs[i], 1e-6) << xs[i];
  }
  Array f = Array::from_vector<float>({1.0f, -2.0f, 0.0f}, {3});
  ArrayType u = at(DType::u32, {3});
  std::string text = unary_text("bitcast_convert_type", f.type(), u, "new_dtype=uint32");
  check_text(text, {f});
  Array bits = testing::as_array(compile_native(parse_jaxpr(text))({f})[0]);
  EXPECT_EQ(bits.as_int(0), 1065353216);
}

TEST(NativeElementwise, FloatMaxMinPropagateNaN) {
  Array x = Array::from_vector<float>({std::nanf(""), 1, 2}, {3});
  Array y = Array::from_vector<float>({0, std::nanf(""), 3}, {3});
  for (const char* p : {"max", "min"})
    check_text(binary_text(p, x.type(), x.type(), x.type()), {x, y});
}

TEST(NativeElementwise, SelectNWithBoolAndClampedIntPredicates) {
  ArrayType t = at(DType::f32, {6});
  check_text("{ lambda ; p:bool[6] a:f32[6] b:f32[6]. let c:f32[6] = select_n p a b in (c,) }",
             {random_array(at(DType::bool_, {6}), 1), random_array(t, 2), random_array(t, 3)});
  Array p = Array::from_vector<int32_t>({-3, 0, 1, 2, 3, 99}, {6});
  check_text(
      "{ lambda ; p:i32[6] a:f32[6] b:f32[6] c:f32[6]. let d:f32[6] = select_n p a b c in (d,) }",
      {p, random_array(t, 2), random_array(t, 3), random_array(t, 4)});
  check_text("{ lambda ; p:bool[] a:i64[6] b:i64[6]. let c:i64[6] = select_n p a b in (c,) }",
             {Array::scalar<bool>(true), random_array(at(DType::i64, {6}), 2),
              random_array(at(DType::i64, {6}), 3)});
}

TEST(NativeElementwise, ThousandChainedEqnsCompile) {
  std::string body;
  std::string prev = "a";
  for (int i = 0; i < 1000; ++i) {
    std::string next = fmt::format("v{}", i);
    const char* prim = i % 3 == 0 ? "sin" : (i % 3 == 1 ? "mul" : "add");
    if (i % 3 == 0)
      body += fmt::format("    {}:f32[8] = {} {}\n", next, prim, prev);
    else
      body += fmt::format("    {}:f32[8] = {} {} a\n", next, prim, prev);
    prev = next;
  }
  std::string text = "{ lambda ; a:f32[8]. let\n" + body + "  in (" + prev + ",) }";
  CompileOptions fast;
  fast.opt_level = 0;
  // 333 rounds of sin(x) * a + a amplify any difference from the interpreter's libm sinf
  // chaotically, so this size test compares with libm's sin (exact_math).
  fast.exact_math = true;
  testing::expect_matches_interpreter(parse_jaxpr(text), {random_array(at(DType::f32, {8}), 9)},
                                      1e-4, fast);
}

}  // namespace
}  // namespace refjit
