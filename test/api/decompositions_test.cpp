// eigh and svd from the C++ API (refjit/ops.h): the decompositions reconstruct their matrix,
// the native and interpreter backends give the same bits (both call LAPACK), derivatives
// match central differences, and vmap equals the per-example calls.
#include <gtest/gtest.h>

#include <cmath>

#include "refjit/refjit.h"
#include "test/api/matrix_test_support.h"

namespace refjit {
namespace {

using namespace matrix_test;

Value symmetric(int64_t n, double scale) {
  Value a = ramp({n, n}, scale);
  return (a + transpose(a, {1, 0})) * 0.5;
}

TEST(Decompositions, EighReconstructsItsMatrixAndSortsEigenvalues) {
  Value a = symmetric(5, 0.7);
  auto [v, w] = eigh(a);
  Array values = w.array();
  for (int64_t i = 1; i < values.size(); ++i)
    EXPECT_LE(values.as_double(i - 1), values.as_double(i));
  // v diag(w) v^T == a, and v^T v == I.
  Value scaled = v * broadcast_in_dim(w, {5, 5}, {1});
  expect_near(matmul(scaled, transpose(v, {1, 0})), a, 1e-12);
  expect_near(matmul(transpose(v, {1, 0}), v), identity(5), 1e-12);
}

TEST(Decompositions, SvdReconstructsItsMatrixInEveryShape) {
  for (Ints shape : {Ints{6, 4}, Ints{4, 6}, Ints{5, 5}}) {
    Value a = ramp(shape, 0.45);
    auto [u, s, vt] = svd(a);
    const int64_t k = std::min(shape[0], shape[1]);
    Value us = u * broadcast_in_dim(s, {shape[0], k}, {1});
    expect_near(matmul(us, vt), a, 1e-12);
    // Without vectors LAPACK takes another path: equal up to rounding.
    expect_near(svd_values(a), s, 1e-12);
    auto full = svd(a, /*full_matrices=*/true);
    EXPECT_EQ(full.u.shape(), (Shape{shape[0], shape[0]}));
    EXPECT_EQ(full.vt.shape(), (Shape{shape[1], shape[1]}));
    expect_near(matmul(full.u, transpose(full.u, {1, 0})), identity(shape[0]), 1e-12);
    expect_near(matmul(full.vt, transpose(full.vt, {1, 0})), identity(shape[1]), 1e-12);
  }
}

TEST(Decompositions, NativeAndInterpreterGiveTheSameBits) {
  Value a = symmetric(6, 0.3), b = ramp({2, 5, 3}, 0.8);
  auto f = [](const Value& a, const Value& b) {
    auto [v, w] = eigh(a);
    auto [u, s, vt] = svd(b);
    return std::tuple{v, w, u, s, vt};
  };
  auto native = jit(f, {.backend = Backend::native})(a, b);
  auto interpreted = jit(f, {.backend = Backend::interpreter})(a, b);
  expect_same_bits(std::get<0>(native), std::get<0>(interpreted));
  expect_same_bits(std::get<1>(native), std::get<1>(interpreted));
  expect_same_bits(std::get<2>(native), std::get<2>(interpreted));
  expect_same_bits(std::get<3>(native), std::get<3>(interpreted));
  expect_same_bits(std::get<4>(native), std::get<4>(interpreted));
}

// sum_i c_i w_i + sum of the cubes of the first eigenvector, and its central difference
// along a symmetric direction.
double eigh_loss(const Value& a) {
  auto [v, w] = eigh(a);
  Value c = convert(arange(4), DType::f64) + 1.0;
  Value first = slice(v, {0, 0}, {4, 1});
  return reduce_sum(w * c + integer_pow(reshape(first, {4}), 3)).array().as_double(0);
}

TEST(Decompositions, EighGradientMatchesCentralDifferences) {
  Value a = symmetric(4, 0.9), t = symmetric(4, 1.7);
  auto loss = [](const Value& a) {
    auto [v, w] = eigh(a);
    Value c = convert(arange(4), DType::f64) + 1.0;
    Value first = slice(v, {0, 0}, {4, 1});
    return reduce_sum(w * c + integer_pow(reshape(first, {4}), 3));
  };
  for (Backend backend : {Backend::native, Backend::interpreter}) {
    Value g = jit(grad(loss), {.backend = backend})(a);
    const double directional = reduce_sum(g * t).array().as_double(0);
    const double eps = 1e-6;
    const double numeric = (eigh_loss(a + t * eps) - eigh_loss(a - t * eps)) / (2 * eps);
    EXPECT_NEAR(directional, numeric, 1e-6);
  }
}

TEST(Decompositions, SvdGradientMatchesCentralDifferences) {
  for (Ints shape : {Ints{5, 3}, Ints{3, 5}, Ints{4, 4}}) {
    Value a = ramp(shape, 0.6), t = ramp(shape, 1.3);
    auto loss = [](const Value& a) {
      auto [u, s, vt] = svd(a);
      return reduce_sum(s * s) + reduce_sum(integer_pow(u, 3)) + reduce_sum(sin(vt));
    };
    Value g = jit(grad(loss))(a);
    const double directional = reduce_sum(g * t).array().as_double(0);
    const double eps = 1e-6;
    const double numeric =
        (loss(a + t * eps).array().as_double(0) - loss(a - t * eps).array().as_double(0)) /
        (2 * eps);
    EXPECT_NEAR(directional, numeric, 1e-6) << "shape " << shape[0] << "x" << shape[1];
    // The nuclear norm's gradient is u vt.
    auto [u, s, vt] = svd(a);
    expect_near(jit(grad([](const Value& a) { return reduce_sum(svd_values(a)); }))(a),
                matmul(u, vt), 1e-12);
  }
}

TEST(Decompositions, VmapEqualsThePerExampleCalls) {
  Value as = ramp({3, 4, 4}, 0.5);
  auto [v, w] = jit(vmap([](const Value& a) {
    auto [v, w] = eigh(a);
    return std::pair{v, w};
  }))(as);
  auto [u, s, vt] = vmap([](const Value& a) {
    auto r = svd(a);
    return std::tuple{r.u, r.s, r.vt};
  })(as);
  for (int64_t k = 0; k < 3; ++k) {
    auto one = eigh(as[k]);
    expect_same_bits(v[k], one.vectors);
    expect_same_bits(w[k], one.values);
    auto sv = svd(as[k]);
    expect_same_bits(u[k], sv.u);
    expect_same_bits(s[k], sv.s);
    expect_same_bits(vt[k], sv.vt);
  }
}

TEST(Decompositions, RefusalsSayWhatIsSupported) {
  Value wide = ramp({3, 5}, 0.5);
  try {
    grad([](const Value& a) { return reduce_sum(svd(a, /*full_matrices=*/true).u); })(wide);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("full_matrices=False"), std::string::npos) << e.what();
  }
  try {
    eigh(convert(wide, DType::i32));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f32, f64, c64 and c128"), std::string::npos) << e.what();
  }
  try {
    eigh(wide);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("square"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace refjit
