// JVP rules of the elementwise primitives: t_out = f'(x) * t, the factor computed on the
// primal side so that linearize saves it as a residual.
#include <fmt/format.h>

#include "passes/ad/jvp_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

using Tangents = std::vector<MaybeAtom>;

// Registers a unary rule t_out = t * factor(x, y) (factor on the primal side).
void unary(JvpRuleTable& t, Prim p, std::function<Atom(Emitter&, Atom x, Atom y)> factor) {
  t.set(p, {[factor](JvpCtx& c, JvpArgs& a) -> Tangents {
          if (!a.tangents[0]) return {std::nullopt};
          Atom f = factor(c.p, a.primals[0], a.primal_outs[0]);
          return {c.t.mul(*a.tangents[0], f)};
        }});
}

void zero_rule(JvpRuleTable& t, Prim p) {
  t.set(p, {[](JvpCtx&, JvpArgs& a) { return Tangents(a.eqn.outs.size()); }});
}

// Brings a tangent of one operand of a broadcasting binary op to the output's shape.
Atom to_out_shape(Emitter& e, Atom t, const JvpArgs& a) {
  return e.broadcast_to(t, e.array_type_of(a.primal_outs[0]).shape);
}

// Sum of optional tangent contributions (nullopt = zero).
MaybeAtom add_tangents(Emitter& e, MaybeAtom x, MaybeAtom y) {
  if (!x) return y;
  if (!y) return x;
  return e.add(*x, *y);
}

}  // namespace

void register_elementwise_jvp_rules(JvpRuleTable& t) {
  auto d = [](Emitter& e, const Atom& x) { return e.array_type_of(x).dtype; };
  t.set(Prim::neg, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          if (!a.tangents[0]) return {std::nullopt};
          return {c.t.neg(*a.tangents[0])};
        }});
  unary(t, Prim::exp, [](Emitter&, Atom, Atom y) { return y; });
  unary(t, Prim::log, [d](Emitter& e, Atom x, Atom) { return e.div(e.scalar(d(e, x), 1.0), x); });
  unary(t, Prim::log1p, [d](Emitter& e, Atom x, Atom) {
    return e.div(e.scalar(d(e, x), 1.0), e.add(x, e.scalar(d(e, x), 1.0)));
  });
  unary(t, Prim::expm1, [d](Emitter& e, Atom, Atom y) { return e.add(y, e.scalar(d(e, y), 1.0)); });
  unary(t, Prim::sin, [](Emitter& e, Atom x, Atom) { return e.unary(Prim::cos, x); });
  unary(t, Prim::cos, [](Emitter& e, Atom x, Atom) { return e.neg(e.unary(Prim::sin, x)); });
  unary(t, Prim::tan,
        [d](Emitter& e, Atom, Atom y) { return e.add(e.scalar(d(e, y), 1.0), e.mul(y, y)); });
  unary(t, Prim::tanh,
        [d](Emitter& e, Atom, Atom y) { return e.sub(e.scalar(d(e, y), 1.0), e.mul(y, y)); });
  unary(t, Prim::logistic,
        [d](Emitter& e, Atom, Atom y) { return e.mul(y, e.sub(e.scalar(d(e, y), 1.0), y)); });
  unary(t, Prim::sqrt, [d](Emitter& e, Atom, Atom y) { return e.div(e.scalar(d(e, y), 0.5), y); });
  unary(t, Prim::rsqrt,
        [d](Emitter& e, Atom x, Atom y) { return e.mul(e.scalar(d(e, y), -0.5), e.div(y, x)); });
  // abs: of a real x, +t where x >= 0 and -t elsewhere (1 at 0, as JAX's rule); of a
  // complex z, real(conj(z) t) / |z|, with |z| = 0 read as 1.
  t.set(Prim::abs, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          if (!a.tangents[0]) return {std::nullopt};
          Atom x = a.primals[0];
          const ArrayType xt = c.p.array_type_of(x);
          if (!is_complex(xt.dtype)) {
            Atom non_negative = c.p.emit1(Prim::ge, {x, c.p.scalar(xt.dtype, 0.0)});
            Atom slope = c.p.select(non_negative, {c.p.full(xt, -1.0), c.p.full(xt, 1.0)});
            return {c.t.mul(*a.tangents[0], slope)};
          }
          const ArrayType yt = c.p.array_type_of(a.primal_outs[0]);
          Atom is_zero = c.p.emit1(Prim::eq, {a.primal_outs[0], c.p.scalar(yt.dtype, 0.0)});
          Atom safe = c.p.select(is_zero, {a.primal_outs[0], c.p.full(yt, 1.0)});
          Atom factor = c.p.div(c.p.emit1(Prim::conj, {x}, Params{{"input_dtype", xt.dtype}}),
                                c.p.convert(safe, xt.dtype));
          return {c.t.unary(Prim::real, c.t.mul(*a.tangents[0], factor))};
        }});
  // 1 / sqrt(1 - x^2), -1 / sqrt(1 - x^2), 1 / (1 + x^2)
  auto one_minus_sq = [d](Emitter& e, Atom x) {
    return e.sub(e.scalar(d(e, x), 1.0), e.mul(x, x));
  };
  unary(t, Prim::asin, [one_minus_sq](Emitter& e, Atom x, Atom) {
    return e.unary(Prim::rsqrt, one_minus_sq(e, x));
  });
  unary(t, Prim::acos, [one_minus_sq](Emitter& e, Atom x, Atom) {
    return e.neg(e.unary(Prim::rsqrt, one_minus_sq(e, x)));
  });
  unary(t, Prim::atan, [d](Emitter& e, Atom x, Atom) {
    return e.div(e.scalar(d(e, x), 1.0), e.add(e.scalar(d(e, x), 1.0), e.mul(x, x)));
  });
  unary(t, Prim::sinh, [](Emitter& e, Atom x, Atom) { return e.unary(Prim::cosh, x); });
  unary(t, Prim::cosh, [](Emitter& e, Atom x, Atom) { return e.unary(Prim::sinh, x); });
  // 1 / sqrt(x^2 + 1), 1 / sqrt(x^2 - 1), 1 / (1 - x^2), as JAX writes them (the same
  // branches for complex x)
  unary(t, Prim::asinh, [d](Emitter& e, Atom x, Atom) {
    return e.unary(Prim::rsqrt, e.add(e.mul(x, x), e.scalar(d(e, x), 1.0)));
  });
  unary(t, Prim::acosh, [d](Emitter& e, Atom x, Atom) {
    return e.unary(Prim::rsqrt, e.sub(e.mul(x, x), e.scalar(d(e, x), 1.0)));
  });
  unary(t, Prim::atanh, [d, one_minus_sq](Emitter& e, Atom x, Atom) {
    return e.div(e.scalar(d(e, x), 1.0), one_minus_sq(e, x));
  });
  // erf' = 2/sqrt(pi) exp(-x^2); erfc' = -erf'
  auto erf_slope = [d](Emitter& e, Atom x) {
    return e.mul(e.scalar(d(e, x), 1.1283791670955126), e.unary(Prim::exp, e.neg(e.mul(x, x))));
  };
  unary(t, Prim::erf, [erf_slope](Emitter& e, Atom x, Atom) { return erf_slope(e, x); });
  unary(t, Prim::erfc, [erf_slope](Emitter& e, Atom x, Atom) { return e.neg(erf_slope(e, x)); });
  // cbrt' = 1 / (3 y^2); exp2' = ln 2 * y
  unary(t, Prim::cbrt,
        [d](Emitter& e, Atom, Atom y) { return e.div(e.scalar(d(e, y), 1.0 / 3.0), e.mul(y, y)); });
  unary(t, Prim::lgamma, [](Emitter& e, Atom x, Atom) { return e.unary(Prim::digamma, x); });
  // digamma' = polygamma(1, x); polygamma(m, x)' = polygamma(m + 1, x) in x. The order m is an
  // integer in all but type: like JAX, refjit does not differentiate with respect to it.
  unary(t, Prim::digamma, [d](Emitter& e, Atom x, Atom) {
    return e.emit1(Prim::polygamma, {e.scalar(d(e, x), 1.0), x});
  });
  t.set(Prim::polygamma, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          if (c.depends_on_tangents(a.tangents[0]))
            throw Error(
                fmt::format("{}: polygamma is not differentiable with respect to its "
                            "order m (operand 0); wrap m in stop_gradient",
                            c.where));
          if (!a.tangents[1]) return {std::nullopt};
          Atom m = a.primals[0];
          Atom next = c.p.add(m, c.p.scalar(c.p.array_type_of(m).dtype, 1.0));
          Atom slope = c.p.emit1(Prim::polygamma, {next, a.primals[1]});
          return {c.t.mul(to_out_shape(c.t, *a.tangents[1], a), slope)};
        }});
  // JAX's rules: i0e' = i1e(x) - sign(x) i0e(x); i1e' = i0e(x) - i1e(x) (sign(x) + 1/x), with
  // x clamped away from 0 to the dtype's epsilon and the slope 0.5 there.
  unary(t, Prim::bessel_i0e, [](Emitter& e, Atom x, Atom y) {
    return e.sub(e.unary(Prim::bessel_i1e, x), e.mul(e.unary(Prim::sign, x), y));
  });
  unary(t, Prim::bessel_i1e, [d](Emitter& e, Atom x, Atom y) {
    const ArrayType xt = e.array_type_of(x);
    const double eps = xt.dtype == DType::f64    ? 2.220446049250313e-16
                       : xt.dtype == DType::f16  ? 0.0009765625
                       : xt.dtype == DType::bf16 ? 0.0078125
                                                 : 1.1920928955078125e-07;
    Atom not_tiny = e.emit1(Prim::gt, {e.unary(Prim::abs, x), e.scalar(d(e, x), eps)});
    Atom safe = e.select(not_tiny, {e.full(xt, eps), x});
    Atom slope =
        e.sub(e.unary(Prim::bessel_i0e, safe),
              e.mul(y, e.add(e.unary(Prim::sign, safe), e.div(e.scalar(d(e, x), 1.0), safe))));
    return e.select(not_tiny, {e.full(xt, 0.5), slope});
  });
  // erf_inv' = sqrt(pi)/2 exp(y^2)
  unary(t, Prim::erf_inv, [d](Emitter& e, Atom, Atom y) {
    return e.mul(e.scalar(d(e, y), 0.88622692545275801), e.unary(Prim::exp, e.mul(y, y)));
  });
  unary(t, Prim::exp2,
        [d](Emitter& e, Atom, Atom y) { return e.mul(y, e.scalar(d(e, y), 0.6931471805599453)); });
  for (Prim p : {Prim::sign,
                 Prim::floor,
                 Prim::ceil,
                 Prim::round,
                 Prim::not_,
                 Prim::stop_gradient,
                 Prim::eq,
                 Prim::ne,
                 Prim::lt,
                 Prim::le,
                 Prim::gt,
                 Prim::ge,
                 Prim::and_,
                 Prim::or_,
                 Prim::iota,
                 Prim::argmax,
                 Prim::is_finite,
                 Prim::population_count,
                 Prim::bitcast_convert_type,
                 Prim::xor_,
                 Prim::nextafter,
                 Prim::shift_left,
                 Prim::shift_right_logical,
                 Prim::shift_right_arithmetic})
    zero_rule(t, p);
  t.set(Prim::integer_pow, {[d](JvpCtx& c, JvpArgs& a) -> Tangents {
          if (!a.tangents[0]) return {std::nullopt};
          int64_t y = a.eqn.params.get<int64_t>("y");
          if (y == 0) return {std::nullopt};
          Atom x = a.primals[0];
          Atom dx = c.p.scalar(d(c.p, x), static_cast<double>(y));
          if (y != 1) {
            Atom pw = y - 1 == 1 ? x : c.p.emit1(Prim::integer_pow, {x}, Params{{"y", y - 1}});
            dx = c.p.mul(dx, pw);
          }
          return {c.t.mul(*a.tangents[0], dx)};
        }});
  t.set(Prim::convert_element_type, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          if (!a.tangents[0]) return {std::nullopt};
          DType to = a.eqn.params.get<DType>("new_dtype");
          if (!is_inexact(to)) return {std::nullopt};  // to int/bool: zero tangent
          return {c.t.convert(*a.tangents[0], to)};
        }});
  // real, imag and conj are linear: the same op on the tangent.
  for (Prim p : {Prim::real, Prim::imag, Prim::conj})
    t.set(p, {[p](JvpCtx& c, JvpArgs& a) -> Tangents {
            if (!a.tangents[0]) return {std::nullopt};
            return {c.t.emit1(p, {*a.tangents[0]}, a.eqn.params)};
          }});
  // complex(re, im) is linear in both: complex(t_re, t_im), a missing one zero.
  t.set(Prim::complex, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          if (!a.tangents[0] && !a.tangents[1]) return {std::nullopt};
          const ArrayType out = c.p.array_type_of(a.primal_outs[0]);
          const ArrayType part{real_dtype(out.dtype), out.shape};
          Atom re = a.tangents[0] ? to_out_shape(c.t, *a.tangents[0], a) : c.t.zeros(part);
          Atom im = a.tangents[1] ? to_out_shape(c.t, *a.tangents[1], a) : c.t.zeros(part);
          return {c.t.emit1(Prim::complex, {re, im})};
        }});
  t.set(Prim::copy, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          if (!a.tangents[0]) return {std::nullopt};
          return {c.t.unary(Prim::copy, *a.tangents[0])};
        }});
  // The name tags the primal value (remat policies read it); the tangent passes through.
  t.set(Prim::checkpoint_name, {[](JvpCtx&, JvpArgs& a) -> Tangents { return {a.tangents[0]}; }});

  // Binary ops; each operand may be a scalar broadcast against the other.
  for (Prim p : {Prim::add, Prim::add_any, Prim::sub}) {
    t.set(p, {[p](JvpCtx& c, JvpArgs& a) -> Tangents {
            MaybeAtom tx = a.tangents[0], ty = a.tangents[1];
            if (tx) tx = to_out_shape(c.t, *tx, a);
            if (ty) ty = to_out_shape(c.t, *ty, a);
            if (p == Prim::sub && ty) ty = c.t.neg(*ty);
            return {add_tangents(c.t, tx, ty)};
          }});
  }
  t.set(Prim::mul, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          MaybeAtom r;
          if (a.tangents[0]) r = to_out_shape(c.t, c.t.mul(*a.tangents[0], a.primals[1]), a);
          if (a.tangents[1])
            r = add_tangents(c.t, r, to_out_shape(c.t, c.t.mul(a.primals[0], *a.tangents[1]), a));
          return {r};
        }});
  t.set(Prim::div, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          MaybeAtom r;
          if (a.tangents[0]) r = to_out_shape(c.t, c.t.div(*a.tangents[0], a.primals[1]), a);
          if (a.tangents[1]) {
            // d(x/y)/dy = -out/y
            Atom f = c.p.neg(c.p.div(a.primal_outs[0], a.primals[1]));
            Atom ty = to_out_shape(c.t, *a.tangents[1], a);
            r = add_tangents(c.t, r, c.t.mul(ty, f));
          }
          return {r};
        }});
  // max/min: the tangent of the chosen operand; ties split evenly.
  for (Prim p : {Prim::max, Prim::min}) {
    t.set(p, {[p](JvpCtx& c, JvpArgs& a) -> Tangents {
            Atom x = a.primals[0], y = a.primals[1];
            DType dt = c.p.array_type_of(a.primal_outs[0]).dtype;
            Atom wins = c.p.convert(c.p.emit1(p == Prim::max ? Prim::gt : Prim::lt, {x, y}), dt);
            Atom ties = c.p.convert(c.p.emit1(Prim::eq, {x, y}), dt);
            Atom wx = c.p.add(wins, c.p.mul(ties, c.p.scalar(dt, 0.5)));
            MaybeAtom r;
            if (a.tangents[0]) r = c.t.mul(to_out_shape(c.t, *a.tangents[0], a), wx);
            if (a.tangents[1]) {
              Atom wy = c.p.sub(c.p.scalar(dt, 1.0), wx);
              r = add_tangents(c.t, r, c.t.mul(to_out_shape(c.t, *a.tangents[1], a), wy));
            }
            return {r};
          }});
  }
  // pow, as JAX's rules: d/dx = y x^(y-1), for an integer y 0 where y = 0 (so 0^0 has slope
  // 0), for a float y as computed (0 * 0^-1: NaN at 0^0, as JAX gives); d/dy = log(x) x^y
  // with log(0) read as log(1) = 0. An integer y has no tangent.
  t.set(Prim::pow, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          Atom x = a.primals[0], y = a.primals[1], out = a.primal_outs[0];
          const ArrayType ot = c.p.array_type_of(out);
          const DType dt = ot.dtype;
          auto is_zero = [&](Atom v) { return c.p.emit1(Prim::eq, {v, c.p.scalar(dt, 0.0)}); };
          MaybeAtom r;
          const Literal* y_literal = std::get_if<Literal>(&y);
          if (a.tangents[0] && y_literal && is_float(y_literal->dtype)) {
            // A literal exponent (x ** 1.5): y - 1 as a literal too, so the slope's power has
            // a constant exponent that the lowering can compute without a general pow.
            const double yv = y_literal->as_double();
            Atom slope = c.p.mul(
                c.p.scalar(dt, yv),
                c.p.emit1(Prim::pow, {c.p.broadcast_to(x, ot.shape), c.p.scalar(dt, yv - 1.0)}));
            r = c.t.mul(to_out_shape(c.t, *a.tangents[0], a), slope);
          } else if (a.tangents[0]) {
            Atom yx = c.p.broadcast_to(c.p.convert(y, dt), ot.shape);
            Atom slope = c.p.mul(yx, c.p.emit1(Prim::pow, {c.p.broadcast_to(x, ot.shape),
                                                           c.p.sub(yx, c.p.scalar(dt, 1.0))}));
            const bool integer_y = is_int(c.p.array_type_of(y).dtype);
            Atom f = integer_y ? c.p.select(is_zero(yx), {slope, c.p.zeros(ot)}) : slope;
            r = c.t.mul(to_out_shape(c.t, *a.tangents[0], a), f);
          }
          if (a.tangents[1]) {
            Atom xs = c.p.broadcast_to(x, ot.shape);
            Atom safe_x = c.p.select(is_zero(xs), {xs, c.p.full(ot, 1.0)});
            Atom f = c.p.mul(out, c.p.unary(Prim::log, safe_x));
            r = add_tangents(c.t, r, c.t.mul(to_out_shape(c.t, *a.tangents[1], a), f));
          }
          return {r};
        }});
  // rem(x, y) = x - y * trunc(x / y): d/dx = 1, d/dy = -trunc(x / y).
  t.set(Prim::rem, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          MaybeAtom r;
          if (a.tangents[0]) r = to_out_shape(c.t, *a.tangents[0], a);
          if (a.tangents[1]) {
            Atom q = c.p.div(a.primals[0], a.primals[1]);
            Atom trunc =
                c.p.mul(c.p.unary(Prim::sign, q), c.p.unary(Prim::floor, c.p.unary(Prim::abs, q)));
            r = add_tangents(c.t, r, c.t.mul(to_out_shape(c.t, *a.tangents[1], a), c.p.neg(trunc)));
          }
          return {r};
        }});
  // atan2(x, y): d/dx = y / (x^2 + y^2), d/dy = -x / (x^2 + y^2).
  t.set(Prim::atan2, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          Atom x = a.primals[0], y = a.primals[1];
          MaybeAtom r;
          if (!a.tangents[0] && !a.tangents[1]) return {r};
          Atom norm = c.p.add(c.p.mul(x, x), c.p.mul(y, y));
          if (a.tangents[0]) r = c.t.mul(to_out_shape(c.t, *a.tangents[0], a), c.p.div(y, norm));
          if (a.tangents[1])
            r = add_tangents(
                c.t, r, c.t.mul(to_out_shape(c.t, *a.tangents[1], a), c.p.neg(c.p.div(x, norm))));
          return {r};
        }});
  // igamma(a, x) = P(a, x), igammac = 1 - P: d/da P = igamma_grad_a(a, x), d/dx P =
  // exp(-x + (a - 1) log x - lgamma(a)), the gamma density (igammac's are both negated).
  for (Prim p : {Prim::igamma, Prim::igammac})
    t.set(p, {[p](JvpCtx& c, JvpArgs& a) -> Tangents {
            Atom s = a.primals[0], x = a.primals[1];
            MaybeAtom r;
            if (!a.tangents[0] && !a.tangents[1]) return {r};
            const bool upper = p == Prim::igammac;
            if (a.tangents[0]) {
              Atom slope = c.p.emit1(Prim::igamma_grad_a, {s, x});
              if (upper) slope = c.p.neg(slope);
              r = c.t.mul(to_out_shape(c.t, *a.tangents[0], a), slope);
            }
            if (a.tangents[1]) {
              DType d = c.p.array_type_of(x).dtype;
              Atom log_density = c.p.sub(c.p.add(c.p.neg(x), c.p.mul(c.p.sub(s, c.p.scalar(d, 1.0)),
                                                                     c.p.unary(Prim::log, x))),
                                         c.p.unary(Prim::lgamma, s));
              Atom slope = c.p.unary(Prim::exp, log_density);
              if (upper) slope = c.p.neg(slope);
              r = add_tangents(c.t, r, c.t.mul(to_out_shape(c.t, *a.tangents[1], a), slope));
            }
            return {r};
          }});
  t.set(Prim::select_n, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          bool any = false;
          for (size_t i = 1; i < a.tangents.size(); ++i) any |= a.tangents[i].has_value();
          if (!any) return {std::nullopt};
          const ArrayType out = c.p.array_type_of(a.primal_outs[0]);
          std::vector<Atom> cases;
          for (size_t i = 1; i < a.tangents.size(); ++i)
            cases.push_back(a.tangents[i] ? c.t.broadcast_to(*a.tangents[i], out.shape)
                                          : c.t.zeros(out));
          return {c.t.select(a.primals[0], cases)};
        }});
}

}  // namespace refjit
