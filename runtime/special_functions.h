// Special functions the interpreter's eval rules compute in double, and the native lowering
// reproduces step for step (backend/lower_elementwise.cpp).
#pragma once

namespace refjit::special {

// digamma (psi), the derivative of lgamma; NaN at the poles 0, -1, -2, ... Computed as
// r + log(x) - 1/(2x) - z (c0 + z (c1 + ...)), z = 1/x^2, after the recurrence has moved x to
// kDigammaSeriesFrom or beyond (r gathers its -1/x terms, and the reflection's below 0.5).
// The first coefficient left out, 3617/8160, times x^-16 is below 1e-16 there.
double digamma(double x);
inline constexpr double kDigammaSeriesFrom = 10.0;
inline constexpr double kDigammaSeries[] = {1.0 / 12,  -1.0 / 120,     1.0 / 252, -1.0 / 240,
                                            1.0 / 132, -691.0 / 32760, 1.0 / 12};

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
