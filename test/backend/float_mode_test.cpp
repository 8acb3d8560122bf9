// Native code flushes subnormals to zero, as XLA's CPU backend does (runtime/kernels/
// float_mode.h): subnormal results become zero and subnormal operands read as zero, on the
// calling thread and on the pool's threads that run parallel loops; the caller's own mode is
// restored after the call. flush_subnormals = false computes with them, as the interpreter does.
#include "runtime/kernels/float_mode.h"

#include <fmt/format.h>

#include <limits>

#include "test_util.h"

namespace refjit::testing {
namespace {

Array filled(int64_t n, float v) {
  Array a(at(DType::f32, {n}));
  for (int64_t i = 0; i < n; ++i) a.set_from_double(i, v);
  return a;
}

// x * y for n elements: with n = 262144 the loop runs on the pool's threads as well.
std::vector<float> product(int64_t n, float x, float y, const CompileOptions& options) {
  const Jaxpr j = parse_jaxpr(
      fmt::format("{{ lambda ; a:f32[{0}] b:f32[{0}]. let c:f32[{0}] = mul a b in (c,) }}", n));
  const Array out = as_array(compile_native(j, options)({filled(n, x), filled(n, y)})[0]);
  std::vector<float> v;
  for (int64_t i = 0; i < out.size(); ++i) v.push_back(static_cast<float>(out.as_double(i)));
  return v;
}

TEST(FloatMode, SubnormalResultsAndOperandsAreFlushedToZeroByDefault) {
  const float tiny = 1e-40f;  // subnormal in f32
  ASSERT_LT(tiny, std::numeric_limits<float>::min());
  for (int64_t n : {4, 262144}) {
    SCOPED_TRACE(n);
    for (float v : product(n, 1e-20f, 1e-20f, {})) EXPECT_EQ(v, 0.0f);  // result flushed
    for (float v : product(n, tiny, 1.0f, {})) EXPECT_EQ(v, 0.0f);      // operand read as zero
    for (float v : product(n, 1e-20f, 1e-20f, {.flush_subnormals = false}))
      EXPECT_EQ(v, 1e-20f * 1e-20f);
    for (float v : product(n, tiny, 1.0f, {.flush_subnormals = false})) EXPECT_EQ(v, tiny);
  }
}

TEST(FloatMode, TheCallersModeIsRestored) {
  const uint32_t before = kernels::current_float_mode();
  product(262144, 1e-20f, 1e-20f, {});
  EXPECT_EQ(kernels::current_float_mode(), before);
  // And this thread still computes with subnormals.
  volatile float a = 1e-20f, b = 1e-20f;
  EXPECT_GT(a * b, 0.0f);
}

}  // namespace
}  // namespace refjit::testing
