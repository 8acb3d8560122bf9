// Type rules of the elementwise primitives (docs/primitives.md "Elementwise").
#include "ir/type_rule_support.h"
#include "ir/type_rules.h"

namespace refjit {

namespace {

using type_rules::Checker;
using type_rules::DTypeClass;
using type_rules::one;

// x:T[s] -> T[s] with T in `cls`.
template <Prim P, DTypeClass cls>
std::vector<Type> unary(std::span<const Type> in, const Params& params) {
  Checker c(P, in, params);
  c.expect_count(1);
  return one(c.array_of(0, cls));
}

// abs: the magnitude, of the part dtype for a complex operand (c64 -> f32).
std::vector<Type> abs_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::abs, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array_of(0, DTypeClass::arith);
  return one(ArrayType{real_dtype(x.dtype), x.shape});
}

// real, imag: c64[s] -> f32[s], c128[s] -> f64[s].
template <Prim P>
std::vector<Type> complex_part_rule(std::span<const Type> in, const Params& params) {
  Checker c(P, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array(0);
  if (!is_complex(x.dtype))
    c.fail("operand 0 has type {} but a complex dtype (c64 or c128) is needed", x.str());
  return one(ArrayType{real_dtype(x.dtype), x.shape});
}

// conj[input_dtype]: the conjugate, complex whatever the operand (a real float becomes the
// complex number with that real part, as JAX's lax.conj does).
std::vector<Type> conj_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::conj, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array_of(0, DTypeClass::inexact);
  return one(ArrayType{complex_dtype(x.dtype), x.shape});
}

std::vector<Type> integer_pow_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::integer_pow, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array_of(0, DTypeClass::arith);
  int64_t y = c.int_param("y");
  if (y < 0 && !is_inexact(x.dtype))
    c.fail(
        "exponent y={} is negative but operand 0 has integer type {}; negative powers need "
        "a float operand",
        y, x.str());
  return one(x);
}

std::vector<Type> round_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::round, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array_of(0, DTypeClass::floating);
  if (const int64_t* m = c.optional_param<int64_t>("rounding_method"); m && *m != 0 && *m != 1)
    c.fail("rounding_method={} is not 0 (half away from zero) or 1 (half to even)", *m);
  return one(x);
}

std::vector<Type> convert_element_type_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::convert_element_type, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array(0);
  // weak_type is accepted and ignored.
  return one(ArrayType{c.dtype_param("new_dtype"), x.shape});
}

// x:F[s] -> bool[s], F a float dtype.
std::vector<Type> is_finite_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::is_finite, in, params);
  c.expect_count(1);
  return one(ArrayType{DType::bool_, c.array_of(0, DTypeClass::floating).shape});
}

// x:T[s] -> new_dtype[s], T and new_dtype of the same width: the same bits read as new_dtype.
std::vector<Type> bitcast_convert_type_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::bitcast_convert_type, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array(0);
  DType to = c.dtype_param("new_dtype");
  if (byte_size(to) != byte_size(x.dtype) || is_bool(to) || is_bool(x.dtype))
    c.fail(
        "operand 0 has type {} but new_dtype={} has another width; refjit bitcasts between "
        "dtypes of the same width (not bool)",
        x.str(), long_name(to));
  return one(ArrayType{to, x.shape});
}

// The shape of a binary op's result: equal shapes, or one side a scalar that is broadcast.
Shape binary_shape(const Checker& c, const ArrayType& x, const ArrayType& y) {
  if (x.dtype != y.dtype)
    c.fail(
        "operand 1 has type {} but operand 0 has type {}; binary operands must have the same "
        "dtype (insert a convert_element_type)",
        y.str(), x.str());
  if (x.shape == y.shape || y.is_scalar()) return x.shape;
  if (x.is_scalar()) return y.shape;
  c.fail(
      "operand 1 has type {} but operand 0 has type {}; binary operands must have equal "
      "shapes or one must be a scalar",
      y.str(), x.str());
}

// x:T[s], y:T[s] -> T[s] (or bool[s] for comparisons) with T in `cls`.
template <Prim P, DTypeClass cls, bool comparison = false>
std::vector<Type> binary(std::span<const Type> in, const Params& params) {
  Checker c(P, in, params);
  c.expect_count(2);
  const ArrayType& x = c.array_of(0, cls);
  const ArrayType& y = c.array_of(1, cls);
  Shape s = binary_shape(c, x, y);
  return one(ArrayType{comparison ? DType::bool_ : x.dtype, std::move(s)});
}

// complex re im: two real floats of one dtype (f32 or f64) -> c64 / c128.
std::vector<Type> complex_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::complex, in, params);
  c.expect_count(2);
  const ArrayType& x = c.array(0);
  const ArrayType& y = c.array(1);
  for (const ArrayType* t : {&x, &y})
    if (t->dtype != DType::f32 && t->dtype != DType::f64)
      c.fail("operand {} has type {} but the parts of a complex number are f32 or f64",
             t == &x ? 0 : 1, t->str());
  Shape s = binary_shape(c, x, y);
  return one(ArrayType{complex_dtype(x.dtype), std::move(s)});
}

// pow x y: x float or complex; y of x's dtype, or any integer dtype (JAX's x ** n).
std::vector<Type> pow_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::pow, in, params);
  c.expect_count(2);
  const ArrayType& x = c.array_of(0, DTypeClass::inexact);
  const ArrayType& y = c.array(1);
  if (y.dtype != x.dtype && !is_int(y.dtype))
    c.fail(
        "operand 1 has type {} but the exponent must have operand 0's dtype ({}) or be an "
        "integer",
        y.str(), short_name(x.dtype));
  return one(ArrayType{x.dtype, binary_shape(c, x, ArrayType{x.dtype, y.shape})});
}

std::vector<Type> select_n_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::select_n, in, params);
  c.expect_at_least(2);
  const ArrayType& p = c.array(0);
  if (p.dtype != DType::bool_ && p.dtype != DType::i32)
    c.fail("operand 0 (the predicate) has type {} but must be bool or i32", p.str());
  size_t num_cases = in.size() - 1;
  if (p.dtype == DType::bool_ && num_cases != 2)
    c.fail(
        "a bool predicate selects between exactly 2 cases, got {}; use an i32 predicate for "
        "more",
        num_cases);
  const ArrayType& first = c.array(1);
  for (size_t i = 2; i < in.size(); ++i) {
    const ArrayType& ci = c.array(i);
    if (ci != first)
      c.fail(
          "operand {} has type {} but operand 1 has type {}; all cases must have the same "
          "type",
          i, ci.str(), first.str());
  }
  if (!p.is_scalar() && p.shape != first.shape)
    c.fail(
        "operand 0 (the predicate) has type {} but the cases have type {}; the predicate "
        "must be a scalar or have the cases' shape",
        p.str(), first.str());
  return one(first);
}

}  // namespace

void register_elementwise_type_rules(TypeRuleTable& t) {
  constexpr auto kNum = DTypeClass::number;
  constexpr auto kArith = DTypeClass::arith;
  constexpr auto kFloat = DTypeClass::floating;
  constexpr auto kInexact = DTypeClass::inexact;
  constexpr auto kAny = DTypeClass::any;
  constexpr auto kOrdered = DTypeClass::ordered;
  constexpr auto kBoolInt = DTypeClass::bool_or_int;
  auto set = [&t](Prim p, TypeRule r) { t[static_cast<int>(p)] = r; };

  set(Prim::neg, unary<Prim::neg, kArith>);
  set(Prim::exp, unary<Prim::exp, kInexact>);
  set(Prim::log, unary<Prim::log, kInexact>);
  set(Prim::log1p, unary<Prim::log1p, kInexact>);
  set(Prim::expm1, unary<Prim::expm1, kInexact>);
  set(Prim::sin, unary<Prim::sin, kInexact>);
  set(Prim::cos, unary<Prim::cos, kInexact>);
  set(Prim::tan, unary<Prim::tan, kInexact>);
  set(Prim::tanh, unary<Prim::tanh, kInexact>);
  set(Prim::logistic, unary<Prim::logistic, kInexact>);
  set(Prim::sqrt, unary<Prim::sqrt, kInexact>);
  set(Prim::rsqrt, unary<Prim::rsqrt, kInexact>);
  set(Prim::abs, abs_rule);
  set(Prim::sign, unary<Prim::sign, kArith>);
  set(Prim::floor, unary<Prim::floor, kFloat>);
  set(Prim::ceil, unary<Prim::ceil, kFloat>);
  set(Prim::round, round_rule);
  set(Prim::asin, unary<Prim::asin, kInexact>);
  set(Prim::acos, unary<Prim::acos, kInexact>);
  set(Prim::atan, unary<Prim::atan, kInexact>);
  set(Prim::sinh, unary<Prim::sinh, kInexact>);
  set(Prim::cosh, unary<Prim::cosh, kInexact>);
  set(Prim::asinh, unary<Prim::asinh, kInexact>);
  set(Prim::acosh, unary<Prim::acosh, kInexact>);
  set(Prim::atanh, unary<Prim::atanh, kInexact>);
  set(Prim::erf, unary<Prim::erf, kFloat>);
  set(Prim::erfc, unary<Prim::erfc, kFloat>);
  set(Prim::cbrt, unary<Prim::cbrt, kFloat>);
  set(Prim::exp2, unary<Prim::exp2, kInexact>);
  set(Prim::is_finite, is_finite_rule);
  set(Prim::erf_inv, unary<Prim::erf_inv, kFloat>);
  set(Prim::lgamma, unary<Prim::lgamma, kFloat>);
  set(Prim::digamma, unary<Prim::digamma, kFloat>);
  set(Prim::bessel_i0e, unary<Prim::bessel_i0e, kFloat>);
  set(Prim::bessel_i1e, unary<Prim::bessel_i1e, kFloat>);
  set(Prim::population_count, unary<Prim::population_count, DTypeClass::integer>);
  set(Prim::bitcast_convert_type, bitcast_convert_type_rule);
  set(Prim::not_, unary<Prim::not_, kBoolInt>);
  set(Prim::integer_pow, integer_pow_rule);
  set(Prim::convert_element_type, convert_element_type_rule);
  set(Prim::stop_gradient, unary<Prim::stop_gradient, kAny>);
  set(Prim::copy, unary<Prim::copy, kAny>);
  set(Prim::checkpoint_name, unary<Prim::checkpoint_name, kAny>);
  set(Prim::real, complex_part_rule<Prim::real>);
  set(Prim::imag, complex_part_rule<Prim::imag>);
  set(Prim::conj, conj_rule);

  set(Prim::add, binary<Prim::add, kArith>);
  set(Prim::add_any, binary<Prim::add_any, kArith>);
  set(Prim::sub, binary<Prim::sub, kArith>);
  set(Prim::mul, binary<Prim::mul, kArith>);
  set(Prim::div, binary<Prim::div, kArith>);
  set(Prim::max, binary<Prim::max, kNum>);
  set(Prim::min, binary<Prim::min, kNum>);
  set(Prim::pow, pow_rule);
  set(Prim::rem, binary<Prim::rem, kNum>);
  set(Prim::atan2, binary<Prim::atan2, kFloat>);
  set(Prim::nextafter, binary<Prim::nextafter, kFloat>);
  set(Prim::polygamma, binary<Prim::polygamma, kFloat>);
  set(Prim::igamma, binary<Prim::igamma, kFloat>);
  set(Prim::igammac, binary<Prim::igammac, kFloat>);
  set(Prim::igamma_grad_a, binary<Prim::igamma_grad_a, kFloat>);
  set(Prim::eq, binary<Prim::eq, kAny, true>);
  set(Prim::ne, binary<Prim::ne, kAny, true>);
  set(Prim::lt, binary<Prim::lt, kOrdered, true>);
  set(Prim::le, binary<Prim::le, kOrdered, true>);
  set(Prim::gt, binary<Prim::gt, kOrdered, true>);
  set(Prim::ge, binary<Prim::ge, kOrdered, true>);
  set(Prim::and_, binary<Prim::and_, kBoolInt>);
  set(Prim::or_, binary<Prim::or_, kBoolInt>);
  set(Prim::xor_, binary<Prim::xor_, kBoolInt>);
  set(Prim::shift_left, binary<Prim::shift_left, DTypeClass::integer>);
  set(Prim::shift_right_logical, binary<Prim::shift_right_logical, DTypeClass::integer>);
  set(Prim::shift_right_arithmetic, binary<Prim::shift_right_arithmetic, DTypeClass::integer>);
  set(Prim::complex, complex_rule);
  set(Prim::select_n, select_n_rule);
}

}  // namespace refjit
