// Lowering of elementwise primitives: one loop nest over the result shape, loading every
// operand at the same index (scalar operands are broadcast), computing with arith/math.
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <numbers>
#include <optional>

#include "backend/chain_fission.h"
#include "backend/fusion.h"
#include "backend/lowering.h"
#include "runtime/special_functions.h"

namespace refjit::backend {
namespace {

RuleTable<ElemFn>& elem_table() {
  static RuleTable<ElemFn> t;
  return t;
}

void lower_elementwise(LowerCtx& c, const Eqn& e, const ElemFn& f) {
  if (e.outs.size() != 1) fail_eqn(e, "expected exactly one result");
  Var out = e.outs[0];
  ArrayType rt = c.type_of(out).array;
  DType d = c.type_of(e.ins.at(0)).dtype();
  Value dst = c.result_buffer(out);
  c.parallel_loop_nest(rt.shape, [&](LowerCtx::Ivs ivs) {
    std::vector<Value> xs;
    for (const Atom& a : e.ins) xs.push_back(c.load(a, ivs));
    c.store(f(c, e, d, xs), dst, rt.dtype, ivs);
  });
}

// Native code computes the 16-bit floats in f32: operands of those types are extended, the
// rule runs on f32, and a float result is rounded back to the eqn's result type. Every
// operation so rounds once, as the interpreter's Float16 / BFloat16 do.
ElemFn computed_in_f32(Prim p, ElemFn f) {
  if (p == Prim::bitcast_convert_type) return f;  // moves bits, computes nothing
  return [p, f = std::move(f)](LowerCtx& c, const Eqn& e, DType d,
                               const std::vector<Value>& xs) -> Value {
    // Which values are 16-bit floats is read from the values, not from e's operands: a rule
    // may be called on other values than its eqn's (scatter-add combines the element already
    // there with an update, its eqn's operands 0 and 2).
    auto is_half = [](Value v) {
      return mlir::isa<mlir::Float16Type, mlir::BFloat16Type>(v.getType());
    };
    bool half = false;
    for (Value x : xs) half = half || is_half(x);
    if (!half) return f(c, e, d, xs);
    mlir::Type f32 = c.elem_type(DType::f32);
    std::vector<Value> wide;
    for (Value x : xs)
      wide.push_back(is_half(x) ? Value(c.b.create<arith::ExtFOp>(c.loc, f32, x)) : x);
    Value y = f(c, e, is_half_float(d) ? DType::f32 : d, wide);
    DType out = c.type_of(e.outs.at(0)).dtype();
    if (p != Prim::convert_element_type && is_half_float(out) && y.getType() == f32)
      return c.b.create<arith::TruncFOp>(c.loc, c.elem_type(out), y);
    return y;
  };
}

// An eqn with complex operands or a complex result takes the complex form of its rule
// (lower_complex.cpp). The type rules admit complex numbers only where a form exists; one
// missing is refused by name. select_n moves values, and integer_pow and
// convert_element_type take complex numbers in their own rule.
ElemFn complex_aware(Prim p, ElemFn f) {
  if (p == Prim::select_n || p == Prim::integer_pow || p == Prim::convert_element_type) return f;
  return [p, f = std::move(f)](LowerCtx& c, const Eqn& e, DType d,
                               const std::vector<Value>& xs) -> Value {
    const bool complex =
        is_complex(d) || (!e.outs.empty() && is_complex(c.type_of(e.outs[0]).dtype()));
    if (!complex) return f(c, e, d, xs);
    const ElemFn* g = complex_elementwise_rule(p);
    if (!g)
      fail_eqn(e,
               fmt::format("native code does not compute `{}` on complex numbers", prim_name(p)));
    return (*g)(c, e, d, xs);
  };
}

void set_ew(LowerTable& t, Prim p, ElemFn f) {
  f = complex_aware(p, computed_in_f32(p, std::move(f)));
  elem_table().set(p, f);
  t.set(p, [f = std::move(f)](LowerCtx& c, const Eqn& e) { lower_elementwise(c, e, f); });
}

// Ops with a float form and an int form.
template <class FOp, class IOp>
ElemFn float_or_int() {
  return [](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
    if (is_float(d)) return c.b.create<FOp>(c.loc, x[0], x[1]);
    return c.b.create<IOp>(c.loc, x[0], x[1]);
  };
}

// Calls libm (expm1f / expm1 ...) where math-to-llvm would lose accuracy or has no lowering.
ElemFn libm_unary(std::string name) {
  return [name](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
    return c.call_libm(d == DType::f32 ? name + "f" : name, x);
  };
}

// f32 as the math op MLIR's polynomial approximations replace (LoweringOptions::
// approximate_math), else libm. math-to-llvm has no accurate lowering of these ops.
template <class MathOp>
ElemFn approximated_or_libm(std::string name) {
  return [name](LowerCtx& c, const Eqn& e, DType d, const std::vector<Value>& x) -> Value {
    if (d == DType::f32 && c.options().approximate_math) return c.b.create<MathOp>(c.loc, x[0]);
    return libm_unary(name)(c, e, d, x);
  };
}

// log; approximated in f32, where MLIR's polynomial reads the exponent bits, so a subnormal
// input is first scaled into the normal range: log(x) = log(x * 2^24) - 24 log 2.
Value lower_log(LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) {
  if (d != DType::f32 || !c.options().approximate_math) return c.b.create<math::LogOp>(c.loc, x[0]);
  auto& b = c.b;
  Value tiny =
      b.create<arith::CmpFOp>(c.loc, arith::CmpFPredicate::OLT, b.create<math::AbsFOp>(c.loc, x[0]),
                              c.constant(d, std::numeric_limits<float>::min()));
  Value scaled = b.create<arith::SelectOp>(
      c.loc, tiny, b.create<arith::MulFOp>(c.loc, x[0], c.constant(d, 16777216.0)), x[0]);
  Value y = b.create<math::LogOp>(c.loc, scaled);
  Value shift = c.constant(d, 24.0 * 0.69314718055994530942);
  return b.create<arith::SelectOp>(c.loc, tiny, b.create<arith::SubFOp>(c.loc, y, shift), y);
}

// Division and powers.

// An integer exponent of pow, converted to the base's dtype d (JAX's x ** n).
Value pow_exponent(LowerCtx& c, const Eqn& e, DType d, Value y) {
  const DType yd = c.type_of(e.ins.at(1)).dtype();
  return is_int(yd) ? convert_element(c, y, yd, d) : y;
}

// x ** y for a constant float exponent y that square roots and products compute (the slope
// of x ** 1.5 is x ** 0.5), else nullopt. A general pow is exp(y log x) through a libm call
// per element (LLVM has no vector pow), so an n-body step's r2 ** 1.5 was the one scalar loop
// of its gradient. pow's special values are kept: pow(-0, y) and pow(-inf, y) for these y are
// +0 or +inf whatever the sign (sqrt(-0) is -0, sqrt(-inf) NaN), which `+ 0.0` and a select
// give. Each form rounds at most three times, against pow's once (libm powf is within 1 ulp).
std::optional<Value> pow_by_roots(LowerCtx& c, DType d, Value x, double y) {
  auto& b = c.b;
  auto plus_zero = [&](Value v) {
    return Value(b.create<arith::AddFOp>(c.loc, v, c.constant(d, 0.0)));
  };
  auto inv = [&](Value v) { return Value(b.create<arith::DivFOp>(c.loc, c.constant(d, 1.0), v)); };
  auto mul = [&](Value p, Value q) { return Value(b.create<arith::MulFOp>(c.loc, p, q)); };
  const double inf = std::numeric_limits<double>::infinity();
  // pow(-inf, y) is +inf for y > 0 and +0 for y < 0, for every y handled here but the
  // integers, whose forms are exact already.
  auto at_minus_inf = [&](Value v) {
    Value minus_inf =
        b.create<arith::CmpFOp>(c.loc, arith::CmpFPredicate::OEQ, x, c.constant(d, -inf));
    return Value(b.create<arith::SelectOp>(c.loc, minus_inf, c.constant(d, y > 0 ? inf : 0.0), v));
  };
  if (y == 0.0) return c.constant(d, 1.0);  // even for NaN
  if (y == 1.0) return x;
  if (y == 2.0) return mul(x, x);
  if (y == -1.0) return inv(x);
  Value root = b.create<math::SqrtOp>(c.loc, x);
  if (y == 0.5) return at_minus_inf(plus_zero(root));
  if (y == -0.5) return at_minus_inf(inv(plus_zero(root)));
  if (y == 1.5) return at_minus_inf(mul(x, root));  // -0 * -0 is +0
  if (y == -1.5)  // 1 / sqrt(x) / x: no overflow where the result is representable
    return at_minus_inf(b.create<arith::DivFOp>(c.loc, inv(plus_zero(root)), plus_zero(x)));
  return std::nullopt;
}

// The value of a constant splat float operand (a literal exponent, or one broadcast in a
// fused loop), if it is one.
std::optional<double> constant_float(Value v) {
  auto k = v.getDefiningOp<arith::ConstantOp>();
  if (!k) return std::nullopt;
  if (auto f = mlir::dyn_cast<mlir::FloatAttr>(k.getValue())) return f.getValueAsDouble();
  return std::nullopt;
}

// XLA integer division: x/0 = -1 (all bits set), INT_MIN/-1 = INT_MIN, else truncating.
Value int_div(LowerCtx& c, DType d, Value x, Value y) {
  auto& b = c.b;
  Value zero = c.int_constant(d, 0), one = c.int_constant(d, 1), m1 = c.int_constant(d, -1);
  if (is_unsigned(d)) {
    Value y0 = b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::eq, y, zero);
    Value q = b.create<arith::DivUIOp>(c.loc, x, b.create<arith::SelectOp>(c.loc, y0, one, y));
    return b.create<arith::SelectOp>(c.loc, y0, m1, q);
  }
  const int bits = bit_width(d);
  Value imin = c.int_constant(
      d, bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1)));
  Value y0 = b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::eq, y, zero);
  Value ovf = b.create<arith::AndIOp>(
      c.loc, b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::eq, x, imin),
      b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::eq, y, m1));
  Value bad = b.create<arith::OrIOp>(c.loc, y0, ovf);
  Value safe_y = b.create<arith::SelectOp>(c.loc, bad, one, y);
  Value q = b.create<arith::DivSIOp>(c.loc, x, safe_y);
  q = b.create<arith::SelectOp>(c.loc, ovf, imin, q);
  return b.create<arith::SelectOp>(c.loc, y0, m1, q);
}

Value compare(LowerCtx& c, DType d, Value x, Value y, arith::CmpFPredicate fp,
              arith::CmpIPredicate sp, arith::CmpIPredicate up) {
  if (is_float(d)) return c.b.create<arith::CmpFOp>(c.loc, fp, x, y);
  return c.b.create<arith::CmpIOp>(c.loc, d == DType::bool_ || is_unsigned(d) ? up : sp, x, y);
}

void set_compare(LowerTable& t, Prim p, arith::CmpFPredicate fp, arith::CmpIPredicate sp,
                 arith::CmpIPredicate up) {
  set_ew(t, p, [=](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) {
    return compare(c, d, x[0], x[1], fp, sp, up);
  });
}

// Scalar f64 arithmetic for the functions lowered step by step (sin and cos, erf_inv, the
// special functions): each call emits one op at the builder's insertion point.
struct F64Ops {
  LowerCtx& c;
  Value k(double v) const { return c.constant(DType::f64, v); }
  Value add(Value p, Value q) const { return c.b.create<arith::AddFOp>(c.loc, p, q); }
  Value sub(Value p, Value q) const { return c.b.create<arith::SubFOp>(c.loc, p, q); }
  Value mul(Value p, Value q) const { return c.b.create<arith::MulFOp>(c.loc, p, q); }
  Value div(Value p, Value q) const { return c.b.create<arith::DivFOp>(c.loc, p, q); }
  Value fma(Value p, Value q, Value r) const { return c.b.create<math::FmaOp>(c.loc, p, q, r); }
  Value pow(Value p, Value q) const { return c.b.create<math::PowFOp>(c.loc, p, q); }
  Value abs(Value p) const { return c.b.create<math::AbsFOp>(c.loc, p); }
  Value cmp(arith::CmpFPredicate pred, Value p, Value q) const {
    return c.b.create<arith::CmpFOp>(c.loc, pred, p, q);
  }
  Value lt(Value p, Value q) const { return cmp(arith::CmpFPredicate::OLT, p, q); }
  Value sel(Value p, Value t, Value f) const { return c.b.create<arith::SelectOp>(c.loc, p, t, f); }
  Value both(Value p, Value q) const { return c.b.create<arith::AndIOp>(c.loc, p, q); }
  Value either(Value p, Value q) const { return c.b.create<arith::OrIOp>(c.loc, p, q); }
  // An f32 or f64 operand as f64, and an f64 result back as dtype d.
  Value widen(Value v, DType d) const {
    return d == DType::f64 ? v : Value(c.b.create<arith::ExtFOp>(c.loc, c.b.getF64Type(), v));
  }
  Value narrow(Value v, DType d) const {
    return d == DType::f64 ? v : Value(c.b.create<arith::TruncFOp>(c.loc, c.b.getF32Type(), v));
  }
};

// f32 sin and cos without libm, in code that vectorises (LoweringOptions::approximate_math):
// the argument is reduced in f64, r = x - k pi/2 with pi/2 split into three doubles and each
// step an FMA (so k * pi/2 is not rounded), then a Taylor polynomial of r in f64 (error
// below 1e-11 on |r| <= pi/4) picks sin or cos of r by the quadrant k mod 4. Correctly
// rounded to within an ulp while k * 2/pi is exact enough to pick k (|x| below about 1e15;
// docs/backend.md); NaN and infinities give NaN. MLIR's own f32 approximations reduce in f32 and
// are off beyond 1e3.
Value lower_sin_cos_f64(LowerCtx& c, Value x32, bool cosine) {
  auto& b = c.b;
  const auto loc = c.loc;
  const F64Ops op{c};
  auto eq = [&](Value p, double v) { return op.cmp(arith::CmpFPredicate::OEQ, p, op.k(v)); };
  Value x = op.widen(x32, DType::f32);
  Value k = b.create<math::RoundEvenOp>(loc, op.mul(x, op.k(0.63661977236758134308)));
  Value nk = b.create<arith::NegFOp>(loc, k);
  // pi/2 = P1 + P2 + P3 to about 160 bits.
  Value r = op.fma(nk, op.k(1.5707963267948966), x);
  r = op.fma(nk, op.k(6.123233995736766e-17), r);
  r = op.fma(nk, op.k(-1.4973849048591698e-33), r);
  // Beyond |x| ~ 1e15 k is no longer exact and r may be anything: keep the polynomials in
  // range there (the result is then only some value in [-1, 1]; exact_math calls libm).
  Value in_range = op.cmp(arith::CmpFPredicate::ULE, op.abs(r), op.k(1));
  r = op.sel(in_range, r, op.k(0));
  Value r2 = op.mul(r, r);
  // sin r = r + r^3 (S1 + r^2 (S2 + ...)), cos r = 1 + r^2 (C1 + r^2 (C2 + ...)).
  const double s[] = {-1.0 / 6,     1.0 / 120,       -1.0 / 5040,
                      1.0 / 362880, -1.0 / 39916800, 1.0 / 6227020800};
  const double co[] = {-1.0 / 2,       1.0 / 24,        -1.0 / 720,        1.0 / 40320,
                       -1.0 / 3628800, 1.0 / 479001600, -1.0 / 87178291200};
  Value ps = op.k(s[5]);
  for (int i = 4; i >= 0; --i) ps = op.fma(ps, r2, op.k(s[i]));
  Value sin_r = op.fma(op.mul(r, r2), ps, r);
  Value pc = op.k(co[6]);
  for (int i = 5; i >= 0; --i) pc = op.fma(pc, r2, op.k(co[i]));
  Value cos_r = op.fma(r2, pc, op.k(1));
  // Quadrant k mod 4 (cos x = sin(x + pi/2)); NaN compares unequal everywhere and stays NaN.
  Value quadrant = op.add(k, op.k(cosine ? 1 : 0));
  quadrant =
      op.sub(quadrant, op.mul(op.k(4), b.create<math::FloorOp>(loc, op.mul(quadrant, op.k(0.25)))));
  Value neg_sin = b.create<arith::NegFOp>(loc, sin_r);
  Value neg_cos = b.create<arith::NegFOp>(loc, cos_r);
  Value y = op.sel(eq(quadrant, 1), cos_r,
                   op.sel(eq(quadrant, 2), neg_sin, op.sel(eq(quadrant, 3), neg_cos, sin_r)));
  auto narrowed = b.create<arith::TruncFOp>(loc, b.getF32Type(), y);
  mark_transcendental(narrowed);  // a stage of a chain, as math.sin would be
  return narrowed;
}

template <bool kCosine>
Value lower_sin_cos(LowerCtx& c, const Eqn& e, DType d, const std::vector<Value>& x) {
  if (d == DType::f32 && c.options().approximate_math) return lower_sin_cos_f64(c, x[0], kCosine);
  return libm_unary(kCosine ? "cos" : "sin")(c, e, d, x);
}

// erf_inv as the interpreter computes it (runtime/eval_elementwise.cpp): Winitzki's closed form
// refined by four Newton steps in f64, on erf for |x| <= 0.5 and on erfc beyond.
Value lower_erf_inv(LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& xs) {
  auto& b = c.b;
  auto loc = c.loc;
  const F64Ops op{c};
  using P = arith::CmpFPredicate;
  Value x = op.widen(xs[0], d);
  Value a = op.abs(x);
  Value ln = b.create<math::LogOp>(loc, op.mul(op.sub(op.k(1), a), op.add(op.k(1), a)));
  Value t = op.add(op.k(2.0 / (std::numbers::pi * 0.147)), op.mul(ln, op.k(0.5)));
  Value y = b.create<math::SqrtOp>(
      loc,
      op.sub(b.create<math::SqrtOp>(loc, op.sub(op.mul(t, t), op.mul(ln, op.k(1.0 / 0.147)))), t));
  Value central = op.cmp(P::OLE, a, op.k(0.5));
  for (int step = 0; step < 4; ++step) {
    Value slope = op.mul(op.k(1.1283791670955126),
                         b.create<math::ExpOp>(loc, b.create<arith::NegFOp>(loc, op.mul(y, y))));
    Value miss_erf = op.sub(c.call_libm("erf", {y}), a);
    Value miss_erfc = op.sub(op.sub(op.k(1), a), c.call_libm("erfc", {y}));
    Value next = op.sub(y, op.div(op.sel(central, miss_erf, miss_erfc), slope));
    // A vanishing slope (|x| within rounding of 1) keeps the estimate.
    y = op.sel(op.cmp(P::OEQ, slope, op.k(0)), y, next);
  }
  y = b.create<math::CopySignOp>(loc, y, x);
  // Exact ends: 0 -> 0 (keeping its sign), +-1 -> +-inf; NaN and |x| > 1 -> NaN (UGT).
  const double inf = std::numeric_limits<double>::infinity();
  y = op.sel(op.cmp(P::OEQ, a, op.k(0)), x, y);
  y = op.sel(op.cmp(P::OEQ, a, op.k(1)), op.mul(x, op.k(inf)), y);
  y = op.sel(op.cmp(P::UGT, a, op.k(1)), op.k(std::numeric_limits<double>::quiet_NaN()), y);
  return op.narrow(y, d);
}

// i0e / i1e as the interpreter computes them (runtime/special_functions.cpp), in f64: both
// the power series and the asymptotic expansion, each a loop of fixed length, and the one
// for |x| selected (the loops are short next to the threads' startup, and branch-free).
ElemFn lower_bessel_ie(int order) {
  return [order](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& xs) -> Value {
    F64Ops op{c};
    auto& b = c.b;
    Value x = op.widen(xs[0], d);
    Value a = op.abs(x);
    auto term_number = [&](Value iv) -> Value {  // k = iv + 1, as f64
      Value k = b.create<arith::IndexCastUIOp>(c.loc, b.getI64Type(), c.affine_index(iv, 1, 1));
      return b.create<arith::UIToFPOp>(c.loc, b.getF64Type(), k);
    };
    // Power series: term *= (a^2/4) / (k (k + order)).
    Value q = op.mul(op.mul(a, a), op.k(0.25));
    Value first = order == 0 ? op.k(1) : op.mul(a, op.k(0.5));
    auto series = c.loop_with_carry(
        special::kBesselSeriesTerms, {first, first}, [&](Value iv, const std::vector<Value>& cur) {
          Value k = term_number(iv);
          Value term = op.mul(cur[0], op.div(q, op.mul(k, op.add(k, op.k(order)))));
          return std::vector<Value>{term, op.add(cur[1], term)};
        });
    Value small = op.mul(series[1], b.create<math::ExpOp>(c.loc, op.sub(op.k(0), a)));
    // Asymptotic expansion: term *= ((2k-1)^2 - 4 order^2) / (8 a k).
    Value z = op.div(op.k(1), op.mul(op.k(8), a));
    auto asym = c.loop_with_carry(
        special::kBesselAsymptoticTerms, {op.k(1), op.k(1)},
        [&](Value iv, const std::vector<Value>& cur) {
          Value k = term_number(iv);
          Value odd = op.sub(op.mul(op.k(2), k), op.k(1));
          Value term = op.mul(
              cur[0], op.div(op.mul(op.sub(op.mul(odd, odd), op.k(4.0 * order * order)), z), k));
          return std::vector<Value>{term, op.add(cur[1], term)};
        });
    Value large =
        op.div(asym[1], b.create<math::SqrtOp>(c.loc, op.mul(op.k(2 * std::numbers::pi), a)));
    Value y =
        op.sel(op.cmp(arith::CmpFPredicate::OLE, a, op.k(special::kBesselSeriesEnd)), small, large);
    y = op.sel(op.cmp(arith::CmpFPredicate::UNO, x, x), x, y);  // NaN
    if (order == 1) y = b.create<math::CopySignOp>(c.loc, y, x);
    return op.narrow(y, d);
  };
}

// digamma as the interpreter computes it (runtime/special_functions.h), in f64: reflection
// below 0.5, guarded recurrence steps, the asymptotic series; NaN at the poles.
Value lower_digamma(LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& xs) {
  F64Ops op{c};
  auto& b = c.b;
  auto loc = c.loc;
  Value x0 = op.widen(xs[0], d);
  const double pi = std::numbers::pi;
  Value reflect = op.lt(x0, op.k(0.5));
  Value fraction = op.sub(x0, b.create<math::FloorOp>(loc, x0));  // tan's period, exactly
  Value r =
      op.sel(reflect, op.div(op.k(-pi), c.call_libm("tan", {op.mul(op.k(pi), fraction)})), op.k(0));
  Value x = op.sel(reflect, op.sub(op.k(1), x0), x0);
  // The interpreter's recurrence runs while x < kDigammaSeriesFrom; x >= 0.5 here, so that
  // many guarded steps cover it.
  for (int step = 0; step < static_cast<int>(special::kDigammaSeriesFrom); ++step) {
    Value small = op.lt(x, op.k(special::kDigammaSeriesFrom));
    r = op.sel(small, op.sub(r, op.div(op.k(1), x)), r);
    x = op.sel(small, op.add(x, op.k(1)), x);
  }
  Value z = op.div(op.k(1), op.mul(x, x));
  Value acc = op.k(0);
  for (size_t k = std::size(special::kDigammaSeries); k-- > 0;)
    acc = op.add(op.k(special::kDigammaSeries[k]), op.mul(z, acc));
  Value series = op.mul(z, acc);
  Value y = op.sub(op.sub(op.add(r, b.create<math::LogOp>(loc, x)), op.div(op.k(0.5), x)), series);
  Value pole = op.both(op.cmp(arith::CmpFPredicate::OLE, x0, op.k(0)),
                       op.cmp(arith::CmpFPredicate::OEQ, b.create<math::FloorOp>(loc, x0), x0));
  y = op.sel(pole, op.k(std::numeric_limits<double>::quiet_NaN()), y);
  return op.narrow(y, d);
}

// polygamma(m, x) as the interpreter computes it (runtime/eval_elementwise.cpp), in f64: the
// Hurwitz zeta's terms summed in a loop until x >= 16, then the Euler-Maclaurin tail;
// digamma for m = 0; NaN for a non-integer m or x below -1e4, JAX's values at the poles.
Value lower_polygamma(LowerCtx& c, const Eqn& e, DType d, const std::vector<Value>& xs) {
  F64Ops op{c};
  auto& b = c.b;
  auto loc = c.loc;
  const DType f = DType::f64;
  const Value m = op.widen(xs[0], d), x0 = op.widen(xs[1], d);
  const Value s = op.add(m, op.k(1));
  const Value minus_s = b.create<arith::NegFOp>(loc, s);
  // zeta += x^-s; x += 1, while -1e4 <= x < 16.
  const std::vector<Value> summed = c.while_loop(
      {x0, op.k(0)},
      [&](const std::vector<Value>& v) {
        return op.both(op.cmp(arith::CmpFPredicate::OLT, v[0], op.k(16)),
                       op.cmp(arith::CmpFPredicate::OGE, v[0], op.k(-1e4)));
      },
      [&](const std::vector<Value>& v) -> std::vector<Value> {
        return {op.add(v[0], op.k(1)), op.add(v[1], op.pow(v[0], minus_s))};
      });
  const Value x = summed[0];
  Value zeta = summed[1];
  // The tail: z^(1-s)/(s-1) + z^-s/2 + sum_j B_2j/(2j)! s(s+1)...(s+2j-2) z^(-s-2j+1).
  static constexpr double kBernoulliOverFactorial[] = {1.0 / 12,         -1.0 / 720,
                                                       1.0 / 30240,      -1.0 / 1209600,
                                                       1.0 / 47900160,   -691.0 / 1307674368000,
                                                       1.0 / 74724249600};
  zeta = op.add(zeta,
                op.div(op.pow(x, b.create<arith::SubFOp>(loc, op.k(1), s)), op.add(s, op.k(-1))));
  zeta = op.add(zeta, op.mul(op.k(0.5), op.pow(x, minus_s)));
  Value rising = s, power = op.pow(x, op.add(minus_s, op.k(-1)));
  const Value x2 = op.mul(x, x);
  for (int j = 0; j < 7; ++j) {
    zeta = op.add(zeta, op.mul(op.k(kBernoulliOverFactorial[j]), op.mul(rising, power)));
    rising = op.mul(rising, op.mul(op.add(s, op.k(2 * j + 1)), op.add(s, op.k(2 * j + 2))));
    power = op.div(power, x2);
  }
  const Value factorial = b.create<math::ExpOp>(loc, c.call_libm("lgamma", {op.add(m, op.k(1))}));
  const Value half = op.mul(m, op.k(0.5));
  const Value odd = op.cmp(arith::CmpFPredicate::ONE, b.create<math::FloorOp>(loc, half), half);
  Value y = op.mul(op.sel(odd, op.k(1), op.k(-1)), op.mul(factorial, zeta));
  const Value nan = op.k(std::numeric_limits<double>::quiet_NaN());
  const Value pole =
      op.both(op.cmp(arith::CmpFPredicate::OLE, x0, op.k(0)),
              op.cmp(arith::CmpFPredicate::OEQ, b.create<math::FloorOp>(loc, x0), x0));
  y = op.sel(op.cmp(arith::CmpFPredicate::OLT, x0, op.k(-1e4)), nan, y);
  y = op.sel(pole, op.sel(odd, op.k(std::numeric_limits<double>::infinity()), nan), y);
  y = op.sel(op.cmp(arith::CmpFPredicate::OEQ, m, op.k(0)), lower_digamma(c, e, f, {x0}), y);
  const Value integral =
      op.both(op.cmp(arith::CmpFPredicate::OGE, m, op.k(0)),
              op.cmp(arith::CmpFPredicate::OEQ, b.create<math::FloorOp>(loc, m), m));
  y = op.sel(integral, y, nan);  // also NaN for a NaN m
  return op.narrow(y, d);
}

// igamma, igammac and igamma_grad_a as the interpreter computes them
// (runtime/special_functions.cpp), in f64 and step for step: the series where x <= 1 or
// x <= a, else the continued fraction, dP/da carried alongside in forward mode.
enum class IgammaPart { p, q, dp_da };
ElemFn lower_incomplete_gamma(IgammaPart part) {
  return [part](LowerCtx& c, const Eqn& e, DType d, const std::vector<Value>& xs) -> Value {
    F64Ops op{c};
    namespace sp = special;
    auto& b = c.b;
    auto loc = c.loc;
    const DType f = DType::f64;
    mlir::Type f64 = b.getF64Type();
    using P = arith::CmpFPredicate;
    const Value a0 = op.widen(xs[0], d), x0 = op.widen(xs[1], d);
    // Operands outside the domain run the loops on a = x = 1 (a few steps); the selects at the
    // end give their values.
    const Value valid = op.both(op.both(op.cmp(P::OGT, a0, op.k(0)), op.cmp(P::OGT, x0, op.k(0))),
                                op.cmp(P::ONE, x0, op.k(std::numeric_limits<double>::infinity())));
    const Value a = op.sel(valid, a0, op.k(1)), x = op.sel(valid, x0, op.k(1));
    const Value log_x = b.create<math::LogOp>(loc, x);
    const Value use_series = op.either(op.cmp(P::OLE, x, op.k(1)), op.cmp(P::OLE, x, a));
    auto branch = b.create<mlir::scf::IfOp>(loc, mlir::TypeRange{f64, f64, f64}, use_series,
                                            /*withElseRegion=*/true);
    {
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&branch.getThenRegion().front());
      // n, ap, term, dterm, sum, dsum
      auto r = c.while_loop(
          {op.k(0), a, op.k(1), op.k(0), op.k(1), op.k(0)},
          [&](const std::vector<Value>& v) {
            Value more = op.either(
                op.cmp(P::OGT, op.abs(v[2]), op.mul(op.abs(v[4]), op.k(sp::kIgammaEpsilon))),
                op.cmp(P::OGT, op.abs(v[3]), op.mul(op.abs(v[5]), op.k(sp::kIgammaEpsilon))));
            return op.both(op.cmp(P::OLT, v[0], op.k(sp::kIgammaMaxIterations)), more);
          },
          [&](const std::vector<Value>& v) -> std::vector<Value> {
            Value ap = op.add(v[1], op.k(1));
            Value ratio = op.div(x, ap);
            Value dterm = op.mul(op.sub(v[3], op.div(v[2], ap)), ratio);
            Value term = op.mul(v[2], ratio);
            return {op.add(v[0], op.k(1)), ap, term, dterm, op.add(v[4], term),
                    op.add(v[5], dterm)};
          });
      Value a1 = op.add(a, op.k(1));
      Value prefactor = b.create<math::ExpOp>(
          loc, op.sub(op.sub(op.mul(a, log_x), x), c.call_libm("lgamma", {a1})));
      Value p = op.mul(prefactor, r[4]);
      Value dp =
          op.add(op.mul(p, op.sub(log_x, lower_digamma(c, e, f, {a1}))), op.mul(prefactor, r[5]));
      b.create<mlir::scf::YieldOp>(loc, mlir::ValueRange{p, op.sub(op.k(1), p), dp});
    }
    {
      mlir::OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&branch.getElseRegion().front());
      const Value b0 = op.sub(op.add(x, op.k(1)), a);
      const Value d0 = op.div(op.k(1), b0);
      const Value dd0 = op.div(op.k(1), op.mul(b0, b0));  // d/da (1/b) with db = -1
      const Value tiny = op.k(sp::kIgammaTiny);
      // i, b, c, dc, d, dd, h, dh, step, the last change of dh
      auto r = c.while_loop(
          {op.k(1), b0, op.k(1 / sp::kIgammaTiny), op.k(0), d0, dd0, d0, dd0, op.k(0), op.k(1)},
          [&](const std::vector<Value>& v) {
            Value more =
                op.either(op.cmp(P::OGE, op.abs(op.sub(v[8], op.k(1))), op.k(sp::kIgammaEpsilon)),
                          op.cmp(P::OGT, v[9], op.mul(op.abs(v[7]), op.k(sp::kIgammaEpsilon))));
            return op.both(op.cmp(P::OLE, v[0], op.k(sp::kIgammaMaxIterations)), more);
          },
          [&](const std::vector<Value>& v) -> std::vector<Value> {
            Value i = v[0];
            Value an = op.mul(b.create<arith::NegFOp>(loc, i), op.sub(i, a)), dan = i;
            Value bb = op.add(v[1], op.k(2)), db = op.k(-1);
            Value nd = op.add(op.mul(an, v[4]), bb);
            Value dnd = op.add(op.add(op.mul(dan, v[4]), op.mul(an, v[5])), db);
            Value small_d = op.cmp(P::OLT, op.abs(nd), tiny);
            nd = op.sel(small_d, tiny, nd);
            dnd = op.sel(small_d, op.k(0), dnd);
            Value nc = op.add(bb, op.div(an, v[2]));
            Value dnc =
                op.add(db, op.div(op.sub(op.mul(dan, v[2]), op.mul(an, v[3])), op.mul(v[2], v[2])));
            Value small_c = op.cmp(P::OLT, op.abs(nc), tiny);
            nc = op.sel(small_c, tiny, nc);
            dnc = op.sel(small_c, op.k(0), dnc);
            Value dn = op.div(op.k(1), nd);
            Value ddn = b.create<arith::NegFOp>(loc, op.div(dnd, op.mul(nd, nd)));
            Value step = op.mul(dn, nc);
            Value dstep = op.add(op.mul(ddn, nc), op.mul(dn, dnc));
            Value dh = op.add(op.mul(v[7], step), op.mul(v[6], dstep));
            return {op.add(i, op.k(1)),      bb, nc, dnc, dn, ddn, op.mul(v[6], step), dh, step,
                    op.abs(op.sub(dh, v[7]))};
          });
      Value prefactor = b.create<math::ExpOp>(
          loc, op.sub(op.sub(op.mul(a, log_x), x), c.call_libm("lgamma", {a})));
      Value q = op.mul(prefactor, r[6]);
      Value dq =
          op.add(op.mul(q, op.sub(log_x, lower_digamma(c, e, f, {a}))), op.mul(prefactor, r[7]));
      b.create<mlir::scf::YieldOp>(
          loc, mlir::ValueRange{op.sub(op.k(1), q), q, b.create<arith::NegFOp>(loc, dq)});
    }
    Value y = branch.getResult(static_cast<unsigned>(part));
    // The edges, as runtime/special_functions.cpp gives them.
    const double at_zero[] = {0, 1, 0}, at_inf[] = {1, 0, 0};
    const Value nan = op.k(std::numeric_limits<double>::quiet_NaN());
    y = op.sel(op.cmp(P::OEQ, x0, op.k(std::numeric_limits<double>::infinity())),
               op.k(at_inf[static_cast<int>(part)]), y);
    y = op.sel(op.cmp(P::OEQ, x0, op.k(0)), op.k(at_zero[static_cast<int>(part)]), y);
    // NaN for a NaN operand, x < 0 or a <= 0 (UGT/ULT are true on NaN).
    Value bad = op.either(op.cmp(P::ULT, x0, op.k(0)), op.cmp(P::ULE, a0, op.k(0)));
    y = op.sel(bad, nan, y);
    return op.narrow(y, d);
  };
}
}  // namespace

const ElemFn* elementwise_rule(Prim p) {
  lower_table();  // registers the rules on first use
  return elem_table().find(p);
}

// Converts one element from dtype `from` to `to` with XLA semantics: float->int truncates,
// NaN -> 0 and out-of-range saturates; ->bool is x != 0.
Value convert_element(LowerCtx& c, Value x, DType from, DType to) {
  auto& b = c.b;
  auto loc = c.loc;
  if (from == to) return x;
  if (is_complex(from) || is_complex(to)) return convert_complex(c, x, from, to);
  // The 16-bit floats go through f32, where every conversion from or to them is exact or
  // rounds once.
  if (is_half_float(from))
    return convert_element(c, c.b.create<arith::ExtFOp>(c.loc, c.elem_type(DType::f32), x),
                           DType::f32, to);
  if (is_half_float(to))
    return c.b.create<arith::TruncFOp>(c.loc, c.elem_type(to),
                                       convert_element(c, x, from, DType::f32));
  mlir::Type tt = c.elem_type(to);
  if (to == DType::bool_) {
    if (is_float(from))
      return b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNE, x, c.constant(from, 0));
    return b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ne, x, c.int_constant(from, 0));
  }
  if (from == DType::bool_) {
    if (is_float(to)) return b.create<arith::UIToFPOp>(loc, tt, x);
    return b.create<arith::ExtUIOp>(loc, tt, x);
  }
  if (is_float(from) && is_float(to)) {
    if (to == DType::f64) return b.create<arith::ExtFOp>(loc, tt, x);
    return b.create<arith::TruncFOp>(loc, tt, x);
  }
  if (is_int(from) && is_int(to)) {
    // Widening extends by the source's signedness; narrowing keeps the low bits (wraps).
    if (bit_width(to) > bit_width(from)) {
      if (is_unsigned(from)) return b.create<arith::ExtUIOp>(loc, tt, x);
      return b.create<arith::ExtSIOp>(loc, tt, x);
    }
    if (bit_width(to) < bit_width(from)) return b.create<arith::TruncIOp>(loc, tt, x);
    return x;  // same width, other signedness: the same bits
  }
  if (is_int(from)) {
    if (is_unsigned(from)) return b.create<arith::UIToFPOp>(loc, tt, x);
    return b.create<arith::SIToFPOp>(loc, tt, x);
  }
  // float -> int. fptosi/fptoui are poison out of range; the selects never pick it there.
  const int bits = bit_width(to);
  const bool u = is_unsigned(to);
  double lo = u ? 0.0 : -std::ldexp(1.0, bits - 1);
  double hi = std::ldexp(1.0, u ? bits : bits - 1);  // exclusive
  Value r = u ? Value(b.create<arith::FPToUIOp>(loc, tt, x))
              : Value(b.create<arith::FPToSIOp>(loc, tt, x));
  // The dtype's largest and smallest values (int_constant keeps the low bits).
  Value imax = c.int_constant(to, u ? -1 : static_cast<int64_t>((uint64_t{1} << (bits - 1)) - 1));
  Value imin = c.int_constant(to, u ? 0 : static_cast<int64_t>(uint64_t{1} << (bits - 1)));
  Value too_big = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGE, x, c.constant(from, hi));
  Value too_small =
      b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, x, c.constant(from, lo));
  Value nan = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNO, x, x);
  r = b.create<arith::SelectOp>(loc, too_big, imax, r);
  r = b.create<arith::SelectOp>(loc, too_small, imin, r);
  return b.create<arith::SelectOp>(loc, nan, c.int_constant(to, 0), r);
}

void register_elementwise_lowerings(LowerTable& t) {
  // ---- unary
  set_ew(t, Prim::neg, [](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
    if (is_float(d)) return c.b.create<arith::NegFOp>(c.loc, x[0]);
    return c.b.create<arith::SubIOp>(c.loc, c.int_constant(d, 0), x[0]);
  });
  set_ew(t, Prim::exp, unary_op<math::ExpOp>());
  set_ew(t, Prim::log, lower_log);
  set_ew(t, Prim::sin, lower_sin_cos<false>);
  set_ew(t, Prim::cos, lower_sin_cos<true>);
  set_ew(t, Prim::sqrt, unary_op<math::SqrtOp>());
  set_ew(t, Prim::floor, unary_op<math::FloorOp>());
  set_ew(t, Prim::ceil, unary_op<math::CeilOp>());
  set_ew(t, Prim::log1p, approximated_or_libm<math::Log1pOp>("log1p"));
  set_ew(t, Prim::expm1, approximated_or_libm<math::ExpM1Op>("expm1"));
  set_ew(t, Prim::tan, libm_unary("tan"));
  set_ew(t, Prim::tanh, approximated_or_libm<math::TanhOp>("tanh"));
  set_ew(t, Prim::erf, approximated_or_libm<math::ErfOp>("erf"));
  for (auto [p, name] : {std::pair{Prim::asin, "asin"},
                         {Prim::acos, "acos"},
                         {Prim::atan, "atan"},
                         {Prim::sinh, "sinh"},
                         {Prim::cosh, "cosh"},
                         {Prim::asinh, "asinh"},
                         {Prim::acosh, "acosh"},
                         {Prim::atanh, "atanh"},
                         {Prim::erfc, "erfc"},
                         {Prim::cbrt, "cbrt"},
                         {Prim::exp2, "exp2"}})
    set_ew(t, p, libm_unary(name));
  set_ew(t, Prim::population_count, unary_op<math::CtPopOp>());
  set_ew(t, Prim::bitcast_convert_type,
         [](LowerCtx& c, const Eqn& e, DType, const std::vector<Value>& x) -> Value {
           return c.b.create<arith::BitcastOp>(c.loc, c.elem_type(e.params.get<DType>("new_dtype")),
                                               x[0]);
         });
  set_ew(t, Prim::erf_inv, lower_erf_inv);
  set_ew(t, Prim::lgamma, libm_unary("lgamma"));
  set_ew(t, Prim::nextafter, libm_unary("nextafter"));
  set_ew(t, Prim::digamma, lower_digamma);
  set_ew(t, Prim::bessel_i0e, lower_bessel_ie(0));
  set_ew(t, Prim::bessel_i1e, lower_bessel_ie(1));
  set_ew(t, Prim::polygamma, lower_polygamma);
  set_ew(t, Prim::igamma, lower_incomplete_gamma(IgammaPart::p));
  set_ew(t, Prim::igammac, lower_incomplete_gamma(IgammaPart::q));
  set_ew(t, Prim::igamma_grad_a, lower_incomplete_gamma(IgammaPart::dp_da));
  set_ew(t, Prim::is_finite,
         [](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
           // |x| < inf is false for inf and NaN (an ordered comparison).
           Value a = c.b.create<math::AbsFOp>(c.loc, x[0]);
           return c.b.create<arith::CmpFOp>(c.loc, arith::CmpFPredicate::OLT, a,
                                            c.constant(d, std::numeric_limits<double>::infinity()));
         });
  set_ew(t, Prim::rsqrt,
         [](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
           Value s = c.b.create<math::SqrtOp>(c.loc, x[0]);
           return c.b.create<arith::DivFOp>(c.loc, c.constant(d, 1), s);
         });
  set_ew(t, Prim::logistic,
         [](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
           Value e = c.b.create<math::ExpOp>(c.loc, c.b.create<arith::NegFOp>(c.loc, x[0]));
           Value den = c.b.create<arith::AddFOp>(c.loc, c.constant(d, 1), e);
           return c.b.create<arith::DivFOp>(c.loc, c.constant(d, 1), den);
         });
  set_ew(t, Prim::abs, [](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
    if (is_float(d)) return c.b.create<math::AbsFOp>(c.loc, x[0]);
    if (is_unsigned(d)) return x[0];
    return c.b.create<math::AbsIOp>(c.loc, x[0]);
  });
  set_ew(t, Prim::sign, [](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
    // 1 / -1 / x itself (0 keeps its sign, NaN stays NaN).
    auto& b = c.b;
    Value zero = c.constant(d, 0);
    Value gt = compare(c, d, x[0], zero, arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt,
                       arith::CmpIPredicate::ugt);
    Value lt = compare(c, d, x[0], zero, arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt,
                       arith::CmpIPredicate::ult);
    Value r = b.create<arith::SelectOp>(c.loc, lt, c.constant(d, -1), x[0]);
    return b.create<arith::SelectOp>(c.loc, gt, c.constant(d, 1), r);
  });
  set_ew(t, Prim::round,
         [](LowerCtx& c, const Eqn& e, DType, const std::vector<Value>& x) -> Value {
           if (e.params.get_or<int64_t>("rounding_method", 0) == 1)
             return c.b.create<math::RoundEvenOp>(c.loc, x[0]);
           return c.b.create<math::RoundOp>(c.loc, x[0]);
         });
  set_ew(t, Prim::not_, [](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
    Value ones = d == DType::bool_ ? c.int_constant(d, 1) : c.int_constant(d, -1);
    return c.b.create<arith::XOrIOp>(c.loc, x[0], ones);
  });
  set_ew(t, Prim::integer_pow,
         [](LowerCtx& c, const Eqn& e, DType d, const std::vector<Value>& x) -> Value {
           // Square-and-multiply, the interpreter's multiplication order (also complex).
           int64_t y = e.params.get<int64_t>("y");
           if (y < 0 && !is_inexact(d)) fail_eqn(e, "a negative exponent needs a float operand");
           if (y == 0) return c.constant(d, 1);
           uint64_t n = y < 0 ? 0 - static_cast<uint64_t>(y) : static_cast<uint64_t>(y);
           Value base = x[0], acc;
           while (n > 0) {
             if (n & 1) acc = acc ? c.mul(d, acc, base) : base;
             n >>= 1;
             if (n > 0) base = c.mul(d, base, base);
           }
           if (y > 0) return acc;
           if (is_complex(d)) return c.b.create<mlir::complex::DivOp>(c.loc, c.constant(d, 1), acc);
           return c.b.create<arith::DivFOp>(c.loc, c.constant(d, 1), acc);
         });
  set_ew(t, Prim::convert_element_type,
         [](LowerCtx& c, const Eqn& e, DType d, const std::vector<Value>& x) -> Value {
           return convert_element(c, x[0], d, c.type_of(e.outs[0]).dtype());
         });
  // Complex numbers in or out always: complex_aware gives them their complex form.
  for (Prim p : {Prim::real, Prim::imag, Prim::conj, Prim::complex})
    set_ew(t, p, [](LowerCtx&, const Eqn& e, DType, const std::vector<Value>&) -> Value {
      fail_eqn(e, "expected a complex operand or result");
    });
  auto identity = [](LowerCtx& c, const Eqn& e) {
    // Values are immutable, so the result can share the operand's buffer.
    if (e.ins.size() != 1 || e.outs.size() != 1) fail_eqn(e, "expected one operand");
    c.bind(e.outs[0], c.buffer(e.ins[0]));
  };
  t.set(Prim::stop_gradient, identity);
  t.set(Prim::copy, identity);
  t.set(Prim::checkpoint_name, identity);

  // ---- binary
  set_ew(t, Prim::add, float_or_int<arith::AddFOp, arith::AddIOp>());
  set_ew(t, Prim::add_any, float_or_int<arith::AddFOp, arith::AddIOp>());
  set_ew(t, Prim::sub, float_or_int<arith::SubFOp, arith::SubIOp>());
  set_ew(t, Prim::mul, float_or_int<arith::MulFOp, arith::MulIOp>());
  for (auto [p, r] : {std::pair{Prim::max, Reducer::max}, {Prim::min, Reducer::min}})
    set_ew(t, p, [r](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) {
      return combine(c, d, r, x[0], x[1]);
    });
  set_ew(t, Prim::div, [](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
    if (is_float(d)) return c.b.create<arith::DivFOp>(c.loc, x[0], x[1]);
    return int_div(c, d, x[0], x[1]);
  });
  set_ew(t, Prim::pow,
         [](LowerCtx& c, const Eqn& e, DType d, const std::vector<Value>& x) -> Value {
           if (is_float(d) && c.options().approximate_math)
             if (std::optional<double> y = constant_float(x[1]))
               if (std::optional<Value> r = pow_by_roots(c, d, x[0], *y)) return *r;
           return c.b.create<math::PowFOp>(c.loc, x[0], pow_exponent(c, e, d, x[1]));
         });
  set_ew(t, Prim::atan2, libm_unary("atan2"));
  set_ew(t, Prim::rem, [](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
    if (is_float(d)) return c.call_libm(d == DType::f32 ? "fmodf" : "fmod", x);
    auto& b = c.b;
    if (is_unsigned(d)) {  // x rem 0 = x
      Value y0 =
          b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::eq, x[1], c.int_constant(d, 0));
      Value r = b.create<arith::RemUIOp>(
          c.loc, x[0], b.create<arith::SelectOp>(c.loc, y0, c.int_constant(d, 1), x[1]));
      return b.create<arith::SelectOp>(c.loc, y0, x[0], r);
    }
    // XLA: x rem 0 = x, x rem -1 = 0 (also for INT_MIN, where remsi would trap).
    Value y0 = b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::eq, x[1], c.int_constant(d, 0));
    Value ym1 =
        b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::eq, x[1], c.int_constant(d, -1));
    Value bad = b.create<arith::OrIOp>(c.loc, y0, ym1);
    Value safe_y = b.create<arith::SelectOp>(c.loc, bad, c.int_constant(d, 1), x[1]);
    Value r = b.create<arith::RemSIOp>(c.loc, x[0], safe_y);
    r = b.create<arith::SelectOp>(c.loc, ym1, c.int_constant(d, 0), r);
    return b.create<arith::SelectOp>(c.loc, y0, x[0], r);
  });
  set_ew(t, Prim::xor_, binary_op<arith::XOrIOp>());
  // Shifts: amounts read as unsigned; the bit width or more shifts everything out (XLA).
  auto shift = [](Prim p) {
    return [p](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
      auto& b = c.b;
      const int bits = bit_width(d);
      Value out_of_range =
          b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::uge, x[1], c.int_constant(d, bits));
      Value amount =
          b.create<arith::SelectOp>(c.loc, out_of_range, c.int_constant(d, bits - 1), x[1]);
      if (p == Prim::shift_right_arithmetic)  // shifting by bits-1 leaves the sign everywhere
        return b.create<arith::ShRSIOp>(c.loc, x[0], amount);
      Value r = p == Prim::shift_left ? Value(b.create<arith::ShLIOp>(c.loc, x[0], amount))
                                      : Value(b.create<arith::ShRUIOp>(c.loc, x[0], amount));
      return b.create<arith::SelectOp>(c.loc, out_of_range, c.int_constant(d, 0), r);
    };
  };
  for (Prim p : {Prim::shift_left, Prim::shift_right_logical, Prim::shift_right_arithmetic})
    set_ew(t, p, shift(p));
  set_ew(t, Prim::and_, binary_op<arith::AndIOp>());
  set_ew(t, Prim::or_, binary_op<arith::OrIOp>());
  using FP = arith::CmpFPredicate;
  using IP = arith::CmpIPredicate;
  set_compare(t, Prim::eq, FP::OEQ, IP::eq, IP::eq);
  set_compare(t, Prim::ne, FP::UNE, IP::ne, IP::ne);
  set_compare(t, Prim::lt, FP::OLT, IP::slt, IP::ult);
  set_compare(t, Prim::le, FP::OLE, IP::sle, IP::ule);
  set_compare(t, Prim::gt, FP::OGT, IP::sgt, IP::ugt);
  set_compare(t, Prim::ge, FP::OGE, IP::sge, IP::uge);

  // select_n p c0 c1 ...: bool p picks c1 when true; an int p picks c_p, clamped.
  set_ew(t, Prim::select_n,
         [](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) -> Value {
           if (d == DType::bool_) return c.b.create<arith::SelectOp>(c.loc, x[0], x[2], x[1]);
           Value r = x[1];
           for (size_t k = 2; k < x.size(); ++k) {
             Value ge = c.b.create<arith::CmpIOp>(c.loc, IP::sge, x[0],
                                                  c.int_constant(d, static_cast<int64_t>(k - 1)));
             r = c.b.create<arith::SelectOp>(c.loc, ge, x[k], r);
           }
           return r;
         });
}

}  // namespace refjit::backend

namespace refjit {
bool has_elementwise_lowering(Prim p) { return backend::elementwise_rule(p) != nullptr; }
}  // namespace refjit
