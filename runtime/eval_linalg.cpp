// Interpreter rules of the matrix decompositions: the same LAPACK calls as compiled code
// (runtime/kernels/lapack.h), so both backends give the same bits.
#include "refjit/ir/params.h"
#include "runtime/eval_rules.h"
#include "runtime/kernels/factorizations.h"
#include "runtime/kernels/lapack.h"

namespace refjit {

namespace {

template <class T>
T* values_of(Array& a) {
  return a.mutable_values<T>().data();
}

std::vector<RtValue> eval_eigh(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& a = array_in(e, ins, 0);
  const int64_t n = a.shape().back();
  int64_t batch = 1;
  for (int d = 0; d + 2 < a.rank(); ++d) batch *= a.shape()[d];
  Array v(cx.out_type(e, 0).array), w(cx.out_type(e, 1).array);
  const bool lower = e.params.get_or<bool>("lower", true);
  if (a.dtype() == DType::f32)
    kernels::eigh<float>(batch, n, lower, a.values<float>().data(), values_of<float>(v),
                         values_of<float>(w));
  else if (a.dtype() == DType::f64)
    kernels::eigh<double>(batch, n, lower, a.values<double>().data(), values_of<double>(v),
                          values_of<double>(w));
  else
    bad_dtype(e, 0, a.dtype(), "f32 or f64");
  return {v, w};
}

std::vector<RtValue> eval_svd(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& a = array_in(e, ins, 0);
  const int64_t m = a.shape()[a.rank() - 2], n = a.shape().back();
  const bool compute_uv = e.outs.size() == 3, full = e.params.get_or<bool>("full_matrices", true);
  std::vector<RtValue> out;
  Array s(cx.out_type(e, 0).array);
  Array u = compute_uv ? Array(cx.out_type(e, 1).array) : Array();
  Array vt = compute_uv ? Array(cx.out_type(e, 2).array) : Array();
  int64_t b = 1;  // from the leading dims, as an empty matrix has no size to divide by
  for (int d = 0; d + 2 < a.rank(); ++d) b *= a.shape()[d];
  if (a.dtype() == DType::f32)
    kernels::svd<float>(b, m, n, full, a.values<float>().data(), values_of<float>(s),
                        compute_uv ? values_of<float>(u) : nullptr,
                        compute_uv ? values_of<float>(vt) : nullptr);
  else if (a.dtype() == DType::f64)
    kernels::svd<double>(b, m, n, full, a.values<double>().data(), values_of<double>(s),
                         compute_uv ? values_of<double>(u) : nullptr,
                         compute_uv ? values_of<double>(vt) : nullptr);
  else
    bad_dtype(e, 0, a.dtype(), "f32 or f64");
  out.push_back(s);
  if (compute_uv) {
    out.push_back(u);
    out.push_back(vt);
  }
  return out;
}

int64_t batch_of(const Array& a) {
  int64_t b = 1;  // from the leading dims, as an empty matrix has no size to divide by
  for (int d = 0; d + 2 < a.rank(); ++d) b *= a.shape()[d];
  return b;
}

std::vector<RtValue> eval_cholesky(const EvalContext& cx, const Eqn& e,
                                   std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& a = array_in(e, ins, 0);
  const int64_t n = a.shape().back();
  Array l(cx.out_type(e, 0).array);
  if (a.dtype() == DType::f32)
    kernels::cholesky<float>(batch_of(a), n, a.values<float>().data(), values_of<float>(l));
  else if (a.dtype() == DType::f64)
    kernels::cholesky<double>(batch_of(a), n, a.values<double>().data(), values_of<double>(l));
  else
    bad_dtype(e, 0, a.dtype(), "f32 or f64");
  return {l};
}

std::vector<RtValue> eval_triangular_solve(const EvalContext& cx, const Eqn& e,
                                           std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const Array& a = array_in(e, ins, 0);
  const Array& b = array_in(e, ins, 1);
  const int64_t n = a.shape().back(), rows = b.shape()[b.rank() - 2], cols = b.shape().back();
  const bool left = e.params.get_or<bool>("left_side", false);
  const bool lower = e.params.get_or<bool>("lower", false);
  const bool transpose_a = e.params.get_or<bool>("transpose_a", false);
  const bool unit = e.params.get_or<bool>("unit_diagonal", false);
  Array x(cx.out_type(e, 0).array);
  if (a.dtype() == DType::f32)
    kernels::triangular_solve<float>(batch_of(a), n, rows, cols, left, lower, transpose_a, unit,
                                     a.values<float>().data(), b.values<float>().data(),
                                     values_of<float>(x));
  else if (a.dtype() == DType::f64)
    kernels::triangular_solve<double>(batch_of(a), n, rows, cols, left, lower, transpose_a, unit,
                                      a.values<double>().data(), b.values<double>().data(),
                                      values_of<double>(x));
  else
    bad_dtype(e, 0, a.dtype(), "f32 or f64");
  return {x};
}

std::vector<RtValue> eval_lu(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& a = array_in(e, ins, 0);
  const int64_t m = a.shape()[a.rank() - 2], n = a.shape().back();
  Array lu(cx.out_type(e, 0).array), pivots(cx.out_type(e, 1).array),
      permutation(cx.out_type(e, 2).array);
  if (a.dtype() == DType::f32)
    kernels::lu<float>(batch_of(a), m, n, a.values<float>().data(), values_of<float>(lu),
                       values_of<int32_t>(pivots), values_of<int32_t>(permutation));
  else if (a.dtype() == DType::f64)
    kernels::lu<double>(batch_of(a), m, n, a.values<double>().data(), values_of<double>(lu),
                        values_of<int32_t>(pivots), values_of<int32_t>(permutation));
  else
    bad_dtype(e, 0, a.dtype(), "f32 or f64");
  return {lu, pivots, permutation};
}

std::vector<RtValue> eval_qr(const EvalContext& cx, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& a = array_in(e, ins, 0);
  const int64_t m = a.shape()[a.rank() - 2], n = a.shape().back();
  const bool full = e.params.get_or<bool>("full_matrices", true);
  Array q(cx.out_type(e, 0).array), r(cx.out_type(e, 1).array);
  if (a.dtype() == DType::f32)
    kernels::qr<float>(batch_of(a), m, n, full, a.values<float>().data(), values_of<float>(q),
                       values_of<float>(r));
  else if (a.dtype() == DType::f64)
    kernels::qr<double>(batch_of(a), m, n, full, a.values<double>().data(), values_of<double>(q),
                        values_of<double>(r));
  else
    bad_dtype(e, 0, a.dtype(), "f32 or f64");
  return {q, r};
}

}  // namespace

void register_linalg_eval_rules(EvalRuleTable& t) {
  t.set(Prim::eigh, &eval_eigh);
  t.set(Prim::svd, &eval_svd);
  t.set(Prim::cholesky, &eval_cholesky);
  t.set(Prim::triangular_solve, &eval_triangular_solve);
  t.set(Prim::lu, &eval_lu);
  t.set(Prim::qr, &eval_qr);
}

}  // namespace refjit
