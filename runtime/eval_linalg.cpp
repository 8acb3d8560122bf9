// Interpreter rules of the matrix decompositions: the same LAPACK calls as compiled code
// (runtime/kernels/lapack.h, factorizations.h), so both backends give the same bits.
#include <complex>

#include "ir/svd_algorithm.h"
#include "refjit/ir/params.h"
#include "runtime/eval_rules.h"
#include "runtime/kernels/factorizations.h"
#include "runtime/kernels/lapack.h"

namespace refjit {

namespace {

using kernels::lapack_support::Real;

template <class T>
T* values_of(Array& a) {
  return a.mutable_values<T>().data();
}

// Calls f(T{}) for operand 0's element type (f32, f64, c64 or c128; the type rules allow no
// other).
template <class F>
void with_matrix_type(const Eqn& e, DType d, F&& f) {
  switch (d) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::c64: return f(std::complex<float>{});
    case DType::c128: return f(std::complex<double>{});
    default: bad_dtype(e, 0, d, "f32, f64, c64 or c128");
  }
}

int64_t batch_of(const Array& a) {
  int64_t b = 1;  // from the leading dims, as an empty matrix has no size to divide by
  for (int d = 0; d + 2 < a.rank(); ++d) b *= a.shape()[d];
  return b;
}

std::vector<RtValue> eval_eigh(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& a = array_in(e, ins, 0);
  Array v(cx.out_type(e, 0).array), w(cx.out_type(e, 1).array);
  const bool lower = e.params.get_or<bool>("lower", true);
  with_matrix_type(e, a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    kernels::eigh<T>(batch_of(a), a.shape().back(), lower, a.values<T>().data(), values_of<T>(v),
                     values_of<Real<T>>(w));
  });
  return {v, w};
}

std::vector<RtValue> eval_svd(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& a = array_in(e, ins, 0);
  const int64_t m = a.shape()[a.rank() - 2], n = a.shape().back();
  const bool compute_uv = e.outs.size() == 3, full = e.params.get_or<bool>("full_matrices", true);
  Array s(cx.out_type(e, 0).array);
  Array u = compute_uv ? Array(cx.out_type(e, 1).array) : Array();
  Array vt = compute_uv ? Array(cx.out_type(e, 2).array) : Array();
  with_matrix_type(e, a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    kernels::svd<T>(batch_of(a), m, n, full, svd_uses_gesvd(e.params), a.values<T>().data(),
                    values_of<Real<T>>(s), compute_uv ? values_of<T>(u) : nullptr,
                    compute_uv ? values_of<T>(vt) : nullptr);
  });
  std::vector<RtValue> out{s};
  if (compute_uv) {
    out.push_back(u);
    out.push_back(vt);
  }
  return out;
}

std::vector<RtValue> eval_eig(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& a = array_in(e, ins, 0);
  const bool left = e.params.get_or<bool>("compute_left_eigenvectors", false);
  const bool right = e.params.get_or<bool>("compute_right_eigenvectors", true);
  std::vector<Array> out;
  for (size_t i = 0; i < e.outs.size(); ++i) out.emplace_back(cx.out_type(e, i).array);
  with_matrix_type(e, a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    using C = kernels::lapack_support::Complex<T>;
    kernels::eig<T>(batch_of(a), a.shape().back(), left, right, a.values<T>().data(),
                    values_of<C>(out[0]), left ? values_of<C>(out[1]) : nullptr,
                    right ? values_of<C>(out.back()) : nullptr);
  });
  return std::vector<RtValue>(out.begin(), out.end());
}

std::vector<RtValue> eval_cholesky(const EvalContext& cx, const Eqn& e,
                                   std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& a = array_in(e, ins, 0);
  Array l(cx.out_type(e, 0).array);
  with_matrix_type(e, a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    kernels::cholesky<T>(batch_of(a), a.shape().back(), a.values<T>().data(), values_of<T>(l));
  });
  return {l};
}

std::vector<RtValue> eval_triangular_solve(const EvalContext& cx, const Eqn& e,
                                           std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& a = array_in(e, ins, 0);
  const Array& b = array_in(e, ins, 1);
  const int64_t n = a.shape().back(), rows = b.shape()[b.rank() - 2], cols = b.shape().back();
  kernels::SolveForm form;
  form.left = e.params.get_or<bool>("left_side", false);
  form.lower = e.params.get_or<bool>("lower", false);
  form.transpose_a = e.params.get_or<bool>("transpose_a", false);
  form.conjugate_a = e.params.get_or<bool>("conjugate_a", false);
  form.unit_diagonal = e.params.get_or<bool>("unit_diagonal", false);
  Array x(cx.out_type(e, 0).array);
  with_matrix_type(e, a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    kernels::triangular_solve<T>(batch_of(a), n, rows, cols, form, a.values<T>().data(),
                                 b.values<T>().data(), values_of<T>(x));
  });
  return {x};
}

std::vector<RtValue> eval_tridiagonal_solve(const EvalContext& cx, const Eqn& e,
                                            std::span<const RtValue> ins) {
  expect_operands(e, ins, 4);
  const Array& b = array_in(e, ins, 3);
  const int64_t m = b.shape()[b.rank() - 2], n = b.shape().back();
  Array x(cx.out_type(e, 0).array);
  with_matrix_type(e, b.dtype(), [&](auto zero) {
    using T = decltype(zero);
    kernels::tridiagonal_solve<T>(batch_of(b), m, n, array_in(e, ins, 0).values<T>().data(),
                                  array_in(e, ins, 1).values<T>().data(),
                                  array_in(e, ins, 2).values<T>().data(), b.values<T>().data(),
                                  values_of<T>(x));
  });
  return {x};
}

std::vector<RtValue> eval_lu(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& a = array_in(e, ins, 0);
  const int64_t m = a.shape()[a.rank() - 2], n = a.shape().back();
  Array lu(cx.out_type(e, 0).array), pivots(cx.out_type(e, 1).array),
      permutation(cx.out_type(e, 2).array);
  with_matrix_type(e, a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    kernels::lu<T>(batch_of(a), m, n, a.values<T>().data(), values_of<T>(lu),
                   values_of<int32_t>(pivots), values_of<int32_t>(permutation));
  });
  return {lu, pivots, permutation};
}

std::vector<RtValue> eval_qr(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& a = array_in(e, ins, 0);
  const int64_t m = a.shape()[a.rank() - 2], n = a.shape().back();
  const bool full = e.params.get_or<bool>("full_matrices", true);
  const bool pivoting = e.outs.size() == 3;
  Array q(cx.out_type(e, 0).array), r(cx.out_type(e, 1).array);
  Array p = pivoting ? Array(cx.out_type(e, 2).array) : Array();
  with_matrix_type(e, a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    kernels::qr<T>(batch_of(a), m, n, full, a.values<T>().data(), values_of<T>(q), values_of<T>(r),
                   pivoting ? values_of<int32_t>(p) : nullptr);
  });
  if (pivoting) return {q, r, p};
  return {q, r};
}

}  // namespace

void register_linalg_eval_rules(EvalRuleTable& t) {
  t.set(Prim::eigh, &eval_eigh);
  t.set(Prim::svd, &eval_svd);
  t.set(Prim::eig, &eval_eig);
  t.set(Prim::cholesky, &eval_cholesky);
  t.set(Prim::triangular_solve, &eval_triangular_solve);
  t.set(Prim::lu, &eval_lu);
  t.set(Prim::tridiagonal_solve, &eval_tridiagonal_solve);
  t.set(Prim::qr, &eval_qr);
}

}  // namespace refjit
