// The flat layer (namespace refjit::flat, docs/api.md): each transformation called on a
// TraceBody and flat operands, as a binding would, gives what its template gives; and the
// public headers hold only API.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "refjit/refjit.h"

namespace refjit {
namespace {

Value ramp(int64_t n, float scale) { return sin(convert(arange(n), DType::f32) * scale) + 0.5f; }

void expect_equal(const Operand& got, const Value& want) {
  const Value& g = std::get<Value>(got);
  ASSERT_EQ(g.type(), want.type());
  Array a = g.array(), b = want.array();
  for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(a.as_double(i), b.as_double(i)) << i;
}

// sum(sin(x) * y), flat.
std::vector<Operand> loss(const std::vector<Operand>& in) {
  return {reduce_sum(sin(std::get<Value>(in[0])) * std::get<Value>(in[1]))};
}

TEST(FlatLayer, GradOfAFlatBodyIsTheTemplatesGradient) {
  Value x = ramp(5, 0.7f), y = ramp(5, 0.3f);
  std::vector<Operand> out = flat::grad(loss, {x, y}, {0, 1}, "loss");
  ASSERT_EQ(out.size(), 3u);
  auto f = [](const Value& a, const Value& b) { return reduce_sum(sin(a) * b); };
  auto [value, grads] = value_and_grad(f, std::vector<int>{0, 1})(x, y);
  expect_equal(out[0], value);
  expect_equal(out[1], grads[0]);
  expect_equal(out[2], grads[1]);
  // d/dx = cos(x) * y, d/dy = sin(x).
  Array gx = std::get<Value>(out[1]).array(), gy = std::get<Value>(out[2]).array();
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(gx.as_double(i), std::cos(x.array().as_double(i)) * y.array().as_double(i), 1e-6);
    EXPECT_NEAR(gy.as_double(i), std::sin(x.array().as_double(i)), 1e-6);
  }
  EXPECT_THROW(flat::leaf_argnums({2}, {0, 1, 2}, "loss"), Error);
}

TEST(FlatLayer, VjpAndLinearMapApplyManyTimes) {
  Value x = ramp(4, 0.9f), y = ramp(4, 0.2f);
  auto [outs, backward] = flat::Vjp::create(loss, {x, y}, "loss");
  ASSERT_EQ(outs.size(), 1u);
  std::vector<Grad> g1 = backward.apply({Value(1.0f)});
  std::vector<Grad> g2 = backward.apply({Value(2.0f)});
  auto [value, grads] =
      value_and_grad([](const Value& a, const Value& b) { return reduce_sum(sin(a) * b); },
                     std::vector<int>{0, 1})(x, y);
  expect_equal(outs[0], value);
  expect_equal(g1[0].value(), grads[0]);
  expect_equal(g2[1].value(), grads[1] * 2.0f);

  auto [louts, lin] = flat::LinearMap::create(loss, {x, y}, "loss");
  expect_equal(louts[0], value);
  Value tx = ramp(4, 0.4f), zero = zeros({4});
  // J (tx, 0) = sum(cos(x) * y * tx)
  std::vector<Operand> t = lin.apply({tx, zero});
  EXPECT_NEAR(std::get<Value>(t[0]).item(), reduce_sum(grads[0] * tx).item(), 1e-5);
}

TEST(FlatLayer, JitTracesOncePerSignatureWhicheverBackend) {
  for (Backend backend : {Backend::interpreter, Backend::native}) {
    int calls = 0;
    flat::Jit jit(JitOptions{.backend = backend, .name = "twice"});
    TraceBody body = [&](const std::vector<Operand>& in) {
      ++calls;
      return std::vector<Operand>{std::get<Value>(in[0]) * 2.0f};
    };
    Value a = ramp(3, 0.5f), b = ramp(3, 0.6f), c = ramp(7, 0.5f);
    expect_equal(jit.call(body, std::vector<Operand>{a}, {1})[0], a * 2.0f);
    expect_equal(jit.call(body, std::vector<Operand>{b}, {1})[0], b * 2.0f);
    EXPECT_EQ(jit.trace_count(), 1);
    expect_equal(jit.call(body, std::vector<Operand>{c}, {1})[0], c * 2.0f);
    EXPECT_EQ(jit.trace_count(), 2);
    EXPECT_EQ(calls, 2);  // the body runs only to trace
    EXPECT_EQ(jit.compile_count() > 0, backend == Backend::native);
    EXPECT_EQ(jit.options().name, "twice");
  }
}

TEST(FlatLayer, LoopsAndBranchesOnFlatOperands) {
  // scan: carry + row, ys = running sums.
  Value xs = ramp(6, 0.3f);
  TraceBody step = [](const std::vector<Operand>& in) {
    Value c = std::get<Value>(in[0]) + std::get<Value>(in[1]);
    return std::vector<Operand>{c, c};
  };
  std::vector<Operand> out = flat::scan(step, {Value(0.0f)}, {xs}, {}, "scan");
  ASSERT_EQ(out.size(), 2u);
  auto [total, sums] = scan(
      [](const Value& c, const Value& x) {
        return std::pair{c + x, c + x};
      },
      Value(0.0f), xs);
  expect_equal(out[0], total);
  expect_equal(out[1], sums);

  // while: double until >= 100.
  TraceBody below = [](const std::vector<Operand>& in) {
    return std::vector<Operand>{std::get<Value>(in[0]) < 100.0f};
  };
  TraceBody twice = [](const std::vector<Operand>& in) {
    return std::vector<Operand>{std::get<Value>(in[0]) * 2.0f};
  };
  EXPECT_EQ(std::get<Value>(flat::while_loop(below, twice, {Value(3.0f)}, "while")[0]).item(),
            192.0);

  // cond: branch 1 of three; an integer predicate becomes a bool index.
  std::vector<TraceBody> branches;
  for (float k : {10.0f, 20.0f, 30.0f})
    branches.push_back([k](const std::vector<Operand>& in) {
      return std::vector<Operand>{std::get<Value>(in[0]) + k};
    });
  EXPECT_EQ(std::get<Value>(flat::cond(Value(1), branches, {Value(1.0f)}, "switch")[0]).item(),
            21.0);
  EXPECT_EQ(flat::cond_index_of_pred(Value(7)).dtype(), DType::bool_);
}

TEST(FlatLayer, VmapAndCheckpointOnFlatOperands) {
  Value xs = reshape(ramp(6, 0.3f), {3, 2});
  TraceBody total = [](const std::vector<Operand>& in) {
    return std::vector<Operand>{reduce_sum(std::get<Value>(in[0]))};
  };
  std::vector<Operand> rows = flat::vmap(total, {xs}, {0}, {0}, "vmap");
  expect_equal(rows[0], reduce_sum(xs, {1}));
  std::vector<Operand> same = flat::checkpoint(total, {xs}, "nothing_saveable", "checkpoint");
  expect_equal(same[0], reduce_sum(xs));
  EXPECT_THROW(flat::vmap(total, {xs}, {std::nullopt}, {0}, "vmap"), Error);
}

TEST(FlatLayer, JacobianOfAStdFunction) {
  Value x = ramp(3, 0.8f);
  std::function<Value(const Value&)> f = [](const Value& v) { return sin(v) * 3.0f; };
  Value fwd = flat::jacobian(f, "f", x, false), rev = flat::jacobian(f, "f", x, true);
  ASSERT_EQ(fwd.shape(), (Shape{3, 3}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      const double want = i == j ? 3 * std::cos(x.array().as_double(i)) : 0.0;
      EXPECT_NEAR(fwd.array().as_double(i * 3 + j), want, 1e-6);
      EXPECT_NEAR(rev.array().as_double(i * 3 + j), want, 1e-6);
    }
  EXPECT_THROW(flat::jacobian(f, "f", Value(1), false), TypeError);
}

// The installed headers are the API and nothing else: no `detail` namespace, no include of
// the library's own directories.
TEST(PublicHeaders, HoldOnlyTheApi) {
  const char* data = std::getenv("REFJIT_TEST_DATA");
  ASSERT_NE(data, nullptr);
  const std::filesystem::path include = std::filesystem::path(data) / ".." / "include" / "refjit";
  ASSERT_TRUE(std::filesystem::is_directory(include)) << include;
  const std::regex internal(
      R"(namespace\s+(\w+::)*detail\b|\bdetail::|#include\s+"(compiler|passes|runtime|ir|tools)/)");
  int headers = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(include)) {
    if (entry.is_directory()) {
      EXPECT_NE(entry.path().filename(), "detail") << entry.path();
      continue;
    }
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    std::smatch m;
    const std::string s = text.str();
    EXPECT_FALSE(std::regex_search(s, m, internal)) << entry.path() << " has `" << m.str() << "`";
    ++headers;
  }
  EXPECT_GT(headers, 20);
}

}  // namespace
}  // namespace refjit
