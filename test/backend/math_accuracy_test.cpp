// The accuracy of f32 transcendental functions in native code, in ulps against libm in
// double precision, over the whole f32 range: the default (MLIR's polynomial approximations,
// vectorised) and exact_math (libm per element). docs/backend.md "Transcendental functions"
// lists the bounds these tests hold.
#include <fmt/format.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>

#include "test_util.h"

namespace refjit::testing {
namespace {

// Every binade of f32 (normal and subnormal), both signs, a few random mantissas each, and
// the special values.
std::vector<float> whole_range() {
  std::vector<float> xs = {0.0f,     -0.0f,   INFINITY, -INFINITY,    NAN,  FLT_MIN,
                           -FLT_MIN, FLT_MAX, -FLT_MAX, FLT_TRUE_MIN, 1.0f, -1.0f};
  std::mt19937 rng(1);
  for (uint32_t exponent = 0; exponent < 255; ++exponent)
    for (int k = 0; k < 48; ++k)
      for (uint32_t sign : {0u, 1u}) {
        uint32_t bits = (sign << 31) | (exponent << 23) | (rng() & 0x7fffff);
        float x;
        std::memcpy(&x, &bits, 4);
        xs.push_back(x);
      }
  // Dense around the origin, where most inputs are.
  for (int i = -20000; i <= 20000; ++i) xs.push_back(static_cast<float>(i) / 1000.0f);
  return xs;
}

// Error of `got` in units in the last place of the correctly rounded result. Results below
// FLT_MIN (subnormal) count their error in units of FLT_MIN, so flushing one to zero costs
// at most 1.
double ulps(float got, double want) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : INFINITY;
  if (std::isinf(want)) return got == static_cast<float>(want) ? 0 : INFINITY;
  const float rounded = static_cast<float>(want);
  if (std::isinf(rounded)) return std::isinf(got) && (got > 0) == (want > 0) ? 0 : INFINITY;
  if (std::isnan(got)) return INFINITY;
  const double magnitude = std::abs(static_cast<double>(rounded));
  const double ulp =
      magnitude < FLT_MIN ? double(FLT_MIN) : std::ldexp(1.0, std::ilogb(magnitude) - 23);
  return std::abs(static_cast<double>(got) - want) / ulp;
}

struct Function {
  const char* prim;
  double (*exact)(double);
  double bound_ulps;  // the default (approximated) code's worst case over whole_range()
  // The bound holds for |x| below this; beyond, results stay in the function's range.
  double bounded_below = INFINITY;
};

double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }

const Function kFunctions[] = {
    {"exp", [](double x) { return std::exp(x); }, 2},
    {"log", [](double x) { return std::log(x); }, 2},
    {"log1p", [](double x) { return std::log1p(x); }, 3},
    {"expm1", [](double x) { return std::expm1(x); }, 3},
    {"tanh", [](double x) { return std::tanh(x); }, 5},
    {"logistic", logistic, 3},
    {"erf", [](double x) { return std::erf(x); }, 4},
    {"sin", [](double x) { return std::sin(x); }, 1, 1e15},
    {"cos", [](double x) { return std::cos(x); }, 1, 1e15},
};

struct Measured {
  double worst = 0;
  float at = 0;
};

Measured measure(const Function& f, const std::vector<float>& inputs, const CompileOptions& options,
                 bool absolute = false) {
  const int64_t n = static_cast<int64_t>(inputs.size());
  Jaxpr j = parse_jaxpr(
      fmt::format("{{ lambda ; x:f32[{0}]. let y:f32[{0}] = {1} x in (y,) }}", n, f.prim));
  CompiledFunction code = compile_native(j, options);
  Array x(at(DType::f32, {n}));
  for (int64_t i = 0; i < n; ++i) x.set_from_double(i, inputs[static_cast<size_t>(i)]);
  Array y = as_array(code({x})[0]);
  Measured m;
  for (int64_t i = 0; i < n; ++i) {
    const float xi = inputs[static_cast<size_t>(i)];
    const float got = y.values<float>()[static_cast<size_t>(i)];
    const double e = absolute ? std::abs(got - f.exact(xi)) : ulps(got, f.exact(xi));
    if (e > m.worst) m = {e, xi};
  }
  return m;
}

TEST(MathAccuracy, ApproximationsAreVectorisedByDefault) {
  for (const Function& f : kFunctions) {
    SCOPED_TRACE(f.prim);
    Jaxpr j = parse_jaxpr(
        fmt::format("{{ lambda ; x:f32[1024]. let y:f32[1024] = {} x in (y,) }}", f.prim));
    std::string ir = emit_llvm_ir(j, {.exact_math = false});
    const size_t libm_calls = count(ir, "call float @") - count(ir, "call float @llvm.") +
                              count(ir, "call float @llvm." + std::string(f.prim));
    EXPECT_EQ(libm_calls, 0u) << "no libm call per element";
    // Any vector width: LLVM picks 4, 8 or 16 lanes by the host's vector unit and the
    // function's operations (4 for sin on AVX2 without AVX-512).
    EXPECT_GT(count(ir, "<16 x float>") + count(ir, "<8 x float>") + count(ir, "<4 x float>"), 0u)
        << "vector code";
    std::string exact = emit_llvm_ir(j, {.exact_math = true});
    if (std::string(f.prim) != "logistic")
      EXPECT_GT(count(exact, "call float @"), 0u) << "exact_math calls libm (or its intrinsic)";
  }
}

TEST(MathAccuracy, WholeRangeInUlps) {
  const std::vector<float> xs = whole_range();
  for (const Function& f : kFunctions) {
    SCOPED_TRACE(f.prim);
    std::vector<float> bounded, beyond;
    for (float x : xs)
      (std::abs(x) < f.bounded_below || !std::isfinite(x) ? bounded : beyond).push_back(x);
    Measured approx = measure(f, bounded, {.exact_math = false, .flush_subnormals = false});
    Measured exact = measure(f, xs, {.exact_math = true, .flush_subnormals = false});
    std::printf("%-9s approximated: max %.2f ulp (at %g); exact_math: max %.2f ulp\n", f.prim,
                approx.worst, approx.at, exact.worst);
    RecordProperty(std::string(f.prim) + "_max_ulps", std::to_string(approx.worst));
    EXPECT_LE(approx.worst, f.bound_ulps) << "at x = " << approx.at;
    EXPECT_LE(exact.worst, 2.0) << "at x = " << exact.at;  // glibc's float functions
    if (!beyond.empty()) {
      Measured far =
          measure(f, beyond, {.exact_math = false, .flush_subnormals = false}, /*absolute=*/true);
      std::printf("%-9s beyond |x| = %g: max absolute error %.3g\n", f.prim, f.bounded_below,
                  far.worst);
      EXPECT_LE(far.worst, 2.0);  // a value in [-1, 1]
    }
  }
}

}  // namespace
}  // namespace refjit::testing
