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

std::vector<Type> integer_pow_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::integer_pow, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array_of(0, DTypeClass::number);
  int64_t y = c.int_param("y");
  if (y < 0 && !is_float(x.dtype))
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
  constexpr auto kFloat = DTypeClass::floating;
  constexpr auto kAny = DTypeClass::any;
  constexpr auto kBoolInt = DTypeClass::bool_or_int;
  auto set = [&t](Prim p, TypeRule r) { t[static_cast<int>(p)] = r; };

  set(Prim::neg, unary<Prim::neg, kNum>);
  set(Prim::exp, unary<Prim::exp, kFloat>);
  set(Prim::log, unary<Prim::log, kFloat>);
  set(Prim::log1p, unary<Prim::log1p, kFloat>);
  set(Prim::expm1, unary<Prim::expm1, kFloat>);
  set(Prim::sin, unary<Prim::sin, kFloat>);
  set(Prim::cos, unary<Prim::cos, kFloat>);
  set(Prim::tan, unary<Prim::tan, kFloat>);
  set(Prim::tanh, unary<Prim::tanh, kFloat>);
  set(Prim::logistic, unary<Prim::logistic, kFloat>);
  set(Prim::sqrt, unary<Prim::sqrt, kFloat>);
  set(Prim::rsqrt, unary<Prim::rsqrt, kFloat>);
  set(Prim::abs, unary<Prim::abs, kNum>);
  set(Prim::sign, unary<Prim::sign, kNum>);
  set(Prim::floor, unary<Prim::floor, kFloat>);
  set(Prim::ceil, unary<Prim::ceil, kFloat>);
  set(Prim::round, round_rule);
  set(Prim::asin, unary<Prim::asin, kFloat>);
  set(Prim::acos, unary<Prim::acos, kFloat>);
  set(Prim::atan, unary<Prim::atan, kFloat>);
  set(Prim::sinh, unary<Prim::sinh, kFloat>);
  set(Prim::cosh, unary<Prim::cosh, kFloat>);
  set(Prim::asinh, unary<Prim::asinh, kFloat>);
  set(Prim::acosh, unary<Prim::acosh, kFloat>);
  set(Prim::atanh, unary<Prim::atanh, kFloat>);
  set(Prim::erf, unary<Prim::erf, kFloat>);
  set(Prim::erfc, unary<Prim::erfc, kFloat>);
  set(Prim::cbrt, unary<Prim::cbrt, kFloat>);
  set(Prim::exp2, unary<Prim::exp2, kFloat>);
  set(Prim::is_finite, is_finite_rule);
  set(Prim::erf_inv, unary<Prim::erf_inv, kFloat>);
  set(Prim::lgamma, unary<Prim::lgamma, kFloat>);
  set(Prim::digamma, unary<Prim::digamma, kFloat>);
  set(Prim::population_count, unary<Prim::population_count, DTypeClass::integer>);
  set(Prim::bitcast_convert_type, bitcast_convert_type_rule);
  set(Prim::not_, unary<Prim::not_, kBoolInt>);
  set(Prim::integer_pow, integer_pow_rule);
  set(Prim::convert_element_type, convert_element_type_rule);
  set(Prim::stop_gradient, unary<Prim::stop_gradient, kAny>);
  set(Prim::copy, unary<Prim::copy, kAny>);
  set(Prim::checkpoint_name, unary<Prim::checkpoint_name, kAny>);

  set(Prim::add, binary<Prim::add, kNum>);
  set(Prim::add_any, binary<Prim::add_any, kNum>);
  set(Prim::sub, binary<Prim::sub, kNum>);
  set(Prim::mul, binary<Prim::mul, kNum>);
  set(Prim::div, binary<Prim::div, kNum>);
  set(Prim::max, binary<Prim::max, kNum>);
  set(Prim::min, binary<Prim::min, kNum>);
  set(Prim::pow, binary<Prim::pow, kFloat>);
  set(Prim::rem, binary<Prim::rem, kNum>);
  set(Prim::atan2, binary<Prim::atan2, kFloat>);
  set(Prim::nextafter, binary<Prim::nextafter, kFloat>);
  set(Prim::polygamma, binary<Prim::polygamma, kFloat>);
  set(Prim::igamma, binary<Prim::igamma, kFloat>);
  set(Prim::igammac, binary<Prim::igammac, kFloat>);
  set(Prim::igamma_grad_a, binary<Prim::igamma_grad_a, kFloat>);
  set(Prim::eq, binary<Prim::eq, kAny, true>);
  set(Prim::ne, binary<Prim::ne, kAny, true>);
  set(Prim::lt, binary<Prim::lt, kAny, true>);
  set(Prim::le, binary<Prim::le, kAny, true>);
  set(Prim::gt, binary<Prim::gt, kAny, true>);
  set(Prim::ge, binary<Prim::ge, kAny, true>);
  set(Prim::and_, binary<Prim::and_, kBoolInt>);
  set(Prim::or_, binary<Prim::or_, kBoolInt>);
  set(Prim::xor_, binary<Prim::xor_, kBoolInt>);
  set(Prim::shift_left, binary<Prim::shift_left, DTypeClass::integer>);
  set(Prim::shift_right_logical, binary<Prim::shift_right_logical, DTypeClass::integer>);
  set(Prim::shift_right_arithmetic, binary<Prim::shift_right_arithmetic, DTypeClass::integer>);
  set(Prim::select_n, select_n_rule);
}

}  // namespace refjit
