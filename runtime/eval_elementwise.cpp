// Eval rules of the elementwise primitives. f32 math is done in float (std:: overloads pick
// sinf etc.) so results match compiled code; integer arithmetic wraps (two's complement) and
// follows XLA where C++ has undefined behaviour (division by zero, INT_MIN / -1).
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <numbers>
#include <type_traits>

#include "refjit/ir/error.h"
#include "runtime/dtype_dispatch.h"
#include "runtime/eval_rules.h"
#include "runtime/flat_index.h"
#include "runtime/special_functions.h"

namespace refjit {

namespace {

// Two's-complement arithmetic that wraps instead of overflowing: computed in an unsigned type
// at least as wide as `unsigned` (narrower types would be promoted to signed int).
template <class T>
using WrapType = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
template <class T>
T wrap_add(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
}
template <class T>
T wrap_sub(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) - static_cast<WrapType<T>>(b));
}
template <class T>
T wrap_mul(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
}

template <class T>
T mul(T a, T b) {
  if constexpr (kIsInt<T>)
    return wrap_mul(a, b);
  else
    return a * b;
}

constexpr std::string_view kNumbers = "floats and integers";
constexpr std::string_view kArith = "floats, complex numbers and integers";
constexpr std::string_view kFloats = "float32, float64";
constexpr std::string_view kInexact = "floats and complex numbers";
constexpr std::string_view kOrdered = "any dtype but complex";
constexpr std::string_view kInts = "integers";
constexpr std::string_view kBoolOrInt = "bool and integers";
constexpr std::string_view kAny = "any dtype";

// ---- unary ----

// Each op: `ok<T>` says which element types it accepts, `operator()` maps one element.
// Ops that need params take them in their constructor.
template <class Op>
Op make_op(const Params& p) {
  if constexpr (std::is_constructible_v<Op, const Params&>)
    return Op(p);
  else
    return Op{};
}

template <class Op>
std::vector<RtValue> eval_unary(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  Op op = make_op<Op>(e.params);
  Array out(x.type());
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (Op::template ok<T>) {
      auto xs = x.values<T>();
      auto os = out.mutable_values<T>();
      for (size_t i = 0; i < xs.size(); ++i) os[i] = op(xs[i]);
    } else {
      bad_dtype(e, 0, x.dtype(), Op::kAllowed);
    }
  });
  return {out};
}

#define REFJIT_FLOAT_UNARY(Name, expr)                    \
  struct Name {                                           \
    template <class T>                                    \
    static constexpr bool ok = kIsFloat<T>;               \
    static constexpr std::string_view kAllowed = kFloats; \
    template <class T>                                    \
    T operator()(T x) const {                             \
      return expr;                                        \
    }                                                     \
  };

// The same on real floats and complex numbers (std::'s complex overloads).
#define REFJIT_INEXACT_UNARY(Name, expr)                   \
  struct Name {                                            \
    template <class T>                                     \
    static constexpr bool ok = kIsInexact<T>;              \
    static constexpr std::string_view kAllowed = kInexact; \
    template <class T>                                     \
    T operator()(T x) const {                              \
      return expr;                                         \
    }                                                      \
  };

// log1p, expm1 and exp2 of a complex number, accurate near 0 where log(1 + z) and
// exp(z) - 1 would cancel: |1 + z|^2 = 1 + (2x + x^2 + y^2), and
// exp(z) - 1 = expm1(x) cos y - 2 sin^2(y/2) + i exp(x) sin y.
template <class T>
T complex_log1p(T z) {
  using R = typename T::value_type;
  const R x = z.real(), y = z.imag();
  return T(std::log1p(x * (R(2) + x) + y * y) / R(2), std::atan2(y, R(1) + x));
}
template <class T>
T complex_expm1(T z) {
  using R = typename T::value_type;
  const R x = z.real(), y = z.imag(), h = std::sin(y / R(2));
  return T(std::expm1(x) * std::cos(y) - R(2) * h * h, std::exp(x) * std::sin(y));
}

template <class T>
T log1p_of(T x) {
  if constexpr (kIsComplex<T>)
    return complex_log1p(x);
  else
    return std::log1p(x);
}
template <class T>
T expm1_of(T x) {
  if constexpr (kIsComplex<T>)
    return complex_expm1(x);
  else
    return std::expm1(x);
}
template <class T>
T exp2_of(T x) {
  if constexpr (kIsComplex<T>)
    return std::exp(x * typename T::value_type(std::numbers::ln2));
  else
    return std::exp2(x);
}

REFJIT_INEXACT_UNARY(Exp, std::exp(x))
REFJIT_INEXACT_UNARY(Log, std::log(x))
REFJIT_INEXACT_UNARY(Log1p, log1p_of(x))
REFJIT_INEXACT_UNARY(Expm1, expm1_of(x))
REFJIT_INEXACT_UNARY(Sin, std::sin(x))
REFJIT_INEXACT_UNARY(Cos, std::cos(x))
REFJIT_INEXACT_UNARY(Tan, std::tan(x))
REFJIT_INEXACT_UNARY(Tanh, std::tanh(x))
REFJIT_INEXACT_UNARY(Logistic, T(1) / (T(1) + std::exp(-x)))
REFJIT_INEXACT_UNARY(Sqrt, std::sqrt(x))
REFJIT_INEXACT_UNARY(Rsqrt, T(1) / std::sqrt(x))
REFJIT_FLOAT_UNARY(Floor, std::floor(x))
REFJIT_FLOAT_UNARY(Ceil, std::ceil(x))
REFJIT_INEXACT_UNARY(Asin, std::asin(x))
REFJIT_INEXACT_UNARY(Acos, std::acos(x))
REFJIT_INEXACT_UNARY(Atan, std::atan(x))
REFJIT_INEXACT_UNARY(Sinh, std::sinh(x))
REFJIT_INEXACT_UNARY(Cosh, std::cosh(x))
REFJIT_INEXACT_UNARY(Asinh, std::asinh(x))
REFJIT_INEXACT_UNARY(Acosh, std::acosh(x))
REFJIT_INEXACT_UNARY(Atanh, std::atanh(x))
REFJIT_FLOAT_UNARY(Erf, std::erf(x))
REFJIT_FLOAT_UNARY(Erfc, std::erfc(x))
REFJIT_FLOAT_UNARY(Cbrt, std::cbrt(x))
REFJIT_INEXACT_UNARY(Exp2, exp2_of(x))
#undef REFJIT_INEXACT_UNARY

struct Neg {
  template <class T>
  static constexpr bool ok = kIsNumber<T> || kIsComplex<T>;
  static constexpr std::string_view kAllowed = kArith;
  template <class T>
  T operator()(T x) const {
    if constexpr (kIsInt<T>)
      return wrap_sub(T(0), x);
    else
      return -x;
  }
};

struct Abs {
  template <class T>
  static constexpr bool ok = kIsNumber<T>;
  static constexpr std::string_view kAllowed = kNumbers;
  template <class T>
  T operator()(T x) const {
    if constexpr (kIsFloat<T>) {
      return std::fabs(x);
    } else if constexpr (std::is_signed_v<T>) {
      return x < 0 ? wrap_sub(T(0), x) : x;  // INT_MIN stays INT_MIN
    } else {
      return x;  // unsigned
    }
  }
};

struct Sign {
  template <class T>
  static constexpr bool ok = kIsNumber<T> || kIsComplex<T>;
  static constexpr std::string_view kAllowed = kArith;
  template <class T>
  T operator()(T x) const {
    if constexpr (kIsComplex<T>) {
      // z / |z|, and 0 at 0 (XLA's sign of a complex number).
      const auto r = std::abs(x);
      return r == 0 ? T(0) : x / r;
    } else if constexpr (kIsFloat<T>) {
      if (std::isnan(x)) return x;
      return x > 0 ? T(1) : (x < 0 ? T(-1) : x);  // keeps the sign of zero
    } else {
      if constexpr (std::is_signed_v<T>)
        return static_cast<T>((x > 0) - (x < 0));
      else
        return static_cast<T>(x > 0);
    }
  }
};

struct Round {
  int64_t method = 0;
  explicit Round(const Params& p) : method(p.get_or<int64_t>("rounding_method", 0)) {}
  template <class T>
  static constexpr bool ok = kIsFloat<T>;
  static constexpr std::string_view kAllowed = kFloats;
  template <class T>
  T operator()(T x) const {
    if (method == 1) {
      // Half to even, independent of the current rounding mode.
      T f = std::floor(x);
      T diff = x - f;
      if (diff > T(0.5)) return f + T(1);
      if (diff < T(0.5)) return f;
      return std::fmod(f, T(2)) == 0 ? f : T(f + T(1));
    }
    return std::round(x);  // half away from zero
  }
};

struct Not {
  template <class T>
  static constexpr bool ok = kIsInt<T> || kIsBool<T>;
  static constexpr std::string_view kAllowed = kBoolOrInt;
  template <class T>
  T operator()(T x) const {
    if constexpr (kIsBool<T>)
      return !x;
    else
      return static_cast<T>(~x);
  }
};

// x**y by square-and-multiply, the same multiplication order as JAX's integer_pow lowering.
struct IntegerPow {
  int64_t y = 0;
  explicit IntegerPow(const Params& p) : y(p.get<int64_t>("y")) {}
  template <class T>
  static constexpr bool ok = kIsNumber<T> || kIsComplex<T>;
  static constexpr std::string_view kAllowed = kArith;
  template <class T>
  T operator()(T x) const {
    if (y == 0) return T(1);
    uint64_t n =
        y < 0 ? static_cast<uint64_t>(0) - static_cast<uint64_t>(y) : static_cast<uint64_t>(y);
    bool have = false;
    T acc = T(1);
    while (n > 0) {
      if (n & 1) {
        acc = have ? mul(acc, x) : x;
        have = true;
      }
      n >>= 1;
      if (n > 0) x = mul(x, x);
    }
    if (y < 0) {
      if constexpr (kIsInexact<T>)
        return T(1) / acc;
      else
        throw Error(fmt::format("integer_pow: negative exponent y={} needs a float operand", y));
    }
    return acc;
  }
};

struct Identity {
  template <class T>
  static constexpr bool ok = true;
  static constexpr std::string_view kAllowed = kAny;
  template <class T>
  T operator()(T x) const {
    return x;
  }
};

// ---- convert_element_type ----

template <class To, class From>
To convert(From v) {
  if constexpr (kIsComplex<From> && kIsComplex<To>) {
    return To(v);
  } else if constexpr (kIsComplex<From>) {
    // To a real dtype: the real part, as XLA converts (bool: nonzero).
    if constexpr (kIsBool<To>)
      return v != From(0);
    else
      return convert<To>(v.real());
  } else if constexpr (kIsComplex<To>) {
    using R = typename To::value_type;
    if constexpr (kIsBool<From>)
      return To(v ? R(1) : R(0));
    else if constexpr (kIsHalfFloat<From>)
      return To(static_cast<R>(static_cast<float>(v)));
    else
      return To(static_cast<R>(v));
  } else if constexpr (kIsBool<To>) {
    return v != From(0);
  } else if constexpr (kIsInt<To> && kIsFloat<From>) {
    // XLA: NaN -> 0, truncate toward zero, saturate out of range.
    if (std::isnan(v)) return 0;
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double hi = static_cast<double>(std::numeric_limits<To>::max());
    double d = static_cast<double>(v);
    if (d <= lo) return std::numeric_limits<To>::min();
    if (d >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(std::trunc(d));
  } else {
    return static_cast<To>(v);  // int narrowing wraps (C++20 modular conversion)
  }
}

std::vector<RtValue> eval_convert(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  DType to = e.params.get<DType>("new_dtype");
  Array out(ArrayType{to, x.shape()});
  visit_dtype(x.dtype(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    visit_dtype(to, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      auto xs = x.values<From>();
      auto os = out.mutable_values<To>();
      for (size_t i = 0; i < xs.size(); ++i) os[i] = convert<To>(xs[i]);
    });
  });
  return {out};
}

std::vector<RtValue> eval_is_finite(const EvalContext&, const Eqn& e,
                                    std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  Array out(ArrayType{DType::bool_, x.shape()});
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsFloat<T>) {
      auto xs = x.values<T>();
      auto os = out.mutable_values<bool>();
      for (size_t i = 0; i < xs.size(); ++i) os[i] = std::isfinite(xs[i]);
    } else {
      bad_dtype(e, 0, x.dtype(), kFloats);
    }
  });
  return {out};
}

// erf_inv: Winitzki's closed form (about 2e-3 relative error) refined by Newton steps in
// double, on erf for |x| <= 0.5 and on erfc = 1 - |x| beyond (no cancellation in the tails);
// exact to rounding for f32 and f64. +-1 give +-inf, |x| > 1 and NaN give NaN.
double erf_inv(double x) {
  if (std::isnan(x) || x < -1 || x > 1) return std::numeric_limits<double>::quiet_NaN();
  if (x == 1 || x == -1) return x * std::numeric_limits<double>::infinity();
  if (x == 0) return x;
  const double a = std::fabs(x), k = 0.147, two_over_sqrt_pi = 1.1283791670955126;
  const double ln = std::log((1.0 - a) * (1.0 + a));
  const double t = 2.0 / (std::numbers::pi * k) + ln / 2.0;
  double y = std::sqrt(std::sqrt(t * t - ln / k) - t);
  for (int step = 0; step < 4; ++step) {
    double slope = two_over_sqrt_pi * std::exp(-y * y);
    if (slope == 0) break;
    double miss = a <= 0.5 ? std::erf(y) - a : (1.0 - a) - std::erfc(y);
    y -= miss / slope;
  }
  return std::copysign(y, x);
}

REFJIT_FLOAT_UNARY(Lgamma, static_cast<T>(std::lgamma(x)))
REFJIT_FLOAT_UNARY(Digamma, static_cast<T>(special::digamma(static_cast<double>(x))))
REFJIT_FLOAT_UNARY(ErfInv, static_cast<T>(erf_inv(static_cast<double>(x))))
REFJIT_FLOAT_UNARY(BesselI0e, static_cast<T>(special::bessel_i0e(static_cast<double>(x))))
REFJIT_FLOAT_UNARY(BesselI1e, static_cast<T>(special::bessel_i1e(static_cast<double>(x))))
#undef REFJIT_FLOAT_UNARY

struct PopulationCount {
  template <class T>
  static constexpr bool ok = kIsInt<T>;
  static constexpr std::string_view kAllowed = kInts;
  template <class T>
  T operator()(T x) const {
    return static_cast<T>(std::popcount(static_cast<std::make_unsigned_t<T>>(x)));
  }
};

std::vector<RtValue> eval_bitcast_convert(const EvalContext&, const Eqn& e,
                                          std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  DType to = e.params.get<DType>("new_dtype");
  if (byte_size(to) != byte_size(x.dtype()))
    eval_fail(e, fmt::format("cannot bitcast {} to {}", x.type().str(), long_name(to)));
  return {Array(ArrayType{to, x.shape()}, x.data())};
}

// ---- binary ----

template <class Op>
std::vector<RtValue> eval_binary(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& x = array_in(e, ins, 0);
  const Array& y = array_in(e, ins, 1);
  if (x.dtype() != y.dtype())
    eval_fail(e, fmt::format("operand dtypes differ: {} and {}; insert a convert_element_type",
                             x.type().str(), y.type().str()));
  const bool x_scalar = x.rank() == 0, y_scalar = y.rank() == 0;
  if (x.shape() != y.shape() && !x_scalar && !y_scalar)
    eval_fail(e, fmt::format("operand shapes {} and {} differ and neither is a scalar",
                             x.type().str(), y.type().str()));
  const Shape& shape = x_scalar ? y.shape() : x.shape();
  Array out(ArrayType{Op::kCompare ? DType::bool_ : x.dtype(), shape});
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (Op::template ok<T>) {
      using R = std::conditional_t<Op::kCompare, bool, T>;
      auto xs = x.values<T>();
      auto ys = y.values<T>();
      auto os = out.mutable_values<R>();
      Op op;
      for (size_t i = 0; i < os.size(); ++i) os[i] = op(xs[x_scalar ? 0 : i], ys[y_scalar ? 0 : i]);
    } else {
      bad_dtype(e, 0, x.dtype(), Op::kAllowed);
    }
  });
  return {out};
}

#define REFJIT_BINARY(Name, pred, allowed, compare, body) \
  struct Name {                                           \
    template <class T>                                    \
    static constexpr bool ok = pred;                      \
    static constexpr std::string_view kAllowed = allowed; \
    static constexpr bool kCompare = compare;             \
    template <class T>                                    \
    auto operator()(T a, T b) const {                     \
      body                                                \
    }                                                     \
  };

REFJIT_BINARY(Add, kIsNumber<T> || kIsComplex<T>, kArith, false, {
  if constexpr (kIsInt<T>)
    return wrap_add(a, b);
  else
    return a + b;
})
REFJIT_BINARY(Sub, kIsNumber<T> || kIsComplex<T>, kArith, false, {
  if constexpr (kIsInt<T>)
    return wrap_sub(a, b);
  else
    return a - b;
})
REFJIT_BINARY(Mul, kIsNumber<T> || kIsComplex<T>, kArith, false, { return mul(a, b); })
REFJIT_BINARY(Div, kIsNumber<T> || kIsComplex<T>, kArith, false, {
  if constexpr (kIsInt<T>) {
    if (b == 0) return static_cast<T>(-1);  // XLA: all bits set
    if constexpr (std::is_signed_v<T>)
      if (b == -1 && a == std::numeric_limits<T>::min()) return a;
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
})
REFJIT_BINARY(Max, kIsNumber<T>, kNumbers, false, {
  if constexpr (kIsFloat<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a > b ? a : b;
})
REFJIT_BINARY(Min, kIsNumber<T>, kNumbers, false, {
  if constexpr (kIsFloat<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return a < b ? a : b;
})
REFJIT_BINARY(Pow, kIsInexact<T>, kInexact, false, { return static_cast<T>(std::pow(a, b)); })
// The remainder of truncating division, with the dividend's sign (C's fmod and %); for ints
// x rem 0 = x and INT_MIN rem -1 = 0, as XLA defines them.
REFJIT_BINARY(Rem, kIsNumber<T>, kNumbers, false, {
  if constexpr (kIsInt<T>) {
    if (b == 0) return a;
    if constexpr (std::is_signed_v<T>)
      if (b == -1) return T(0);
    return static_cast<T>(a % b);
  } else {
    return static_cast<T>(std::fmod(a, b));
  }
})
REFJIT_BINARY(Nextafter, kIsFloat<T>, kFloats, false, { return std::nextafter(a, b); })
REFJIT_BINARY(Polygamma, kIsFloat<T>, kFloats, false, {
  return static_cast<T>(special::polygamma(static_cast<double>(a), static_cast<double>(b)));
})
REFJIT_BINARY(Igamma, kIsFloat<T>, kFloats, false, {
  return static_cast<T>(
      special::incomplete_gamma(static_cast<double>(a), static_cast<double>(b)).p);
})
REFJIT_BINARY(Igammac, kIsFloat<T>, kFloats, false, {
  return static_cast<T>(
      special::incomplete_gamma(static_cast<double>(a), static_cast<double>(b)).q);
})
REFJIT_BINARY(IgammaGradA, kIsFloat<T>, kFloats, false, {
  return static_cast<T>(
      special::incomplete_gamma(static_cast<double>(a), static_cast<double>(b)).dp_da);
})
REFJIT_BINARY(Atan2, kIsFloat<T>, kFloats, false, { return static_cast<T>(std::atan2(a, b)); })
REFJIT_BINARY(Eq, true, kAny, true, { return a == b; })
REFJIT_BINARY(Ne, true, kAny, true, { return a != b; })
REFJIT_BINARY(Lt, !kIsComplex<T>, kOrdered, true, { return a < b; })
REFJIT_BINARY(Le, !kIsComplex<T>, kOrdered, true, { return a <= b; })
REFJIT_BINARY(Gt, !kIsComplex<T>, kOrdered, true, { return a > b; })
REFJIT_BINARY(Ge, !kIsComplex<T>, kOrdered, true, { return a >= b; })

REFJIT_BINARY(And, kIsInt<T> || kIsBool<T>, kBoolOrInt, false, {
  if constexpr (kIsBool<T>)
    return a && b;
  else
    return static_cast<T>(a & b);
})
REFJIT_BINARY(Or, kIsInt<T> || kIsBool<T>, kBoolOrInt, false, {
  if constexpr (kIsBool<T>)
    return a || b;
  else
    return static_cast<T>(a | b);
})
REFJIT_BINARY(Xor, kIsInt<T> || kIsBool<T>, kBoolOrInt, false, {
  if constexpr (kIsBool<T>)
    return a != b;
  else
    return static_cast<T>(a ^ b);
})
// Shifts as XLA defines them: the amount is read as unsigned; amounts of the bit width or
// more give 0, or for an arithmetic right shift the sign (0 or -1).
template <class T>
bool shift_out(T b) {
  return static_cast<std::make_unsigned_t<T>>(b) >= sizeof(T) * 8;
}
REFJIT_BINARY(ShiftLeft, kIsInt<T>, kInts, false, {
  using U = std::make_unsigned_t<T>;
  if (shift_out(b)) return T(0);
  return static_cast<T>(static_cast<U>(static_cast<WrapType<T>>(a) << static_cast<U>(b)));
})
REFJIT_BINARY(ShiftRightLogical, kIsInt<T>, kInts, false, {
  using U = std::make_unsigned_t<T>;
  if (shift_out(b)) return T(0);
  return static_cast<T>(static_cast<U>(a) >> static_cast<U>(b));
})
REFJIT_BINARY(ShiftRightArithmetic, kIsInt<T>, kInts, false, {
  using S = std::make_signed_t<T>;
  using U = std::make_unsigned_t<T>;
  S s = static_cast<S>(a);
  if (shift_out(b)) return static_cast<T>(s < 0 ? S(-1) : S(0));
  return static_cast<T>(static_cast<S>(s >> static_cast<U>(b)));
})
#undef REFJIT_BINARY

// ---- select_n ----

std::vector<RtValue> eval_select_n(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 2, true);
  const Array& p = array_in(e, ins, 0);
  const size_t n = ins.size() - 1;
  if (p.dtype() != DType::bool_ && p.dtype() != DType::i32)
    bad_dtype(e, 0, p.dtype(), "bool or int32 as the predicate");
  if (p.dtype() == DType::bool_ && n != 2)
    eval_fail(e, fmt::format("a bool predicate needs exactly 2 cases, got {}", n));
  const Array& c0 = array_in(e, ins, 1);
  for (size_t k = 2; k <= n; ++k)
    if (array_in(e, ins, k).type() != c0.type())
      eval_fail(e, fmt::format("case {} has type {} but case 0 has {}", k - 1,
                               array_in(e, ins, k).type().str(), c0.type().str()));
  if (p.rank() != 0 && p.shape() != c0.shape())
    eval_fail(e, fmt::format("predicate shape {} must be a scalar or the cases' shape {}",
                             p.type().str(), c0.type().str()));
  const bool p_scalar = p.rank() == 0;
  std::vector<const std::byte*> cases;
  for (size_t k = 1; k <= n; ++k) cases.push_back(array_in(e, ins, k).data());
  Array out(c0.type());
  const int64_t w = byte_size(c0.dtype());
  std::byte* o = out.mutable_data();
  for (int64_t i = 0; i < out.size(); ++i) {
    int64_t which = clamp_index(p.as_int(p_scalar ? 0 : i), 0, static_cast<int64_t>(n) - 1);
    std::memcpy(o + i * w, cases[which] + i * w, static_cast<size_t>(w));
  }
  return {out};
}

// pow x y, an integer y converted to x's dtype first (JAX's x ** n).
std::vector<RtValue> eval_pow(const EvalContext& c, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& x = array_in(e, ins, 0);
  const Array& y = array_in(e, ins, 1);
  if (y.dtype() == x.dtype() || !is_int(y.dtype())) return eval_binary<Pow>(c, e, ins);
  Eqn to_x{Prim::convert_element_type, Params{{"new_dtype", x.dtype()}}, {}, {}};
  std::vector<RtValue> converted = eval_convert(c, to_x, std::span<const RtValue>(&ins[1], 1));
  std::vector<RtValue> same{x, converted[0]};
  return eval_binary<Pow>(c, e, same);
}

// ---- complex numbers: results of another dtype than the operand ----

// y = f(x) elementwise, y of dtype `to`, for operands of the element types `Ok` accepts.
template <class Ok, class F>
Array map_to(const Eqn& e, const Array& x, DType to, std::string_view allowed, F f) {
  Array out(ArrayType{to, x.shape()});
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (Ok::template ok<T>) {
      auto xs = x.values<T>();
      for (size_t i = 0; i < xs.size(); ++i)
        out.set_from_complex(static_cast<int64_t>(i), std::complex<double>(f(xs[i])));
    } else {
      bad_dtype(e, 0, x.dtype(), allowed);
    }
  });
  return out;
}

struct ComplexOnly {
  template <class T>
  static constexpr bool ok = kIsComplex<T>;
};
struct InexactOnly {
  template <class T>
  static constexpr bool ok = kIsInexact<T>;
};

// abs of a complex number is its magnitude, of the part dtype; of a real number, itself.
std::vector<RtValue> eval_abs(const EvalContext& c, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  if (!is_complex(x.dtype())) return eval_unary<Abs>(c, e, ins);
  return {map_to<ComplexOnly>(e, x, real_dtype(x.dtype()), "complex",
                              [](auto z) { return static_cast<double>(std::abs(z)); })};
}

std::vector<RtValue> eval_real(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  return {map_to<ComplexOnly>(e, x, real_dtype(x.dtype()), "complex",
                              [](auto z) { return static_cast<double>(z.real()); })};
}

std::vector<RtValue> eval_imag(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  return {map_to<ComplexOnly>(e, x, real_dtype(x.dtype()), "complex",
                              [](auto z) { return static_cast<double>(z.imag()); })};
}

std::vector<RtValue> eval_conj(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  return {map_to<InexactOnly>(e, x, complex_dtype(x.dtype()), kInexact, [](auto v) {
    using T = decltype(v);
    if constexpr (kIsComplex<T>)
      return std::complex<double>(std::conj(v));
    else
      return std::complex<double>(static_cast<double>(v), 0.0);
  })};
}

// complex re im: parts of one real float dtype (f32, f64; either may be a scalar).
std::vector<RtValue> eval_complex(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& x = array_in(e, ins, 0);
  const Array& y = array_in(e, ins, 1);
  if (x.dtype() != y.dtype() || (x.dtype() != DType::f32 && x.dtype() != DType::f64))
    eval_fail(e, fmt::format("the parts {} and {} must both be f32 or both f64", x.type().str(),
                             y.type().str()));
  const bool x_scalar = x.rank() == 0, y_scalar = y.rank() == 0;
  if (x.shape() != y.shape() && !x_scalar && !y_scalar)
    eval_fail(e, fmt::format("operand shapes {} and {} differ and neither is a scalar",
                             x.type().str(), y.type().str()));
  Array out(ArrayType{complex_dtype(x.dtype()), x_scalar ? y.shape() : x.shape()});
  for (int64_t i = 0; i < out.size(); ++i)
    out.set_from_complex(i, {x.as_double(x_scalar ? 0 : i), y.as_double(y_scalar ? 0 : i)});
  return {out};
}

}  // namespace

void register_elementwise_eval_rules(EvalRuleTable& t) {
  t.set(Prim::neg, &eval_unary<Neg>);
  t.set(Prim::exp, &eval_unary<Exp>);
  t.set(Prim::log, &eval_unary<Log>);
  t.set(Prim::log1p, &eval_unary<Log1p>);
  t.set(Prim::expm1, &eval_unary<Expm1>);
  t.set(Prim::sin, &eval_unary<Sin>);
  t.set(Prim::cos, &eval_unary<Cos>);
  t.set(Prim::tan, &eval_unary<Tan>);
  t.set(Prim::tanh, &eval_unary<Tanh>);
  t.set(Prim::logistic, &eval_unary<Logistic>);
  t.set(Prim::sqrt, &eval_unary<Sqrt>);
  t.set(Prim::rsqrt, &eval_unary<Rsqrt>);
  t.set(Prim::abs, &eval_abs);
  t.set(Prim::real, &eval_real);
  t.set(Prim::imag, &eval_imag);
  t.set(Prim::conj, &eval_conj);
  t.set(Prim::complex, &eval_complex);
  t.set(Prim::sign, &eval_unary<Sign>);
  t.set(Prim::floor, &eval_unary<Floor>);
  t.set(Prim::ceil, &eval_unary<Ceil>);
  t.set(Prim::round, &eval_unary<Round>);
  t.set(Prim::asin, &eval_unary<Asin>);
  t.set(Prim::acos, &eval_unary<Acos>);
  t.set(Prim::atan, &eval_unary<Atan>);
  t.set(Prim::sinh, &eval_unary<Sinh>);
  t.set(Prim::cosh, &eval_unary<Cosh>);
  t.set(Prim::asinh, &eval_unary<Asinh>);
  t.set(Prim::acosh, &eval_unary<Acosh>);
  t.set(Prim::atanh, &eval_unary<Atanh>);
  t.set(Prim::erf, &eval_unary<Erf>);
  t.set(Prim::erfc, &eval_unary<Erfc>);
  t.set(Prim::cbrt, &eval_unary<Cbrt>);
  t.set(Prim::exp2, &eval_unary<Exp2>);
  t.set(Prim::is_finite, &eval_is_finite);
  t.set(Prim::erf_inv, &eval_unary<ErfInv>);
  t.set(Prim::lgamma, &eval_unary<Lgamma>);
  t.set(Prim::digamma, &eval_unary<Digamma>);
  t.set(Prim::bessel_i0e, &eval_unary<BesselI0e>);
  t.set(Prim::bessel_i1e, &eval_unary<BesselI1e>);
  t.set(Prim::population_count, &eval_unary<PopulationCount>);
  t.set(Prim::bitcast_convert_type, &eval_bitcast_convert);
  t.set(Prim::not_, &eval_unary<Not>);
  t.set(Prim::integer_pow, &eval_unary<IntegerPow>);
  t.set(Prim::convert_element_type, &eval_convert);
  t.set(Prim::stop_gradient, &eval_unary<Identity>);
  t.set(Prim::copy, &eval_unary<Identity>);
  t.set(Prim::checkpoint_name, &eval_unary<Identity>);
  t.set(Prim::add, &eval_binary<Add>);
  t.set(Prim::add_any, &eval_binary<Add>);
  t.set(Prim::sub, &eval_binary<Sub>);
  t.set(Prim::mul, &eval_binary<Mul>);
  t.set(Prim::div, &eval_binary<Div>);
  t.set(Prim::max, &eval_binary<Max>);
  t.set(Prim::min, &eval_binary<Min>);
  t.set(Prim::pow, &eval_pow);
  t.set(Prim::rem, &eval_binary<Rem>);
  t.set(Prim::atan2, &eval_binary<Atan2>);
  t.set(Prim::nextafter, &eval_binary<Nextafter>);
  t.set(Prim::polygamma, &eval_binary<Polygamma>);
  t.set(Prim::igamma, &eval_binary<Igamma>);
  t.set(Prim::igammac, &eval_binary<Igammac>);
  t.set(Prim::igamma_grad_a, &eval_binary<IgammaGradA>);
  t.set(Prim::eq, &eval_binary<Eq>);
  t.set(Prim::ne, &eval_binary<Ne>);
  t.set(Prim::lt, &eval_binary<Lt>);
  t.set(Prim::le, &eval_binary<Le>);
  t.set(Prim::gt, &eval_binary<Gt>);
  t.set(Prim::ge, &eval_binary<Ge>);
  t.set(Prim::and_, &eval_binary<And>);
  t.set(Prim::or_, &eval_binary<Or>);
  t.set(Prim::xor_, &eval_binary<Xor>);
  t.set(Prim::shift_left, &eval_binary<ShiftLeft>);
  t.set(Prim::shift_right_logical, &eval_binary<ShiftRightLogical>);
  t.set(Prim::shift_right_arithmetic, &eval_binary<ShiftRightArithmetic>);
  t.set(Prim::select_n, &eval_select_n);
}

}  // namespace refjit
