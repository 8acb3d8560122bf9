// The incomplete gamma functions against 40-digit values (mpmath's gammainc and its numerical
// derivative in a), in the interpreter and in native code.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/special_functions.h"
#include "test_util.h"

namespace refjit {
namespace {

struct Reference {
  double a, x, p, q, dp_da;
};

// Both regimes (series where x <= 1 or x <= a, continued fraction elsewhere), a = 1 (where
// the fraction's value stops after one term but its derivative does not), tiny and large a,
// and tails far below 1.
constexpr Reference kReferences[] = {
    {0.5, 0.3, 0.56142197391900014, 0.43857802608099986, -0.77057035137535192},
    {1.0, 2.0, 0.86466471676338731, 0.13533528323661269, -0.22082542621185951},
    {3.0, 2.5, 0.45618688411667048, 0.54381311588332952, -0.24711735748326824},
    {10.0, 12.0, 0.75760783832948765, 0.24239216167051235, -0.097177972037179651},
    {2.0, 30.0, 0.99999999999709914, 2.9008631203404541e-12, -8.7365663456165495e-12},
    {100.0, 90.0, 0.15822098918643017, 0.84177901081356983, -0.02461191684397991},
    {100.0, 110.0, 0.84172132993991291, 0.15827867006008709, -0.023808656854890386},
    {0.01, 0.5, 0.99437324380603282, 0.0056267561939671841, -0.56554591171525777},
    {5.0, 0.001, 8.3263918642115033e-18, 0.99999999999999999, -7.1722712940177513e-17},
    {0.001, 2.0, 0.99995102308216902, 4.897691783098148e-5, -0.049053345839364881},
    {7.0, 7.0, 0.55028894415130115, 0.44971105584869885, -0.15259682152387382},
};

// `c = prim a b` on two arrays of type t.
std::string binary_program(const char* prim, const ArrayType& t) {
  return fmt::format("{{ lambda ; a:{0} b:{0}. let\n    c:{0} = {1} a b\n  in (c,) }}", t.str(),
                     prim);
}

void expect_near_relative(double got, double want, double rtol, const char* what, double a,
                          double x) {
  EXPECT_NEAR(got, want, rtol * std::fabs(want) + 1e-300) << what << "(" << a << ", " << x << ")";
}

TEST(IncompleteGamma, MatchesHighPrecisionValues) {
  for (const Reference& r : kReferences) {
    special::IncompleteGamma g = special::incomplete_gamma(r.a, r.x);
    expect_near_relative(g.p, r.p, 1e-13, "P", r.a, r.x);
    expect_near_relative(g.q, r.q, 1e-11, "Q", r.a, r.x);
    expect_near_relative(g.dp_da, r.dp_da, 1e-9, "dP/da", r.a, r.x);
  }
}

TEST(IncompleteGamma, EdgesFollowJax) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  auto is_nan = [](special::IncompleteGamma g) {
    return std::isnan(g.p) && std::isnan(g.q) && std::isnan(g.dp_da);
  };
  EXPECT_TRUE(is_nan(special::incomplete_gamma(-1.0, 2.0)));
  EXPECT_TRUE(is_nan(special::incomplete_gamma(0.0, 2.0)));
  EXPECT_TRUE(is_nan(special::incomplete_gamma(1.0, -2.0)));
  EXPECT_TRUE(is_nan(special::incomplete_gamma(nan, 2.0)));
  EXPECT_TRUE(is_nan(special::incomplete_gamma(1.0, nan)));
  special::IncompleteGamma zero = special::incomplete_gamma(2.0, 0.0);
  EXPECT_EQ(zero.p, 0.0);
  EXPECT_EQ(zero.q, 1.0);
  special::IncompleteGamma big = special::incomplete_gamma(2.0, inf);
  EXPECT_EQ(big.p, 1.0);
  EXPECT_EQ(big.q, 0.0);
}

// Native code runs the same iterations in f64: the same values to rounding, edges included.
TEST(IncompleteGamma, NativeMatchesTheInterpreter) {
  std::vector<double> as, xs;
  for (const Reference& r : kReferences) as.push_back(r.a), xs.push_back(r.x);
  for (double a : {-1.0, 0.0, 2.0, 2.0, std::nan("")}) as.push_back(a);
  for (double x : {2.0, 2.0, 0.0, std::numeric_limits<double>::infinity(), 1.0}) xs.push_back(x);
  const int64_t n = static_cast<int64_t>(as.size());
  Array a = Array::from_vector<double>(as, {n}), x = Array::from_vector<double>(xs, {n});
  for (const char* prim : {"igamma", "igammac", "igamma_grad_a"})
    testing::check_text(binary_program(prim, a.type()), {a, x}, 1e-12);
  Array a32(ArrayType{DType::f32, {n}}), x32(ArrayType{DType::f32, {n}});
  for (int64_t i = 0; i < n; ++i) a32.set_from_double(i, as[i]), x32.set_from_double(i, xs[i]);
  for (const char* prim : {"igamma", "igammac", "igamma_grad_a"})
    testing::check_text(binary_program(prim, a32.type()), {a32, x32}, 1e-6);
}

}  // namespace
}  // namespace refjit
