// JAX's random_gamma (jax.random.gamma, beta, dirichlet), read as Marsaglia and Tsang's
// rejection sampler on threefry bits (rewrites.h): the same draws JAX makes, key by key.
#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>

#include "import/jax/rewrite_support.h"

namespace refjit::text {

namespace {

// ---- sampling ------------------------------------------------------------------------------
//
// Each element of `a` gets its own key (JAX splits each key into one per element) and a scan
// draws one sample per element: with alpha' = alpha (alpha >= 1) or alpha + 1,
// d = alpha' - 1/3 and c = 1/3 / sqrt(d), a normal x is drawn until v = 1 + c x > 0, and
// (x^2, v^3, a uniform U) is redrawn until U < 1 - 0.0331 x^4 or log U < x^2/2 + d (1 - v^3 +
// log v^3); the sample is d v^3, times U'^(1/alpha) for alpha < 1. Every operation is the one
// JAX's sampler applies, in the same order, so the bits agree.
//
// The derivative in alpha is JAX's implicit one, d sample / d alpha = -(dP/da) / (dP/dx) for
// the gamma CDF P (igamma_grad_a over the density), attached to the sample with a zero-valued
// term (alpha - stop_gradient(alpha)) * slope; the sampler itself is under stop_gradient.

struct Consts {
  DType d;
  Atom zero, one, two, minus_one, half, third;
};

Consts consts_of(DType d) {
  return {d,
          Literal::of(d, 0.0),
          Literal::of(d, 1.0),
          Literal::of(d, 2.0),
          Literal::of(d, -1.0),
          Literal::of(d, 0.5),
          Literal::of(d, 1.0 / 3.0)};
}

// Key k of keys u32[n, 2]: u32[2].
Atom key_at(Emit& e, const Atom& keys, int64_t k) {
  return e.op(Prim::squeeze, {e.slice(keys, {k, 0}, {k + 1, 2})},
              Params{{"dimensions", IntList{0}}});
}

// A uniform scalar in [lo, hi) from one key (JAX's _uniform): random mantissa bits under the
// exponent of 1.0, minus 1, scaled.
Atom uniform(Emit& e, const Atom& key, DType d, const Atom& lo, const Atom& hi) {
  const bool f64 = d == DType::f64;
  const DType bits_type = f64 ? DType::u64 : DType::u32;
  Atom bits = prng_random_bits(e, key, f64 ? 64 : 32, {});
  Atom mantissa =
      e.op(Prim::shift_right_logical, {bits, Literal::of_int(bits_type, f64 ? 64 - 52 : 32 - 23)});
  Atom one_bits = f64 ? Literal::of_int(bits_type, static_cast<int64_t>(0x3ff0000000000000))
                      : Literal::of_int(bits_type, 0x3f800000);
  Atom floats =
      e.op(Prim::sub, {e.op(Prim::bitcast_convert_type, {e.op(Prim::or_, {mantissa, one_bits})},
                            Params{{"new_dtype", d}}),
                       Literal::of(d, 1.0)});
  Atom scaled = e.op(Prim::add, {e.op(Prim::mul, {floats, e.op(Prim::sub, {hi, lo})}), lo});
  return e.op(Prim::max, {lo, scaled});
}

// A standard normal scalar (JAX's _normal_real): sqrt(2) erf_inv(u), u uniform in
// (-1, 1).
Atom normal(Emit& e, const Atom& key, const Consts& k) {
  // The float above -1 in the sample's own precision.
  Atom lo = Literal::of(k.d, k.d == DType::f64 ? std::nextafter(-1.0, 0.0)
                                               : static_cast<double>(std::nextafter(-1.0f, 0.0f)));
  Atom u = uniform(e, key, k.d, lo, k.one);
  return e.op(Prim::mul, {Literal::of(k.d, std::sqrt(2.0)), e.op(Prim::erf_inv, {u})});
}

// A while eqn whose jaxprs `cond` and `body` take `consts` first, then the carries.
std::vector<Atom> while_loop(
    Emit& e, const std::vector<Atom>& cond_consts, const std::vector<Atom>& body_consts,
    const std::vector<Atom>& init,
    const std::function<Atom(Emit&, const std::vector<Atom>&, const std::vector<Atom>&)>& cond,
    const std::function<std::vector<Atom>(Emit&, const std::vector<Atom>&,
                                          const std::vector<Atom>&)>& body) {
  auto build = [&](const std::vector<Atom>& consts, auto&& fill) {
    JaxprBuilder b;
    std::vector<Atom> cs, carries;
    for (const Atom& c : consts) cs.push_back(b.add_invar(Type(e.type(c))));
    for (const Atom& x : init) carries.push_back(b.add_invar(Type(e.type(x))));
    Emit be{b};
    std::vector<Atom> outs = fill(be, cs, carries);
    for (Atom& o : outs)
      if (!is_var(o)) o = be.op(Prim::copy, {o});
    b.set_outvars(outs);
    return std::make_shared<const Jaxpr>(b.finish());
  };
  JaxprPtr cond_jaxpr = build(cond_consts, [&](Emit& be, auto& cs, auto& carries) {
    return std::vector<Atom>{cond(be, cs, carries)};
  });
  JaxprPtr body_jaxpr = build(body_consts, body);
  std::vector<Atom> ins = cond_consts;
  ins.insert(ins.end(), body_consts.begin(), body_consts.end());
  ins.insert(ins.end(), init.begin(), init.end());
  Params p{{"cond_jaxpr", cond_jaxpr},
           {"body_jaxpr", body_jaxpr},
           {"cond_nconsts", static_cast<int64_t>(cond_consts.size())},
           {"body_nconsts", static_cast<int64_t>(body_consts.size())}};
  std::vector<Var> outs = e.b.add_eqn(Prim::while_, ins, std::move(p));
  return {outs.begin(), outs.end()};
}

// One gamma sample of shape alpha from `key` (JAX's _gamma_one).
Atom gamma_one(Emit& e, const Atom& key, const Atom& alpha, bool log_space) {
  const Consts k = consts_of(e.type(alpha).dtype);
  Atom boost_mask = e.op(Prim::ge, {alpha, k.one});
  Atom boosted = e.op(Prim::select_n, {boost_mask, e.op(Prim::add, {alpha, k.one}), alpha});
  Atom d = e.op(Prim::sub, {boosted, k.third});
  Atom c = e.op(Prim::div, {k.third, e.op(Prim::sqrt, {d})});
  Atom keys = prng_split(e, key, {2});
  Atom subkey = key_at(e, keys, 1);
  // (key, X, V, U), redrawn until accepted.
  std::vector<Atom> drawn = while_loop(
      e, {d}, {c}, {key_at(e, keys, 0), k.zero, k.one, k.two},
      [&](Emit& b, const std::vector<Atom>& cs, const std::vector<Atom>& v) {
        Atom x = v[1], cube = v[2], u = v[3];
        Atom squeeze = b.op(
            Prim::ge, {u, b.op(Prim::sub, {k.one, b.op(Prim::mul, {Literal::of(k.d, 0.0331),
                                                                   b.op(Prim::mul, {x, x})})})});
        Atom log_test =
            b.op(Prim::ge,
                 {b.op(Prim::log, {u}),
                  b.op(Prim::add,
                       {b.op(Prim::mul, {x, k.half}),
                        b.op(Prim::mul, {cs[0], b.op(Prim::add, {b.op(Prim::sub, {k.one, cube}),
                                                                 b.op(Prim::log, {cube})})})})});
        return b.op(Prim::and_, {squeeze, log_test});
      },
      [&](Emit& b, const std::vector<Atom>& cs, const std::vector<Atom>& v) {
        Atom three = prng_split(b, v[0], {3});
        // (key, x, v = 1 + c x), redrawn until v > 0.
        std::vector<Atom> xv = while_loop(
            b, {}, {cs[0]}, {key_at(b, three, 1), k.zero, k.minus_one},
            [&](Emit& bb, const std::vector<Atom>&, const std::vector<Atom>& w) {
              return bb.op(Prim::le, {w[2], k.zero});
            },
            [&](Emit& bb, const std::vector<Atom>& cs2, const std::vector<Atom>& w) {
              Atom two = prng_split(bb, w[0], {2});
              Atom x = normal(bb, key_at(bb, two, 1), k);
              return std::vector<Atom>{key_at(bb, two, 0), x,
                                       bb.op(Prim::add, {k.one, bb.op(Prim::mul, {x, cs2[0]})})};
            });
        Atom x2 = b.op(Prim::mul, {xv[1], xv[1]});
        Atom v3 = b.op(Prim::mul, {b.op(Prim::mul, {xv[2], xv[2]}), xv[2]});
        Atom u = uniform(b, key_at(b, three, 2), k.d, k.zero, k.one);
        return std::vector<Atom>{key_at(b, three, 0), x2, v3, u};
      });
  Atom cube = drawn[2];
  Atom inverse_alpha = e.op(Prim::div, {k.one, alpha});
  if (log_space) {
    Atom u = uniform(e, subkey, k.d, k.zero, k.one);
    Atom log_u = e.op(Prim::neg, {e.op(Prim::neg, {e.op(Prim::log1p, {e.op(Prim::neg, {u})})})});
    Atom no_boost = e.op(Prim::or_, {boost_mask, e.op(Prim::eq, {log_u, k.zero})});
    Atom log_boost =
        e.op(Prim::select_n, {no_boost, e.op(Prim::mul, {log_u, inverse_alpha}), k.zero});
    return e.op(Prim::add,
                {e.op(Prim::add, {e.op(Prim::log, {d}), e.op(Prim::log, {cube})}), log_boost});
  }
  Atom u = e.op(Prim::sub, {k.one, uniform(e, subkey, k.d, k.zero, k.one)});
  Atom boost = e.op(Prim::select_n, {boost_mask, e.op(Prim::pow, {u, inverse_alpha}), k.one});
  return e.op(Prim::mul, {e.op(Prim::mul, {d, cube}), boost});
}

// d sample / d alpha = -(dP/da) / (dP/dx) at the sample x (per element), finite or 0.
Atom gamma_slope(Emit& e, const Atom& alpha, const Atom& x) {
  const DType d = e.type(x).dtype;
  Atom log_density = e.op(
      Prim::sub, {e.op(Prim::add, {e.op(Prim::neg, {x}),
                                   e.op(Prim::mul, {e.op(Prim::sub, {alpha, Literal::of(d, 1.0)}),
                                                    e.op(Prim::log, {x})})}),
                  e.op(Prim::lgamma, {alpha})});
  Atom slope = e.op(
      Prim::neg,
      {e.op(Prim::div, {e.op(Prim::igamma_grad_a, {alpha, x}), e.op(Prim::exp, {log_density})})});
  Atom finite = e.op(Prim::is_finite, {slope});
  return e.op(Prim::select_n,
              {finite, e.broadcast(Literal::of(d, 0.0), e.type(slope).shape, {}), slope});
}

std::vector<Atom> random_gamma(RewriteArgs& a) {
  constexpr std::string_view prim = "random_gamma";
  expect_operands(a, prim, 2);
  const ArrayType kt = array_of(a, prim, 0);
  const ArrayType at = array_of(a, prim, 1);
  if (kt.dtype != DType::u32 || kt.shape.empty() || kt.shape.back() != 2)
    fail(prim, fmt::format("operand 0 has type {}; expected threefry keys", kt.str()));
  if (at.dtype != DType::f32 && at.dtype != DType::f64)
    fail(prim,
         fmt::format("alpha has type {}; refjit samples float32 and float64 gammas", at.str()));
  const int64_t key_rank = kt.rank() - 1;
  if (key_rank > at.rank() || !std::equal(kt.shape.begin(), kt.shape.end() - 1, at.shape.begin()))
    fail(prim, fmt::format("keys {} do not lead alpha's shape {}", kt.str(), at.str()));
  const bool log_space = a.params.get_or<bool>("log_space", false);
  int64_t n_keys = 1, per_key = 1;
  for (int64_t k = 0; k < key_rank; ++k) n_keys *= kt.shape[k];
  for (int64_t k = key_rank; k < at.rank(); ++k) per_key *= at.shape[k];
  const int64_t n = n_keys * per_key;
  Emit e{a.b};
  if (n == 0) return {e.broadcast(Literal::of(at.dtype, 0.0), at.shape, {})};
  Atom keys = e.reshape(prng_split(e, e.reshape(a.ins[0], {n_keys, 2}), {per_key}), {n, 2});
  Atom alpha = e.op(Prim::stop_gradient, {a.ins[1]});
  Atom alphas = e.reshape(alpha, {n});

  JaxprBuilder body;
  Var key = body.add_invar(Type(ArrayType{DType::u32, {2}}));
  Var one_alpha = body.add_invar(Type(ArrayType{at.dtype, {}}));
  Emit be{body};
  Atom sample = gamma_one(be, key, one_alpha, log_space);
  if (!is_var(sample)) sample = be.op(Prim::copy, {sample});
  body.set_outvars({sample});
  Params p = scan_params(std::make_shared<const Jaxpr>(body.finish()), n, 0, false);
  Atom samples =
      e.reshape(Atom(e.b.add_eqn(Prim::scan, {keys, alphas}, std::move(p))[0]), at.shape);

  // The implicit derivative, attached through a term whose value is zero.
  Atom x = samples;
  if (log_space) {
    Atom tiny = e.broadcast(
        Literal::of(at.dtype, at.dtype == DType::f64 ? std::numeric_limits<double>::min()
                                                     : std::numeric_limits<float>::min()),
        at.shape, {});
    Atom ex = e.op(Prim::exp, {samples});
    x = e.op(Prim::select_n, {e.op(Prim::eq, {ex, Literal::of(at.dtype, 0.0)}), ex, tiny});
  }
  Atom slope = gamma_slope(e, alpha, x);
  if (log_space) slope = e.op(Prim::div, {slope, x});
  Atom zero = e.op(Prim::sub, {a.ins[1], alpha});
  return {e.op(Prim::add, {samples, e.op(Prim::mul, {zero, e.op(Prim::stop_gradient, {slope})})})};
}

}  // namespace

void add_gamma_rewrites(std::vector<JaxRewrite>& table) {
  table.push_back({"random_gamma", {{"log_space", K::boolean}}, {}, random_gamma});
}

}  // namespace refjit::text
