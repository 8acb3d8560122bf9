// digamma against 20-digit values (mpmath's digamma), in the interpreter and in native code:
// the recurrence, the asymptotic series, the reflection (large negative x included) and the
// poles.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "runtime/special_functions.h"
#include "test_util.h"

namespace refjit {
namespace {

struct Reference {
  double x, psi;
};

constexpr Reference kReferences[] = {
    {0.5, -1.9635100260214234795},     {1.0, -0.57721566490153286061},
    {2.5, 0.70315664064524318723},     {5.999, 1.7059363290792256036},
    {6.0, 1.7061176684318004727},      {9.75, 2.2251095350445760120},
    {10.0, 2.2517525890667211076},     {123.4, 4.8113737751162774191},
    {-0.3, 2.1133097796353988734},     {-4.75, -1.4818622825218566589},
    {-99999.5, 11.512925464974395087}, {0.001, -1000.5755719318102797},
};

TEST(Digamma, MatchesHighPrecisionValues) {
  for (const Reference& r : kReferences)
    EXPECT_NEAR(special::digamma(r.x), r.psi, 2e-15 * std::max(1.0, std::fabs(r.psi)))
        << "digamma(" << r.x << ")";
}

TEST(Digamma, PolesAreNan) {
  for (double x : {0.0, -1.0, -7.0, std::nan("")}) EXPECT_TRUE(std::isnan(special::digamma(x)));
}

// Native code runs the same steps in f64: the same values to rounding, poles included.
TEST(Digamma, NativeMatchesTheInterpreter) {
  std::vector<double> xs;
  for (const Reference& r : kReferences) xs.push_back(r.x);
  for (double x : {0.0, -3.0, 1e6, 7.25, 11.0}) xs.push_back(x);
  const int64_t n = static_cast<int64_t>(xs.size());
  Array x = Array::from_vector<double>(xs, {n});
  const std::string program = "{ lambda ; a:f64[" + std::to_string(n) + "]. let b:f64[" +
                              std::to_string(n) + "] = digamma a in (b,) }";
  testing::check_text(program, {x}, 1e-15);
}

}  // namespace
}  // namespace refjit
