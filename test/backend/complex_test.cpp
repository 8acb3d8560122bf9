// Complex numbers (c64, c128) in native code against the interpreter: every primitive that
// takes them, conversions both ways, sums, products, scatter-adds and ref updates.
#include <fmt/format.h>

#include <complex>

#include "test_util.h"

namespace refjit {
namespace {

using testing::at;
using testing::check_text;
using testing::random_array;

// One jaxpr applying each primitive to x0 (and x1), one output each.
std::string many(const std::vector<std::string>& prims, const std::vector<ArrayType>& ins,
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

TEST(NativeComplex, UnaryMathMatchesTheInterpreter) {
  const std::vector<std::string> prims{"neg",
                                       "exp",
                                       "log",
                                       "log1p",
                                       "expm1",
                                       "sin",
                                       "cos",
                                       "tan",
                                       "tanh",
                                       "sqrt",
                                       "rsqrt",
                                       "sign",
                                       "logistic",
                                       "asin",
                                       "acos",
                                       "atan",
                                       "sinh",
                                       "cosh",
                                       "asinh",
                                       "acosh",
                                       "atanh",
                                       "exp2",
                                       "copy",
                                       "stop_gradient",
                                       "integer_pow[y=3]",
                                       "integer_pow[y=-2]"};
  for (DType d : {DType::c64, DType::c128})
    for (const Shape& s : {Shape{}, Shape{5}, Shape{2, 7}}) {
      const ArrayType t = at(d, s);
      check_text(many(prims, {t}, t), {random_array(t, 3)}, d == DType::c64 ? 2e-5 : 1e-12);
    }
}

TEST(NativeComplex, PartsMagnitudeAndConjugate) {
  for (DType d : {DType::c64, DType::c128}) {
    const ArrayType t = at(d, {6});
    const ArrayType r = at(real_dtype(d), {6});
    check_text(many({"real", "imag", "abs"}, {t}, r), {random_array(t, 5)});
    check_text(fmt::format("{{ lambda ; a:{0} b:{1}. let\n"
                           "    c:{0} = conj[input_dtype={2}] a\n"
                           "    d:{0} = conj[input_dtype={3}] b\n"
                           "    e:{0} = complex b b\n"
                           "  in (c, d, e) }}",
                           t.str(), r.str(), long_name(d), long_name(real_dtype(d))),
               {random_array(t, 6), random_array(r, 7)});
  }
}

TEST(NativeComplex, BinaryArithmeticAndEquality) {
  for (DType d : {DType::c64, DType::c128}) {
    const ArrayType t = at(d, {9});
    Array x = random_array(t, 8), y = random_array(t, 9);
    y.set_from_complex(0, x.as_complex(0));  // one equal pair
    check_text(many({"add", "sub", "mul", "div", "pow", "add_any"}, {t, t}, t), {x, y},
               d == DType::c64 ? 2e-5 : 1e-12);
    check_text(many({"eq", "ne"}, {t, t}, at(DType::bool_, {9})), {x, y});
  }
}

TEST(NativeComplex, LiteralsConversionsAndSelect) {
  check_text(
      "{ lambda ; a:c64[4] b:f32[4] c:bool[4]. let\n"
      "    d:c64[4] = mul a (1.5-2j):c64[]\n"
      "    e:c64[4] = add d 0j:c64[]\n"
      "    f:c128[4] = convert_element_type[new_dtype=complex128 weak_type=False] e\n"
      "    g:c64[4] = convert_element_type[new_dtype=complex64 weak_type=False] b\n"
      "    h:f32[4] = convert_element_type[new_dtype=float32 weak_type=False] a\n"
      "    i:i32[4] = convert_element_type[new_dtype=int32 weak_type=False] d\n"
      "    j:bool[4] = convert_element_type[new_dtype=bool weak_type=False] a\n"
      "    k:c64[4] = select_n c a g\n"
      "  in (f, g, h, i, j, k) }",
      {random_array(at(DType::c64, {4}), 1), random_array(at(DType::f32, {4}), 2),
       random_array(at(DType::bool_, {4}), 3)});
}

TEST(NativeComplex, SumsProductsScatterAddsAndRefUpdates) {
  for (DType d : {DType::c64, DType::c128}) {
    const double tol = d == DType::c64 ? 1e-5 : 1e-12;
    const std::string c = short_name(d).data();
    check_text(
        fmt::format("{{ lambda ; a:{0}[3,4] b:{0}[4,5]. let\n"
                    "    c:{0}[3,5] = dot_general[dimension_numbers=(([1], [0]), ([], []))] a b\n"
                    "    d:{0}[3] = reduce_sum[axes=(1,)] a\n"
                    "    e:{0}[] = reduce_sum[axes=(0, 1)] c\n"
                    "  in (c, d, e) }}",
                    c),
        {random_array(at(d, {3, 4}), 4), random_array(at(d, {4, 5}), 5)}, tol);
    check_text(fmt::format("{{ lambda ; a:{0}[6] b:i32[3] c:{0}[3]. let\n"
                           "    d:{0}[6] = scatter-add[axis=0] a b c\n"
                           "    e:Ref{{{0}[6]}} = new_ref d\n"
                           "    e[...] += d\n"
                           "    f:{0}[6] = freeze e\n"
                           "  in (f,) }}",
                           c),
               {random_array(at(d, {6}), 6), Array::from_vector<int32_t>({1, 4, 1}, {3}),
                random_array(at(d, {3}), 7)},
               tol);
  }
}

TEST(NativeComplex, ComparisonsThatOrderAreRefusedByTheTypeRules) {
  EXPECT_THROW(parse_jaxpr("{ lambda ; a:c64[2]. let b:bool[2] = lt a a in (b,) }"), TypeError);
  EXPECT_THROW(parse_jaxpr("{ lambda ; a:c64[2]. let b:c64[2] = max a a in (b,) }"), TypeError);
  EXPECT_THROW(parse_jaxpr("{ lambda ; a:f32[2]. let b:f32[2] = real a in (b,) }"), TypeError);
}

TEST(NativeComplex, ReduceMaxAndMinReadJaxsLexicographicOrder) {
  // JAX's text reduces complex numbers by real part, then imaginary part (a rewrite of the
  // reduction into real ones: import/jax/folds.cpp, complex_extremum).
  const Jaxpr j = parse_jaxpr(
      "{ lambda ; a:c64[4]. let b:c64[] = reduce_max[axes=(0,)] a "
      "c:c64[] = reduce_min[axes=(0,)] a in (b, c) }");
  const std::vector<RtValue> args{
      Array::from_vector<std::complex<float>>({{1, 2}, {3, -1}, {3, 0.5f}, {-2, 7}}, {4})};
  const std::vector<RtValue> want{Array::from_vector<std::complex<float>>({{3, 0.5f}}, {}),
                                  Array::from_vector<std::complex<float>>({{-2, 7}}, {})};
  const std::vector<RtValue> interpreted = interpret(j, args);
  const std::vector<RtValue> native = compile_native(j)(args);
  for (size_t k = 0; k < 2; ++k) {
    testing::expect_close(testing::as_array(interpreted[k]), testing::as_array(want[k]), 0,
                          "interpreter");
    testing::expect_close(testing::as_array(native[k]), testing::as_array(want[k]), 0, "native");
  }
}

}  // namespace
}  // namespace refjit
