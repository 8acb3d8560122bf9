#include "runtime/kernels/factorizations.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "runtime/kernels/lapack_support.h"

// LAPACK's and BLAS's Fortran entries: every argument by address, then the hidden lengths of
// the character arguments.
extern "C" {
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void strsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m,
            const int* n, const float* alpha, const float* a, const int* lda, float* b,
            const int* ldb, size_t, size_t, size_t, size_t);
void dtrsm_(const char* side, const char* uplo, const char* transa, const char* diag, const int* m,
            const int* n, const double* alpha, const double* a, const int* lda, double* b,
            const int* ldb, size_t, size_t, size_t, size_t);
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work,
             const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau,
             float* work, const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
}

namespace refjit::kernels {

using namespace lapack_support;

namespace {

// Overloads on the element type.
void potrf(const char* uplo, const int* n, float* a, const int* lda, int* info) {
  spotrf_(uplo, n, a, lda, info, 1);
}
void potrf(const char* uplo, const int* n, double* a, const int* lda, int* info) {
  dpotrf_(uplo, n, a, lda, info, 1);
}
void trsm(const char* side, const char* uplo, const char* transa, const char* diag, const int* m,
          const int* n, const float* a, const int* lda, float* b, const int* ldb) {
  const float one = 1;
  strsm_(side, uplo, transa, diag, m, n, &one, a, lda, b, ldb, 1, 1, 1, 1);
}
void trsm(const char* side, const char* uplo, const char* transa, const char* diag, const int* m,
          const int* n, const double* a, const int* lda, double* b, const int* ldb) {
  const double one = 1;
  dtrsm_(side, uplo, transa, diag, m, n, &one, a, lda, b, ldb, 1, 1, 1, 1);
}
void getrf(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info) {
  sgetrf_(m, n, a, lda, ipiv, info);
}
void getrf(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info) {
  dgetrf_(m, n, a, lda, ipiv, info);
}
void geqrf(const int* m, const int* n, float* a, const int* lda, float* tau, float* work,
           const int* lwork, int* info) {
  sgeqrf_(m, n, a, lda, tau, work, lwork, info);
}
void geqrf(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
           const int* lwork, int* info) {
  dgeqrf_(m, n, a, lda, tau, work, lwork, info);
}
void orgqr(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau,
           float* work, const int* lwork, int* info) {
  sorgqr_(m, n, k, a, lda, tau, work, lwork, info);
}
void orgqr(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
           double* work, const int* lwork, int* info) {
  dorgqr_(m, n, k, a, lda, tau, work, lwork, info);
}

}  // namespace

template <class T>
void cholesky(int64_t batch, int64_t n, const T* a, T* l) {
  if (n == 0) return;
  const int ni = lapack_int(n);
  const char uplo = 'L';
  std::vector<T> m(static_cast<size_t>(n * n));
  for (int64_t b = 0; b < batch; ++b) {
    T* lb = l + b * n * n;
    to_column_major(a + b * n * n, n, n, m.data());
    int info = 0;
    potrf(&uplo, &ni, m.data(), &ni, &info);
    if (info != 0) {
      fill_nan(lb, n * n);
      continue;
    }
    from_column_major(m.data(), n, n, lb);
    for (int64_t i = 0; i < n; ++i) std::fill(lb + i * n + i + 1, lb + (i + 1) * n, T(0));
  }
}

template <class T>
void triangular_solve(int64_t batch, int64_t n, int64_t rows, int64_t cols, bool left, bool lower,
                      bool transpose_a, bool unit_diagonal, const T* a, const T* b, T* x) {
  if (rows == 0 || cols == 0) return;
  const int ni = lapack_int(n), ri = lapack_int(rows), ci = lapack_int(cols);
  const char side = left ? 'L' : 'R', uplo = lower ? 'L' : 'U', trans = transpose_a ? 'T' : 'N';
  const char diag = unit_diagonal ? 'U' : 'N';
  std::vector<T> ac(static_cast<size_t>(n * n)), xc(static_cast<size_t>(rows * cols));
  for (int64_t k = 0; k < batch; ++k) {
    to_column_major(a + k * n * n, n, n, ac.data());
    to_column_major(b + k * rows * cols, rows, cols, xc.data());
    trsm(&side, &uplo, &trans, &diag, &ri, &ci, ac.data(), &ni, xc.data(), &ri);
    from_column_major(xc.data(), rows, cols, x + k * rows * cols);
  }
}

template <class T>
void lu(int64_t batch, int64_t m, int64_t n, const T* a, T* lu, int32_t* pivots,
        int32_t* permutation) {
  const int64_t k = std::min(m, n);
  const int mi = lapack_int(m), ni = lapack_int(n);
  const int ld = std::max(1, mi);
  std::vector<T> mat(static_cast<size_t>(m * n));
  std::vector<int> ipiv(static_cast<size_t>(std::max<int64_t>(k, 1)));
  for (int64_t b = 0; b < batch; ++b) {
    int32_t* pb = pivots + b * k;
    int32_t* perm = permutation + b * m;
    for (int64_t i = 0; i < m; ++i) perm[i] = static_cast<int32_t>(i);
    if (k == 0) continue;
    to_column_major(a + b * m * n, m, n, mat.data());
    int info = 0;  // > 0 only for a singular U, which is a result, not a failure
    getrf(&mi, &ni, mat.data(), &ld, ipiv.data(), &info);
    from_column_major(mat.data(), m, n, lu + b * m * n);
    for (int64_t j = 0; j < k; ++j) {
      pb[j] = ipiv[static_cast<size_t>(j)] - 1;  // LAPACK's pivots count from 1
      std::swap(perm[j], perm[pb[j]]);
    }
  }
}

template <class T>
void qr(int64_t batch, int64_t m, int64_t n, bool full_matrices, const T* a, T* q, T* r) {
  const int64_t k = std::min(m, n);
  const int64_t q_cols = full_matrices ? m : k, r_rows = full_matrices ? m : k;
  const int mi = lapack_int(m), ni = lapack_int(n), ki = lapack_int(k), qi = lapack_int(q_cols);
  const int ld = std::max(1, mi);
  std::vector<T> mat(static_cast<size_t>(m * n)), qc(static_cast<size_t>(m * q_cols));
  std::vector<T> tau(static_cast<size_t>(std::max<int64_t>(k, 1)));
  // Workspace sizes, asked once.
  T query_geqrf = 0, query_orgqr = 0;
  int info = 0;
  const int query = -1;
  if (k > 0) {
    geqrf(&mi, &ni, mat.data(), &ld, tau.data(), &query_geqrf, &query, &info);
    orgqr(&mi, &qi, &ki, qc.data(), &ld, tau.data(), &query_orgqr, &query, &info);
  }
  const int lwork = std::max(workspace_size(query_geqrf), workspace_size(query_orgqr));
  std::vector<T> work(static_cast<size_t>(lwork));
  for (int64_t b = 0; b < batch; ++b) {
    T* qb = q + b * m * q_cols;
    T* rb = r + b * r_rows * n;
    std::fill(rb, rb + r_rows * n, T(0));
    if (k == 0) {  // no reflections: Q is the identity's first columns
      std::fill(qb, qb + m * q_cols, T(0));
      for (int64_t i = 0; i < std::min(m, q_cols); ++i) qb[i * q_cols + i] = 1;
      continue;
    }
    to_column_major(a + b * m * n, m, n, mat.data());
    geqrf(&mi, &ni, mat.data(), &ld, tau.data(), work.data(), &lwork, &info);
    // R: the upper triangle (trapezoid) of the factored matrix.
    for (int64_t i = 0; i < std::min(r_rows, m); ++i)
      for (int64_t j = i; j < n; ++j) rb[i * n + j] = mat[static_cast<size_t>(i + j * m)];
    // Q: orgqr on the reflectors, in an m x q_cols matrix.
    std::fill(qc.begin(), qc.end(), T(0));
    std::copy(mat.begin(), mat.begin() + m * std::min(n, q_cols), qc.begin());
    orgqr(&mi, &qi, &ki, qc.data(), &ld, tau.data(), work.data(), &lwork, &info);
    from_column_major(qc.data(), m, q_cols, qb);
  }
}

template void cholesky<float>(int64_t, int64_t, const float*, float*);
template void cholesky<double>(int64_t, int64_t, const double*, double*);
template void triangular_solve<float>(int64_t, int64_t, int64_t, int64_t, bool, bool, bool, bool,
                                      const float*, const float*, float*);
template void triangular_solve<double>(int64_t, int64_t, int64_t, int64_t, bool, bool, bool, bool,
                                       const double*, const double*, double*);
template void lu<float>(int64_t, int64_t, int64_t, const float*, float*, int32_t*, int32_t*);
template void lu<double>(int64_t, int64_t, int64_t, const double*, double*, int32_t*, int32_t*);
template void qr<float>(int64_t, int64_t, int64_t, bool, const float*, float*, float*);
template void qr<double>(int64_t, int64_t, int64_t, bool, const double*, double*, double*);

}  // namespace refjit::kernels

using refjit::kernels::lapack_support::data_of;

namespace {

template <class T>
void triangular_solve_entry(int64_t batch, int64_t n, int64_t rows, int64_t cols, int64_t flags,
                            const RefjitMemRefHead* a, const RefjitMemRefHead* b,
                            const RefjitMemRefHead* x) {
  refjit::kernels::triangular_solve<T>(batch, n, rows, cols, (flags & 1) != 0, (flags & 2) != 0,
                                       (flags & 4) != 0, (flags & 8) != 0, data_of<T>(a),
                                       data_of<T>(b), data_of<T>(x));
}

}  // namespace

extern "C" {

void refjit_cholesky_f32(int64_t batch, int64_t n, int64_t, const RefjitMemRefHead* a, int64_t,
                         const RefjitMemRefHead* l) {
  refjit::kernels::cholesky<float>(batch, n, data_of<float>(a), data_of<float>(l));
}
void refjit_cholesky_f64(int64_t batch, int64_t n, int64_t, const RefjitMemRefHead* a, int64_t,
                         const RefjitMemRefHead* l) {
  refjit::kernels::cholesky<double>(batch, n, data_of<double>(a), data_of<double>(l));
}
void refjit_triangular_solve_f32(int64_t batch, int64_t n, int64_t rows, int64_t cols,
                                 int64_t flags, int64_t, const RefjitMemRefHead* a, int64_t,
                                 const RefjitMemRefHead* b, int64_t, const RefjitMemRefHead* x) {
  triangular_solve_entry<float>(batch, n, rows, cols, flags, a, b, x);
}
void refjit_triangular_solve_f64(int64_t batch, int64_t n, int64_t rows, int64_t cols,
                                 int64_t flags, int64_t, const RefjitMemRefHead* a, int64_t,
                                 const RefjitMemRefHead* b, int64_t, const RefjitMemRefHead* x) {
  triangular_solve_entry<double>(batch, n, rows, cols, flags, a, b, x);
}
void refjit_lu_f32(int64_t batch, int64_t m, int64_t n, int64_t, const RefjitMemRefHead* a, int64_t,
                   const RefjitMemRefHead* lu, int64_t, const RefjitMemRefHead* pivots, int64_t,
                   const RefjitMemRefHead* permutation) {
  refjit::kernels::lu<float>(batch, m, n, data_of<float>(a), data_of<float>(lu),
                             data_of<int32_t>(pivots), data_of<int32_t>(permutation));
}
void refjit_lu_f64(int64_t batch, int64_t m, int64_t n, int64_t, const RefjitMemRefHead* a, int64_t,
                   const RefjitMemRefHead* lu, int64_t, const RefjitMemRefHead* pivots, int64_t,
                   const RefjitMemRefHead* permutation) {
  refjit::kernels::lu<double>(batch, m, n, data_of<double>(a), data_of<double>(lu),
                              data_of<int32_t>(pivots), data_of<int32_t>(permutation));
}
void refjit_qr_f32(int64_t batch, int64_t m, int64_t n, int64_t full_matrices, int64_t,
                   const RefjitMemRefHead* a, int64_t, const RefjitMemRefHead* q, int64_t,
                   const RefjitMemRefHead* r) {
  refjit::kernels::qr<float>(batch, m, n, full_matrices != 0, data_of<float>(a), data_of<float>(q),
                             data_of<float>(r));
}
void refjit_qr_f64(int64_t batch, int64_t m, int64_t n, int64_t full_matrices, int64_t,
                   const RefjitMemRefHead* a, int64_t, const RefjitMemRefHead* q, int64_t,
                   const RefjitMemRefHead* r) {
  refjit::kernels::qr<double>(batch, m, n, full_matrices != 0, data_of<double>(a),
                              data_of<double>(q), data_of<double>(r));
}
}
