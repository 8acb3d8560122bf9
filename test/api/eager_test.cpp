// Eager ops (outside any trace) give exact values; jit caches per signature.
#include <gtest/gtest.h>

#include "refjit/refjit.h"

namespace refjit {
namespace {

Array f32s(std::vector<float> v, Shape s) { return Array::from_vector<float>(v, std::move(s)); }

TEST(Eager, ScalarConstructorsHaveCppDtypes) {
  EXPECT_EQ(Value(1.5f).dtype(), DType::f32);
  EXPECT_EQ(Value(1.5).dtype(), DType::f64);
  EXPECT_EQ(Value(3).dtype(), DType::i32);
  EXPECT_EQ(Value(int64_t{3}).dtype(), DType::i64);
  EXPECT_EQ(Value(true).dtype(), DType::bool_);
  EXPECT_TRUE(Value(3).is_weak());
  EXPECT_FALSE(Value(Array::scalar(3)).is_weak());
}

TEST(Eager, ArithmeticWithWeakScalarsKeepsArrayDtype) {
  Value x = array<float>({1, 2, 3});
  Value y = x * 2 + 1.0;
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_EQ(y.array(), f32s({3, 5, 7}, {3}));
  EXPECT_EQ((10 - x).array(), f32s({9, 8, 7}, {3}));
  EXPECT_EQ((x / 2).array(), f32s({0.5f, 1, 1.5f}, {3}));
  EXPECT_EQ((-x).array(), f32s({-1, -2, -3}, {3}));
  Value i = array<int32_t>({7, -7});
  EXPECT_EQ((i / 2).array(), Array::from_vector<int32_t>({3, -3}, {2}));
}

TEST(Eager, ScalarValueBroadcastsAgainstArray) {
  Value x = array<float>({1, 2});
  Value s = Value(Array::scalar(10.0f));
  EXPECT_EQ((x + s).array(), f32s({11, 12}, {2}));
}

TEST(Eager, ComparisonsGiveBools) {
  Value x = array<float>({1, 2, 3});
  EXPECT_EQ((x < 2).array(), Array::from_vector<bool>({true, false, false}, {3}));
  EXPECT_EQ(eq(x, 2).array(), Array::from_vector<bool>({false, true, false}, {3}));
  EXPECT_EQ(where(x >= 2, x, 0).array(), f32s({0, 2, 3}, {3}));
}

TEST(Eager, UnaryMath) {
  EXPECT_EQ(sin(Value(0.0f)).array(), Array::scalar(0.0f));
  EXPECT_EQ(exp(Value(0.0)).array(), Array::scalar(1.0));
  EXPECT_EQ(sqrt(Value(9.0f)).array(), Array::scalar(3.0f));
  EXPECT_EQ(integer_pow(Value(3.0f), 3).array(), Array::scalar(27.0f));
  EXPECT_EQ(convert(Value(2.7f), DType::i32).array(), Array::scalar<int32_t>(2));
  EXPECT_EQ(max(Value(2.0f), 5).array(), Array::scalar(5.0f));
}

TEST(Eager, ShapeOps) {
  Value x = arange(6, DType::f32);
  Value m = reshape(x, {2, 3});
  EXPECT_EQ(m.shape(), (Shape{2, 3}));
  EXPECT_EQ(transpose(m, {1, 0}).array(), f32s({0, 3, 1, 4, 2, 5}, {3, 2}));
  EXPECT_EQ(reduce_sum(m, {1}).array(), f32s({3, 12}, {2}));
  EXPECT_EQ(reduce_sum(m).array(), Array::scalar(15.0f));
  EXPECT_EQ(reduce_max(x).array(), Array::scalar(5.0f));
  EXPECT_EQ(argmax(m, 1).array(), Array::from_vector<int32_t>({2, 2}, {2}));
  EXPECT_EQ(slice(x, {1}, {5}, {2}).array(), f32s({1, 3}, {2}));
  EXPECT_EQ(dynamic_slice(x, {Value(4)}, {3}).array(), f32s({3, 4, 5}, {3}));
  EXPECT_EQ(dynamic_update_slice(zeros({4}), ones({2}), {Value(1)}).array(),
            f32s({0, 1, 1, 0}, {4}));
  EXPECT_EQ(concatenate({ones({1}), zeros({2})}, 0).array(), f32s({1, 0, 0}, {3}));
  EXPECT_EQ(broadcast_to(array<float>({1, 2}), {2, 2}).array(), f32s({1, 2, 1, 2}, {2, 2}));
  EXPECT_EQ(gather(x, array<int32_t>({5, 0})).array(), f32s({5, 0}, {2}));
  EXPECT_EQ(scatter_add(zeros({3}), array<int32_t>({1, 1}), ones({2})).array(),
            f32s({0, 2, 0}, {3}));
  EXPECT_EQ(pad(ones({2}), 0, {{1, 0, 1}}).array(), f32s({0, 1, 0, 1}, {4}));
}

TEST(Eager, MatmulAndFull) {
  Value a = array<float>({1, 2, 3, 4}, {2, 2});
  Value v = array<float>({1, 1});
  EXPECT_EQ(matmul(a, v).array(), f32s({3, 7}, {2}));
  EXPECT_EQ(full({2}, 7, DType::i32).array(), Array::from_vector<int32_t>({7, 7}, {2}));
  EXPECT_EQ(ones_like(a).array(), f32s({1, 1, 1, 1}, {2, 2}));
}

TEST(Jit, CachesOneTracePerSignature) {
  auto f = jit([](Value x) { return x * x; });
  EXPECT_EQ(f(3.0f).array(), Array::scalar(9.0f));
  EXPECT_EQ(f(4.0f).array(), Array::scalar(16.0f));
  EXPECT_EQ(f.trace_count(), 1);
  EXPECT_EQ(f(array<float>({1, 2})).array(), f32s({1, 4}, {2}));
  EXPECT_EQ(f.trace_count(), 2);
  EXPECT_EQ(f(2).array(), Array::scalar<int32_t>(4));
  EXPECT_EQ(f.trace_count(), 3);
  EXPECT_EQ(f(array<float>({3, 3})).array(), f32s({9, 9}, {2}));
  EXPECT_EQ(f.trace_count(), 3);
}

TEST(Jit, TypeErrorsNameThePrimitive) {
  auto f = jit([](Value a, Value b) { return a + b; });
  try {
    f(array<float>({1, 2}), array<float>({1, 2, 3}));
    FAIL() << "expected a TypeError";
  } catch (const TypeError& e) {
    EXPECT_NE(std::string(e.what()).find("add"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace refjit

#include "api/execute.h"

namespace refjit {
namespace {

TEST(Jit, ExecutorSeesTheSameJaxprOnEveryCallOfOneSignature) {
  std::vector<const Jaxpr*> seen;
  detail::set_executor([&](const Jaxpr& j, const std::vector<RtValue>& args) {
    seen.push_back(&j);
    return interpret(j, args);
  });
  auto f = jit([](Value x) { return exp(x) * 0; });
  Value a = f(1.0f);
  Value b = f(2.0f);
  detail::set_executor(nullptr);
  EXPECT_EQ(a.array(), Array::scalar(0.0f));
  EXPECT_EQ(b.array(), Array::scalar(0.0f));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], seen[1]);
}

}  // namespace
}  // namespace refjit
