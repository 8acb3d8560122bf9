// cholesky, triangular_solve, lu and qr from the C++ API (refjit/ops.h): each factorization
// reconstructs its matrix, every form of the triangular solve solves its system, both
// backends give the same bits (both call LAPACK), derivatives (JAX's rules) match central
// differences, and vmap equals the per-example calls.
#include <gtest/gtest.h>

#include <cmath>

#include "refjit/refjit.h"
#include "test/api/matrix_test_support.h"

namespace refjit {
namespace {

using namespace matrix_test;

// A symmetric positive definite n x n matrix.
Value spd(int64_t n, double scale) {
  Value a = ramp({n, n}, scale);
  return matmul(a, transpose(a, {1, 0})) + identity(n) * double(n);
}

// The lower (col <= row + k) or upper (col >= row + k) part of an n x n matrix.
Value part(const Value& a, bool lower, int64_t k) {
  const int64_t n = a.shape()[0];
  Value rows = broadcast_in_dim(arange(n), {n, n}, {0});
  Value cols = broadcast_in_dim(arange(n), {n, n}, {1});
  Value keep = lower ? le(cols, rows + k) : ge(cols, rows + k);
  return where(keep, a, zeros_like(a));
}

Value T(const Value& a) { return transpose(a, {1, 0}); }

TEST(Factorizations, CholeskyReconstructsItsMatrix) {
  Value a = spd(5, 0.7);
  Value l = cholesky(a);
  expect_near(matmul(l, T(l)), a, 1e-12);
  expect_same_bits(part(l, /*lower=*/false, 1), zeros_like(l));  // nothing above the diagonal
}

TEST(Factorizations, CholeskyOfAnIndefiniteMatrixIsNan) {
  Value a = identity(3) - 2.0;  // eigenvalues -5, 1, 1
  Array l = cholesky(a).array();
  for (int64_t i = 0; i < l.size(); ++i) EXPECT_TRUE(std::isnan(l.as_double(i))) << i;
}

TEST(Factorizations, EveryTriangularSolveSolvesItsSystem) {
  for (int f = 0; f < 16; ++f) {
    TriangularSolveOptions o{.left_side = (f & 1) != 0,
                             .lower = (f & 2) != 0,
                             .transpose_a = (f & 4) != 0,
                             .unit_diagonal = (f & 8) != 0};
    Value a = ramp({4, 4}, 0.8) + identity(4) * 3.0;
    Value b = o.left_side ? ramp({4, 3}, 0.5) : ramp({3, 4}, 0.5);
    Value x = triangular_solve(a, b, o);
    // The matrix the solve reads: one triangle, its diagonal 1 with unit_diagonal.
    Value tri = part(a, o.lower, o.unit_diagonal ? (o.lower ? -1 : 1) : 0);
    if (o.unit_diagonal) tri = tri + identity(4);
    Value op = o.transpose_a ? T(tri) : tri;
    expect_near(o.left_side ? matmul(op, x) : matmul(x, op), b, 1e-12);
  }
}

TEST(Factorizations, LuReconstructsThePermutedMatrix) {
  for (Ints shape : {Ints{5, 3}, Ints{3, 5}, Ints{4, 4}}) {
    const int64_t m = shape[0], n = shape[1], k = std::min(m, n);
    Value a = ramp(shape, 0.9);
    auto [factors, pivots, permutation] = lu(a);
    EXPECT_EQ(pivots.shape(), (Shape{k}));
    // Rows of P^T a: row i is row permutation[i] of a (a one-hot product, exact here).
    Value p = convert(
        eq(broadcast_in_dim(permutation, {m, m}, {0}), broadcast_in_dim(arange(m), {m, m}, {1})),
        DType::f64);
    Value l = slice(factors, {0, 0}, {m, k});
    l = where(
            lt(broadcast_in_dim(arange(k), {m, k}, {1}), broadcast_in_dim(arange(m), {m, k}, {0})),
            l, zeros_like(l)) +
        slice(identity(std::max(m, n)), {0, 0}, {m, k});
    Value u = slice(factors, {0, 0}, {k, n});
    u = where(
        ge(broadcast_in_dim(arange(n), {k, n}, {1}), broadcast_in_dim(arange(k), {k, n}, {0})), u,
        zeros_like(u));
    expect_near(matmul(l, u), matmul(p, a), 1e-12);
  }
}

TEST(Factorizations, QrReconstructsItsMatrixInEveryShape) {
  for (Ints shape : {Ints{5, 3}, Ints{3, 5}, Ints{4, 4}}) {
    for (bool full : {false, true}) {
      Value a = ramp(shape, 0.45);
      auto [q, r] = qr(a, full);
      const int64_t cols = full ? shape[0] : std::min(shape[0], shape[1]);
      EXPECT_EQ(q.shape(), (Shape{shape[0], cols}));
      expect_near(matmul(q, r), a, 1e-12);
      expect_near(matmul(T(q), q), identity(cols), 1e-12);
    }
  }
}

TEST(Factorizations, NativeAndInterpreterGiveTheSameBits) {
  Value s = spd(5, 0.3), g = ramp({2, 5, 3}, 0.8), b = ramp({5, 2}, 0.4);
  auto f = [](const Value& s, const Value& g, const Value& b) {
    Value l = cholesky(s);
    Value x = triangular_solve(l, b, {.left_side = true, .lower = true});
    auto [factors, pivots, permutation] = lu(g);
    auto [q, r] = qr(g, /*full_matrices=*/true);
    return std::tuple{l, x, factors, pivots, permutation, q, r};
  };
  auto native = jit(f, {.backend = Backend::native})(s, g, b);
  auto interpreted = jit(f, {.backend = Backend::interpreter})(s, g, b);
  std::apply(
      [&](const auto&... n) {
        std::apply([&](const auto&... i) { (expect_same_bits(n, i), ...); }, interpreted);
      },
      native);
}

// The directional derivative of `loss` along t, against the central difference.
template <class Loss>
void expect_gradient_matches_central_difference(Loss loss, const Value& a, const Value& t,
                                                const char* what) {
  for (Backend backend : {Backend::native, Backend::interpreter}) {
    Value g = jit(grad(loss), {.backend = backend})(a);
    const double directional = reduce_sum(g * t).array().as_double(0);
    const double eps = 1e-6;
    const double numeric =
        (loss(a + t * eps).array().as_double(0) - loss(a - t * eps).array().as_double(0)) /
        (2 * eps);
    EXPECT_NEAR(directional, numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << what;
  }
}

TEST(Factorizations, GradientsMatchCentralDifferences) {
  Value s = spd(4, 0.9), t = ramp({4, 4}, 1.7);
  expect_gradient_matches_central_difference(
      [](const Value& s) {
        Value sym = (s + T(s)) * 0.5;
        return reduce_sum(sin(cholesky(sym)));
      },
      s, t, "cholesky");
  Value tri = ramp({4, 4}, 0.8) + identity(4) * 3.0, b = ramp({4, 2}, 0.4);
  for (bool left : {true, false}) {
    Value rhs = left ? b : T(b);
    expect_gradient_matches_central_difference(
        [&](const Value& a) {
          return reduce_sum(sin(triangular_solve(a, rhs, {.left_side = left, .lower = true})));
        },
        tri, t, left ? "triangular_solve, left" : "triangular_solve, right");
  }
  for (Ints shape : {Ints{5, 3}, Ints{3, 5}, Ints{4, 4}}) {
    Value a = ramp(shape, 0.6), d = ramp(shape, 1.3);
    expect_gradient_matches_central_difference(
        [](const Value& a) { return reduce_sum(sin(lu(a).factors)); }, a, d, "lu");
    for (bool full : {false, true}) {
      expect_gradient_matches_central_difference(
          [full](const Value& a) {
            auto [q, r] = qr(a, full);
            return reduce_sum(sin(q)) + reduce_sum(integer_pow(r, 3));
          },
          a, d, full ? "qr, full" : "qr, reduced");
    }
  }
}

TEST(Factorizations, VmapEqualsThePerExampleCalls) {
  Value as = ramp({3, 4, 4}, 0.5), bs = ramp({3, 4, 2}, 0.7);
  auto [x, q] = jit(vmap([](const Value& a, const Value& b) {
    Value spd_a = matmul(a, T(a)) + identity(4) * 4.0;
    Value l = cholesky(spd_a);
    return std::pair{triangular_solve(l, b, {.left_side = true, .lower = true}), qr(a).q};
  }))(as, bs);
  for (int64_t k = 0; k < 3; ++k) {
    Value l = cholesky(matmul(as[k], T(as[k])) + identity(4) * 4.0);
    expect_same_bits(x[k], triangular_solve(l, bs[k], {.left_side = true, .lower = true}));
    expect_same_bits(q[k], qr(as[k]).q);
  }
}

TEST(Factorizations, EigSatisfiesItsEquationsAndBothBackendsAgree) {
  Value a = ramp({4, 4}, 0.9);  // a general real matrix
  auto f = [](const Value& a) {
    auto [w, vl, vr] = eig(a, /*left=*/true);
    return std::tuple{w, vl, vr};
  };
  auto [w, vl, vr] = jit(f, {.backend = Backend::native})(a);
  auto interpreted = jit(f, {.backend = Backend::interpreter})(a);
  expect_same_bits(w, std::get<0>(interpreted));
  expect_same_bits(vr, std::get<2>(interpreted));
  EXPECT_EQ(w.dtype(), DType::c128);
  // a v = v diag(w) and u^H a = diag(w) u^H, in complex arithmetic.
  Value ac = convert(a, DType::c128);
  Value diag_w = broadcast_in_dim(w, {4, 4}, {1});
  Value residual = abs(matmul(ac, vr) - vr * diag_w);
  Value u_h = conj(transpose(vl, {1, 0}));
  Value left_residual = abs(matmul(u_h, ac) - transpose(diag_w, {1, 0}) * u_h);
  EXPECT_LT(reduce_max(residual).array().as_double(0), 1e-12);
  EXPECT_LT(reduce_max(left_residual).array().as_double(0), 1e-12);
}

TEST(Factorizations, TridiagonalSolveSolvesItsSystemAndItsGradientMatchesCentralDifferences) {
  Value dl = ramp({5}, 0.3), d = ramp({5}, 0.7) + 3.0, du = ramp({5}, 1.1);
  Value b = ramp({5, 2}, 0.5);
  Value x = tridiagonal_solve(dl, d, du, b);
  // The dense matrix: d on the diagonal, dl[i] at (i, i - 1), du[i] at (i, i + 1).
  Value rows = broadcast_in_dim(arange(5), {5, 5}, {0}),
        cols = broadcast_in_dim(arange(5), {5, 5}, {1});
  auto at = [&](const Value& v, int64_t offset) {
    return where(eq(cols, rows + offset), broadcast_in_dim(v, {5, 5}, {0}),
                 zeros({5, 5}, DType::f64));
  };
  expect_near(matmul(at(dl, -1) + at(d, 0) + at(du, 1), x), b, 1e-12);
  expect_gradient_matches_central_difference(
      [&](const Value& d) { return reduce_sum(sin(tridiagonal_solve(dl, d, du, b))); }, d,
      ramp({5}, 1.9), "tridiagonal_solve, diagonal");
  expect_gradient_matches_central_difference(
      [&](const Value& b) { return reduce_sum(sin(tridiagonal_solve(dl, d, du, b))); }, b,
      ramp({5, 2}, 1.3), "tridiagonal_solve, right-hand side");
}

TEST(Factorizations, ErrorsNameTheOperandAndWhatIsNeeded) {
  try {
    triangular_solve(identity(3), ramp({4, 2}, 0.5), {.left_side = true});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rows (4) must match operand 0's order 3"),
              std::string::npos)
        << e.what();
  }
  try {
    grad([](const Value& a) { return reduce_sum(real(eig(a).right)); })(ramp({3, 3}, 0.5));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("enable_eigvec_derivs=True"), std::string::npos)
        << e.what();
  }
  try {
    cholesky(ramp({3, 4}, 0.5));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("square"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace refjit
