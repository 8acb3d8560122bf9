// Special functions the interpreter's eval rules compute in double, and the native lowering
// reproduces step for step (compiler/backend/lower_elementwise.cpp).
#pragma once

namespace refjit::special {

// digamma (psi), the derivative of lgamma; NaN at the poles 0, -1, -2, ...
double digamma(double x);

// polygamma(m, x), the m-th derivative of digamma (m a non-negative integer, else NaN).
double polygamma(double m, double x);

// The exponentially scaled modified Bessel functions of the first kind, orders 0 and 1:
// i0e(x) = exp(-|x|) I0(x), i1e(x) = exp(-|x|) I1(x) (odd in x). Up to kBesselSeriesEnd the
// power series (kBesselSeriesTerms terms, all positive, so nothing cancels), beyond it the
// asymptotic expansion (kBesselAsymptoticTerms terms); both to double rounding.
double bessel_i0e(double x);
double bessel_i1e(double x);
inline constexpr double kBesselSeriesEnd = 25.0;
inline constexpr int kBesselSeriesTerms = 60;
inline constexpr int kBesselAsymptoticTerms = 30;

// The regularized incomplete gamma functions P(a, x) = igamma, Q(a, x) = 1 - P = igammac,
// and dP/da = igamma_grad_a, as JAX defines them: P = 0, Q = 1 at x = 0; NaN for x < 0, a <= 0
// or a NaN operand; P = 1, Q = 0 at x = inf.
struct IncompleteGamma {
  double p, q, dp_da;
};
IncompleteGamma incomplete_gamma(double a, double x);

// How the series and the continued fraction stop: relative step below kEpsilon, or after
// kMaxIterations terms (both shared with the native lowering).
inline constexpr double kIgammaEpsilon = 1e-16;
inline constexpr int kIgammaMaxIterations = 2000;
// Lentz's guard against a zero denominator in the continued fraction.
inline constexpr double kIgammaTiny = 1e-300;

}  // namespace refjit::special
