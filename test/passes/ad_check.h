// Generic autodiff checks used by the per-primitive tests:
//  * JVP against central finite differences (f64, on the interpreter);
//  * linearize agrees with the JVP and the primal;
//  * the transpose identity <ct, J t> = <J^T ct, t> for every accumulator kind: value,
//    ref pre-filled with zeros and with a random P (the ref ends at P + grad; for a Ref
//    argument P also acts as +P·(final value)), dont_want (no output).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "passes/ad/jvp.h"
#include "passes/ad/linearize.h"
#include "passes/ad/transpose.h"
#include "test/passes/ad_test_util.h"

namespace refjit::testing {

struct AdCase {
  explicit AdCase(Jaxpr jaxpr) : f(std::move(jaxpr)) {}
  Jaxpr f;
  double lo = -1.0, hi = 1.0;     // range of random float inputs
  std::map<size_t, Array> fixed;  // inputs with given values (indices, ...)
  bool check_transpose = true;    // false for forward-only primitives
  double fd_tol = 1e-6;           // relative tolerance of the FD comparison
  double fd_step = 1e-6;          // finite-difference step
  double ident_tol = 1e-9;        // relative tolerance of the transpose identity
};

namespace detail {

inline bool is_diff(const Jaxpr& f, size_t i) { return is_inexact(f.type_of(f.invars[i]).dtype()); }

inline std::vector<RtValue> copy_args(const std::vector<RtValue>& args) {
  std::vector<RtValue> r;
  for (const RtValue& v : args) {
    if (const auto* p = std::get_if<RefBufferPtr>(&v))
      r.push_back(ref_of((*p)->value()));
    else
      r.push_back(v);
  }
  return r;
}

inline Array value_of(const RtValue& v) {
  if (const auto* p = std::get_if<RefBufferPtr>(&v)) return (*p)->value();
  return std::get<Array>(v);
}

// f's outputs followed by the final values of its ref arguments.
inline std::vector<Array> observe(const Jaxpr& f, const std::vector<RtValue>& args) {
  std::vector<RtValue> a = copy_args(args);
  std::vector<RtValue> outs = interpret(f, a);
  std::vector<Array> r;
  for (auto& o : outs) r.push_back(std::get<Array>(o));
  for (size_t i = 0; i < f.invars.size(); ++i)
    if (f.type_of(f.invars[i]).is_ref) r.push_back(value_of(a[i]));
  return r;
}

}  // namespace detail

inline void check_ad(const AdCase& c, uint32_t seed = 1) {
  const Jaxpr& f = c.f;
  std::mt19937 rng(seed);
  const size_t n = f.invars.size();
  std::vector<RtValue> args;
  std::vector<bool> diff(n, false);
  std::vector<Array> tangents;  // one per differentiated input
  for (size_t i = 0; i < n; ++i) {
    const Type t = f.type_of(f.invars[i]);
    Array v = c.fixed.count(i) ? c.fixed.at(i) : random_array(rng, t.array, c.lo, c.hi);
    args.push_back(t.is_ref ? RtValue(ref_of(v)) : RtValue(v));
    diff[i] = detail::is_diff(f, i) && !c.fixed.count(i);
    if (diff[i]) tangents.push_back(random_array(rng, t.array));
  }
  const std::vector<Array> base = detail::observe(f, args);

  // --- JVP against central differences (outputs, then final ref values).
  Jaxpr jvp = jvp_jaxpr(f, diff);
  verify(jvp);
  std::vector<RtValue> jargs = detail::copy_args(args);
  std::vector<RefBufferPtr> tangent_refs;
  for (size_t i = 0, k = 0; i < n; ++i) {
    if (!diff[i]) continue;
    if (f.type_of(f.invars[i]).is_ref) {
      tangent_refs.push_back(ref_of(tangents[k]));
      jargs.push_back(tangent_refs.back());
    } else {
      jargs.push_back(tangents[k]);
    }
    ++k;
  }
  std::vector<RtValue> jouts = interpret(jvp, jargs);
  const size_t n_out = f.outvars.size();
  ASSERT_EQ(jouts.size(), 2 * n_out);
  std::vector<Array> jvp_t;  // tangent outs, then final tangent refs
  for (size_t i = 0; i < n_out; ++i) {
    EXPECT_EQ(std::get<Array>(jouts[i]), base[i]) << "jvp primal output " << i;
    jvp_t.push_back(std::get<Array>(jouts[n_out + i]));
  }
  for (auto& r : tangent_refs) jvp_t.push_back(r->value());
  const double h = c.fd_step;
  auto shifted = [&](double s) {
    std::vector<RtValue> a = detail::copy_args(args);
    for (size_t i = 0, k = 0; i < n; ++i) {
      if (!diff[i]) continue;
      Array moved = axpy(detail::value_of(a[i]), s, tangents[k++]);
      a[i] = f.type_of(f.invars[i]).is_ref ? RtValue(ref_of(moved)) : RtValue(moved);
    }
    return detail::observe(f, a);
  };
  std::vector<Array> plus = shifted(h), minus = shifted(-h);
  std::vector<size_t> observed;  // indexes into base that have tangents
  for (size_t i = 0; i < n_out; ++i) observed.push_back(i);
  for (size_t i = 0, r = n_out; i < n; ++i)
    if (f.type_of(f.invars[i]).is_ref) {
      if (diff[i]) observed.push_back(r);
      ++r;
    }
  ASSERT_EQ(observed.size(), jvp_t.size());
  for (size_t o = 0; o < observed.size(); ++o) {
    const size_t b = observed[o];
    if (!is_inexact(base[b].dtype())) continue;
    for (int64_t e = 0; e < base[b].size(); ++e) {
      std::complex<double> fd = (plus[b].as_complex(e) - minus[b].as_complex(e)) / (2 * h);
      std::complex<double> got = jvp_t[o].as_complex(e);
      EXPECT_NEAR(got.real(), fd.real(), c.fd_tol * (1 + std::abs(fd)))
          << "tangent " << o << " entry " << e;
      EXPECT_NEAR(got.imag(), fd.imag(), c.fd_tol * (1 + std::abs(fd)))
          << "tangent " << o << " entry " << e << " (imaginary part)";
    }
  }
  if (!c.check_transpose) return;

  // --- linearize: primal part reproduces f; linear part reproduces the JVP tangents.
  Linearized lin = linearize_jaxpr(f, diff);
  verify(lin.primal);
  verify(lin.linear);
  std::vector<RtValue> pargs = detail::copy_args(args);
  std::vector<RtValue> pouts = interpret(lin.primal, pargs);
  ASSERT_EQ(pouts.size(), n_out + lin.num_residuals);
  for (size_t i = 0; i < n_out; ++i) EXPECT_EQ(std::get<Array>(pouts[i]), base[i]);
  std::vector<RtValue> residuals(pouts.begin() + n_out, pouts.end());
  std::vector<RtValue> largs = residuals;
  std::vector<RefBufferPtr> lin_refs;
  for (size_t i = 0, k = 0; i < n; ++i) {
    if (!diff[i]) continue;
    if (f.type_of(f.invars[i]).is_ref) {
      lin_refs.push_back(ref_of(tangents[k]));
      largs.push_back(lin_refs.back());
    } else {
      largs.push_back(tangents[k]);
    }
    ++k;
  }
  std::vector<RtValue> louts = interpret(lin.linear, largs);
  ASSERT_EQ(louts.size(), n_out);
  std::vector<Array> lin_t;
  for (auto& o : louts) lin_t.push_back(std::get<Array>(o));
  for (auto& r : lin_refs) lin_t.push_back(r->value());
  for (size_t o = 0; o < lin_t.size(); ++o)
    for (int64_t e = 0; e < lin_t[o].size(); ++e)
      EXPECT_LE(std::abs(lin_t[o].as_complex(e) - jvp_t[o].as_complex(e)), c.ident_tol)
          << "linear " << o;

  // --- transpose identity for each accumulator kind.
  std::vector<Array> cts, prefill;  // per output; per differentiated ref input
  for (size_t i = 0; i < n_out; ++i) cts.push_back(random_array(rng, base[i].type()));
  const size_t n_diff = tangents.size();
  std::vector<bool> diff_is_ref;
  for (size_t i = 0; i < n; ++i)
    if (diff[i]) diff_is_ref.push_back(f.type_of(f.invars[i]).is_ref);
  // <ct, J t> (+ <P, final tangent ref> for ref inputs, P = the ref accumulator's prefill)
  auto lhs = [&](const std::vector<Array>& P) {
    double s = 0;
    for (size_t i = 0; i < n_out; ++i) s += dot(cts[i], lin_t[i]);
    for (size_t r = 0, k = 0; k < n_diff; ++k)
      if (diff_is_ref[k]) s += dot(P[k], lin_t[n_out + r++]);
    return s;
  };
  for (int variant = 0; variant < 3; ++variant) {
    // 0: value accumulators (refs: ref prefilled 0); 1: all ref, zeros; 2: all ref, random P.
    std::vector<AccumKind> kinds;
    std::vector<Array> P;
    for (size_t k = 0; k < n_diff; ++k) {
      bool ref = variant > 0 || diff_is_ref[k];
      kinds.push_back(ref ? AccumKind::ref : AccumKind::value);
      P.push_back(variant == 2 ? random_array(rng, tangents[k].type()) : Array(tangents[k].type()));
    }
    ASSERT_TRUE(lin.ref_residuals.empty());
    Jaxpr bwd = transpose_jaxpr(lin.linear, lin.num_nonlinear(), kinds);
    verify(bwd);
    std::vector<RtValue> bargs = residuals;
    std::vector<RefBufferPtr> accs(n_diff);
    for (size_t k = 0; k < n_diff; ++k)
      if (kinds[k] == AccumKind::ref) {
        accs[k] = ref_of(P[k]);
        bargs.push_back(accs[k]);
      }
    for (auto& ct : cts) bargs.push_back(ct);
    std::vector<RtValue> bouts = interpret(bwd, bargs);
    double rhs = 0;
    size_t vi = 0;
    for (size_t k = 0; k < n_diff; ++k) {
      Array g = kinds[k] == AccumKind::ref ? accs[k]->value() : std::get<Array>(bouts.at(vi++));
      EXPECT_EQ(g.type(), tangents[k].type());
      rhs += dot(g, tangents[k]);
      // A ref accumulator of a value argument adds to P: P + grad.
      if (!diff_is_ref[k] && variant == 2) rhs -= dot(P[k], tangents[k]);
    }
    EXPECT_EQ(vi, bouts.size());
    double l = lhs(P);
    EXPECT_NEAR(l, rhs, c.ident_tol * (1 + std::abs(l)))
        << "transpose identity, variant " << variant;
  }
  // dont_want everywhere: a backward pass with no outputs.
  if (std::none_of(diff_is_ref.begin(), diff_is_ref.end(), [](bool b) { return b; })) {
    Jaxpr none = transpose_jaxpr(lin.linear, lin.num_residuals,
                                 std::vector<AccumKind>(n_diff, AccumKind::dont_want));
    EXPECT_TRUE(none.outvars.empty());
    EXPECT_TRUE(none.eqns.empty()) << "dont_want for every input leaves nothing to compute";
  }
}

}  // namespace refjit::testing
