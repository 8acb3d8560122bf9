// Native code for complex numbers (c64, c128): the elementwise rules' complex forms, and
// conversions to and from complex dtypes. Most are ops of MLIR's complex dialect, which its
// complex-to-standard and complex-to-llvm conversions lower (native.cpp); where the dialect
// has no op (asin, sinh, ...), the principal-branch formulas std::complex follows too, so
// compiled code and the interpreter (runtime/eval_elementwise.cpp) agree.
#include <numbers>

#include "backend/lowering.h"

namespace refjit::backend {
namespace {

namespace complex = mlir::complex;

// Builds on one complex dtype: the part type's and the complex type's values.
struct Cx {
  LowerCtx& c;
  DType d;  // c64 or c128

  mlir::Type type() const { return c.elem_type(d); }
  DType part() const { return real_dtype(d); }
  Value re(Value z) const { return c.b.create<complex::ReOp>(c.loc, z); }
  Value im(Value z) const { return c.b.create<complex::ImOp>(c.loc, z); }
  Value make(Value x, Value y) const { return c.b.create<complex::CreateOp>(c.loc, type(), x, y); }
  Value k(double re, double im = 0.0) const { return c.complex_constant(d, re, im); }
  Value add(Value a, Value b) const { return c.b.create<complex::AddOp>(c.loc, a, b); }
  Value sub(Value a, Value b) const { return c.b.create<complex::SubOp>(c.loc, a, b); }
  Value mul(Value a, Value b) const { return c.b.create<complex::MulOp>(c.loc, a, b); }
  Value div(Value a, Value b) const { return c.b.create<complex::DivOp>(c.loc, a, b); }
  Value neg(Value a) const { return c.b.create<complex::NegOp>(c.loc, a); }
  Value exp(Value a) const { return c.b.create<complex::ExpOp>(c.loc, a); }
  Value log(Value a) const { return c.b.create<complex::LogOp>(c.loc, a); }
  Value sqrt(Value a) const { return c.b.create<complex::SqrtOp>(c.loc, a); }
  Value times_i(Value a) const { return make(c.b.create<arith::NegFOp>(c.loc, im(a)), re(a)); }
  // A real libm function of one part (sinhf / sinh).
  Value libm(const std::string& name, Value x) const {
    return c.call_libm(part() == DType::f32 ? name + "f" : name, {x});
  }
};

// A rule written with Cx on the operand's dtype.
ElemFn with_cx(std::function<Value(const Cx&, const std::vector<Value>&)> f) {
  return [f = std::move(f)](LowerCtx& c, const Eqn&, DType d, const std::vector<Value>& x) {
    return f(Cx{c, d}, x);
  };
}

// sinh(x + iy) = sinh x cos y + i cosh x sin y; cosh(x + iy) = cosh x cos y + i sinh x sin y.
Value sinh_or_cosh(const Cx& z, Value v, bool cosh) {
  auto& b = z.c.b;
  Value x = z.re(v), y = z.im(v);
  Value sh = z.libm("sinh", x), ch = z.libm("cosh", x);
  Value cy = b.create<math::CosOp>(z.c.loc, y), sy = b.create<math::SinOp>(z.c.loc, y);
  Value r = b.create<arith::MulFOp>(z.c.loc, cosh ? ch : sh, cy);
  Value i = b.create<arith::MulFOp>(z.c.loc, cosh ? sh : ch, sy);
  return z.make(r, i);
}

// asin z = -i log(iz + sqrt(1 - z^2)).
Value asin(const Cx& z, Value v) {
  Value root = z.sqrt(z.sub(z.k(1), z.mul(v, v)));
  Value l = z.log(z.add(z.times_i(v), root));
  return z.neg(z.times_i(l));
}

RuleTable<ElemFn> make_table() {
  RuleTable<ElemFn> t;
  t.set(Prim::neg, unary_op<complex::NegOp>());
  t.set(Prim::exp, unary_op<complex::ExpOp>());
  t.set(Prim::log, unary_op<complex::LogOp>());
  t.set(Prim::log1p, unary_op<complex::Log1pOp>());
  t.set(Prim::expm1, unary_op<complex::Expm1Op>());
  t.set(Prim::sin, unary_op<complex::SinOp>());
  t.set(Prim::cos, unary_op<complex::CosOp>());
  t.set(Prim::tan, unary_op<complex::TanOp>());
  t.set(Prim::tanh, unary_op<complex::TanhOp>());
  t.set(Prim::sqrt, unary_op<complex::SqrtOp>());
  t.set(Prim::rsqrt, unary_op<complex::RsqrtOp>());
  t.set(Prim::sign, unary_op<complex::SignOp>());
  t.set(Prim::abs, unary_op<complex::AbsOp>());
  t.set(Prim::real, unary_op<complex::ReOp>());
  t.set(Prim::imag, unary_op<complex::ImOp>());
  t.set(Prim::logistic, with_cx([](const Cx& z, const std::vector<Value>& x) {
          return z.div(z.k(1), z.add(z.k(1), z.exp(z.neg(x[0]))));
        }));
  t.set(Prim::exp2, with_cx([](const Cx& z, const std::vector<Value>& x) {
          return z.exp(z.mul(x[0], z.k(std::numbers::ln2)));
        }));
  t.set(Prim::sinh, with_cx([](const Cx& z, const std::vector<Value>& x) {
          return sinh_or_cosh(z, x[0], false);
        }));
  t.set(Prim::cosh, with_cx([](const Cx& z, const std::vector<Value>& x) {
          return sinh_or_cosh(z, x[0], true);
        }));
  t.set(Prim::asin,
        with_cx([](const Cx& z, const std::vector<Value>& x) { return asin(z, x[0]); }));
  // acos z = pi/2 - asin z.
  t.set(Prim::acos, with_cx([](const Cx& z, const std::vector<Value>& x) {
          return z.sub(z.k(std::numbers::pi / 2), asin(z, x[0]));
        }));
  // atan z = (i/2) (log(1 - iz) - log(1 + iz)).
  t.set(Prim::atan, with_cx([](const Cx& z, const std::vector<Value>& x) {
          Value iz = z.times_i(x[0]);
          Value diff = z.sub(z.log(z.sub(z.k(1), iz)), z.log(z.add(z.k(1), iz)));
          return z.mul(z.k(0, 0.5), diff);
        }));
  // asinh z = log(z + sqrt(z^2 + 1)); acosh z = log(z + sqrt(z + 1) sqrt(z - 1));
  // atanh z = (log(1 + z) - log(1 - z)) / 2.
  t.set(Prim::asinh, with_cx([](const Cx& z, const std::vector<Value>& x) {
          return z.log(z.add(x[0], z.sqrt(z.add(z.mul(x[0], x[0]), z.k(1)))));
        }));
  t.set(Prim::acosh, with_cx([](const Cx& z, const std::vector<Value>& x) {
          Value r = z.mul(z.sqrt(z.add(x[0], z.k(1))), z.sqrt(z.sub(x[0], z.k(1))));
          return z.log(z.add(x[0], r));
        }));
  t.set(Prim::atanh, with_cx([](const Cx& z, const std::vector<Value>& x) {
          Value diff = z.sub(z.log(z.add(z.k(1), x[0])), z.log(z.sub(z.k(1), x[0])));
          return z.mul(diff, z.k(0.5));
        }));
  // conj: of a real float, that value as a complex number.
  t.set(Prim::conj, [](LowerCtx& c, const Eqn& e, DType d, const std::vector<Value>& x) -> Value {
    if (is_complex(d)) return c.b.create<complex::ConjOp>(c.loc, x[0]);
    return convert_element(c, x[0], d, c.type_of(e.outs[0]).dtype());
  });
  t.set(Prim::complex, [](LowerCtx& c, const Eqn& e, DType, const std::vector<Value>& x) -> Value {
    return c.b.create<complex::CreateOp>(c.loc, c.elem_type(c.type_of(e.outs[0]).dtype()), x[0],
                                         x[1]);
  });
  for (Prim p : {Prim::add, Prim::add_any}) t.set(p, binary_op<complex::AddOp>());
  t.set(Prim::sub, binary_op<complex::SubOp>());
  t.set(Prim::mul, binary_op<complex::MulOp>());
  t.set(Prim::div, binary_op<complex::DivOp>());
  t.set(Prim::pow, [](LowerCtx& c, const Eqn& e, DType d, const std::vector<Value>& x) -> Value {
    const DType yd = c.type_of(e.ins.at(1)).dtype();
    Value y = is_int(yd) ? convert_element(c, x[1], yd, d) : x[1];
    return c.b.create<complex::PowOp>(c.loc, x[0], y);
  });
  t.set(Prim::eq, binary_op<complex::EqualOp>());
  t.set(Prim::ne, binary_op<complex::NotEqualOp>());
  return t;
}

}  // namespace

const ElemFn* complex_elementwise_rule(Prim p) {
  static const RuleTable<ElemFn> table = make_table();
  return table.find(p);
}

Value convert_complex(LowerCtx& c, Value x, DType from, DType to) {
  if (is_complex(from) && is_complex(to)) {
    if (from == to) return x;
    const Cx a{c, from};
    return Cx{c, to}.make(convert_element(c, a.re(x), a.part(), real_dtype(to)),
                          convert_element(c, a.im(x), a.part(), real_dtype(to)));
  }
  if (is_complex(to)) {  // a real number: its value as the real part
    const Cx z{c, to};
    return z.make(convert_element(c, x, from, z.part()), c.constant(z.part(), 0.0));
  }
  // complex -> real: the real part, converted (bool: nonzero), as XLA converts.
  const Cx z{c, from};
  if (to == DType::bool_) return c.b.create<complex::NotEqualOp>(c.loc, x, z.k(0));
  return convert_element(c, z.re(x), z.part(), to);
}

}  // namespace refjit::backend
