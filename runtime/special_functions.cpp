// Special functions: the scaled Bessel functions i0e and i1e, digamma, polygamma and the
// regularized incomplete gamma functions.
#include "runtime/special_functions.h"

#include <cmath>
#include <iterator>
#include <limits>
#include <numbers>

namespace refjit::special {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

namespace {

// exp(-|x|) I_order(|x|) for order 0 or 1.
double bessel_ie(int order, double x) {
  const double a = std::fabs(x);
  if (std::isnan(a)) return kNaN;
  if (a <= kBesselSeriesEnd) {
    // I_n(a) = sum_k (a/2)^(2k+n) / (k! (k+n)!)
    const double q = a * a / 4;
    double term = order == 0 ? 1.0 : a / 2;
    double sum = term;
    for (int k = 1; k <= kBesselSeriesTerms; ++k) {
      term *= q / (static_cast<double>(k) * (k + order));
      sum += term;
    }
    return sum * std::exp(-a);
  }
  // I_n(a) e^-a ~ (2 pi a)^-1/2 sum_k (-1)^k prod_{j<=k} (4n^2 - (2j-1)^2) / (k! (8a)^k)
  const double z = 1 / (8 * a), mu = 4.0 * order * order;
  double term = 1, sum = 1;
  for (int k = 1; k <= kBesselAsymptoticTerms; ++k) {
    const double odd = 2.0 * k - 1;
    term *= (odd * odd - mu) * z / k;
    sum += term;
  }
  return sum / std::sqrt(2 * std::numbers::pi * a);
}

}  // namespace

double bessel_i0e(double x) { return bessel_ie(0, x); }
double bessel_i1e(double x) {
  const double y = bessel_ie(1, x);
  return x < 0 ? -y : y;
}

// digamma (psi), the derivative of lgamma: the reflection psi(x) = psi(1-x) - pi/tan(pi x) for
// x < 0.5, the recurrence psi(x) = psi(x+1) - 1/x up to kDigammaSeriesFrom, then the
// asymptotic series. Poles (0, -1, -2, ...) give NaN, as in JAX.
double digamma(double x) {
  if (std::isnan(x) || (x <= 0 && std::floor(x) == x)) return kNaN;
  double r = 0;
  if (x < 0.5) {
    // tan has period pi: its argument reduced to x's fraction (exact) loses nothing to a large x.
    r = -std::numbers::pi / std::tan(std::numbers::pi * (x - std::floor(x)));
    x = 1 - x;
  }
  while (x < kDigammaSeriesFrom) {
    r -= 1 / x;
    x += 1;
  }
  const double z = 1 / (x * x);
  double acc = 0;
  for (size_t k = std::size(kDigammaSeries); k-- > 0;) acc = kDigammaSeries[k] + z * acc;
  const double series = z * acc;
  return r + std::log(x) - 0.5 / x - series;
}

// polygamma(m, x), the m-th derivative of digamma: (-1)^(m+1) m! zeta(m+1, x), with the Hurwitz
// zeta summed term by term up to x + k >= 16 and the Euler-Maclaurin tail after that (the
// series holds for every x but the poles, negative x included, as JAX computes it). m must
// be a non-negative integer (else NaN); m = 0 is digamma. At the poles 0, -1, ...: +inf for
// odd m, NaN for even m (JAX's values); x below -1e4 gives NaN rather than 1e4+ terms.
double polygamma(double m, double x) {
  if (std::isnan(m) || std::isnan(x) || m < 0 || std::floor(m) != m) return kNaN;
  if (m == 0) return digamma(x);
  const bool odd = std::fmod(m, 2.0) == 1.0;
  if (x <= 0 && std::floor(x) == x)
    return odd ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  if (x < -1e4) return kNaN;
  const double s = m + 1;
  double zeta = 0;
  for (; x < 16; x += 1) zeta += std::pow(x, -s);
  // zeta(s, z) ~ z^(1-s)/(s-1) + z^-s/2 + sum_j B_2j/(2j)! s(s+1)...(s+2j-2) z^(-s-2j+1)
  static constexpr double kBernoulliOverFactorial[] = {1.0 / 12,         -1.0 / 720,
                                                       1.0 / 30240,      -1.0 / 1209600,
                                                       1.0 / 47900160,   -691.0 / 1307674368000,
                                                       1.0 / 74724249600};
  zeta += std::pow(x, 1 - s) / (s - 1) + 0.5 * std::pow(x, -s);
  double rising = s;                   // s (s+1) ... (s+2j-2)
  double power = std::pow(x, -s - 1);  // z^(-s-2j+1)
  for (int j = 0; j < 7; ++j) {
    zeta += kBernoulliOverFactorial[j] * rising * power;
    rising *= (s + 2 * j + 1) * (s + 2 * j + 2);
    power /= x * x;
  }
  return (odd ? 1.0 : -1.0) * std::exp(std::lgamma(m + 1)) * zeta;
}

// P(a, x) by the series x^a e^-x / Gamma(a+1) * sum_n x^n / ((a+1)...(a+n)) where x <= 1 or
// x <= a, else Q(a, x) by its continued fraction (modified Lentz) and P = 1 - Q. dP/da is
// carried through the same iterations in forward mode, as XLA computes igamma_grad_a.
IncompleteGamma incomplete_gamma(double a, double x) {
  if (std::isnan(a) || std::isnan(x) || x < 0 || a <= 0) return {kNaN, kNaN, kNaN};
  if (x == 0) return {0, 1, 0};
  if (std::isinf(x)) return {1, 0, 0};
  const double log_x = std::log(x);
  if (x <= 1 || x <= a) {
    double ap = a, term = 1, dterm = 0, sum = 1, dsum = 0;
    for (int n = 0; n < kIgammaMaxIterations; ++n) {
      ap += 1;
      const double r = x / ap;
      dterm = (dterm - term / ap) * r;  // d/da of term * x / (a + n)
      term *= r;
      sum += term;
      dsum += dterm;
      if (std::fabs(term) <= std::fabs(sum) * kIgammaEpsilon &&
          std::fabs(dterm) <= std::fabs(dsum) * kIgammaEpsilon)
        break;
    }
    const double prefactor = std::exp(a * log_x - x - std::lgamma(a + 1));
    const double p = prefactor * sum;
    return {p, 1 - p, p * (log_x - digamma(a + 1)) + prefactor * dsum};
  }
  // Each quantity with its derivative in a (the d-prefixed twin).
  double b = x + 1 - a, db = -1;
  double c = 1 / kIgammaTiny, dc = 0;
  double d = 1 / b, dd = -db / (b * b);
  double h = d, dh = dd;
  for (int i = 1; i <= kIgammaMaxIterations; ++i) {
    const double an = -i * (i - a), dan = i;
    b += 2;
    double nd = an * d + b, dnd = dan * d + an * dd + db;
    if (std::fabs(nd) < kIgammaTiny) nd = kIgammaTiny, dnd = 0;
    double nc = b + an / c, dnc = db + (dan * c - an * dc) / (c * c);
    if (std::fabs(nc) < kIgammaTiny) nc = kIgammaTiny, dnc = 0;
    d = 1 / nd;
    dd = -dnd / (nd * nd);
    c = nc;
    dc = dnc;
    const double step = d * c, dstep = dd * c + d * dc;
    const double dh_next = dh * step + h * dstep;
    const double dh_change = std::fabs(dh_next - dh);
    dh = dh_next;
    h *= step;
    // Both converged: where a = 1, 2, ... the fraction's value stops early (a term is 0) but
    // its derivative does not.
    if (std::fabs(step - 1) < kIgammaEpsilon && dh_change <= std::fabs(dh) * kIgammaEpsilon) break;
  }
  const double prefactor = std::exp(a * log_x - x - std::lgamma(a));
  const double q = prefactor * h;
  return {1 - q, q, -(q * (log_x - digamma(a)) + prefactor * dh)};
}

}  // namespace refjit::special
