#include "runtime/kernels/factorizations.h"

#include <algorithm>
#include <complex>
#include <cstddef>
#include <vector>

#include "runtime/kernels/lapack_support.h"

// LAPACK's and BLAS's Fortran entries: every argument by address, then the hidden lengths of
// the character arguments. std::complex<T> has the layout of Fortran's COMPLEX.
extern "C" {
using c64 = std::complex<float>;
using c128 = std::complex<double>;
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void cpotrf_(const char* uplo, const int* n, c64* a, const int* lda, int* info, size_t);
void zpotrf_(const char* uplo, const int* n, c128* a, const int* lda, int* info, size_t);
#define REFJIT_TRSM(name, T)                                                              \
  void name(const char* side, const char* uplo, const char* transa, const char* diag,     \
            const int* m, const int* n, const T* alpha, const T* a, const int* lda, T* b, \
            const int* ldb, size_t, size_t, size_t, size_t);
REFJIT_TRSM(strsm_, float)
REFJIT_TRSM(dtrsm_, double)
REFJIT_TRSM(ctrsm_, c64)
REFJIT_TRSM(ztrsm_, c128)
#undef REFJIT_TRSM
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void cgetrf_(const int* m, const int* n, c64* a, const int* lda, int* ipiv, int* info);
void zgetrf_(const int* m, const int* n, c128* a, const int* lda, int* ipiv, int* info);
#define REFJIT_GEQRF(name, T)                                                                    \
  void name(const int* m, const int* n, T* a, const int* lda, T* tau, T* work, const int* lwork, \
            int* info);
REFJIT_GEQRF(sgeqrf_, float)
REFJIT_GEQRF(dgeqrf_, double)
REFJIT_GEQRF(cgeqrf_, c64)
REFJIT_GEQRF(zgeqrf_, c128)
#undef REFJIT_GEQRF
#define REFJIT_GTSV(name, T) \
  void name(const int* n, const int* nrhs, T* dl, T* d, T* du, T* b, const int* ldb, int* info);
REFJIT_GTSV(sgtsv_, float)
REFJIT_GTSV(dgtsv_, double)
REFJIT_GTSV(cgtsv_, c64)
REFJIT_GTSV(zgtsv_, c128)
#undef REFJIT_GTSV
// geqp3: QR with column pivoting (the complex form takes a real workspace of 2n).
void sgeqp3_(const int* m, const int* n, float* a, const int* lda, int* jpvt, float* tau,
             float* work, const int* lwork, int* info);
void dgeqp3_(const int* m, const int* n, double* a, const int* lda, int* jpvt, double* tau,
             double* work, const int* lwork, int* info);
void cgeqp3_(const int* m, const int* n, c64* a, const int* lda, int* jpvt, c64* tau, c64* work,
             const int* lwork, float* rwork, int* info);
void zgeqp3_(const int* m, const int* n, c128* a, const int* lda, int* jpvt, c128* tau, c128* work,
             const int* lwork, double* rwork, int* info);
// orgqr (real) and ungqr (complex): Q from the reflectors.
#define REFJIT_ORGQR(name, T)                                                                      \
  void name(const int* m, const int* n, const int* k, T* a, const int* lda, const T* tau, T* work, \
            const int* lwork, int* info);
REFJIT_ORGQR(sorgqr_, float)
REFJIT_ORGQR(dorgqr_, double)
REFJIT_ORGQR(cungqr_, c64)
REFJIT_ORGQR(zungqr_, c128)
#undef REFJIT_ORGQR
}

namespace refjit::kernels {

using namespace lapack_support;

namespace {

// The routine of the four (s, d, c, z) for element type T.
template <class T, class S, class D, class C, class Z>
constexpr auto routine(S s, D d, C c, Z z) {
  if constexpr (std::is_same_v<T, float>)
    return s;
  else if constexpr (std::is_same_v<T, double>)
    return d;
  else if constexpr (std::is_same_v<T, c64>)
    return c;
  else
    return z;
}

}  // namespace

template <class T>
void tridiagonal_solve(int64_t batch, int64_t m, int64_t n, const T* dl, const T* d, const T* du,
                       const T* b, T* x) {
  if (m == 0 || n == 0) return;
  const int mi = lapack_int(m), ni = lapack_int(n);
  // LAPACK's sub- and superdiagonals have m - 1 entries: dl[1:] and du[:-1] of JAX's.
  std::vector<T> sub(static_cast<size_t>(m)), diag(static_cast<size_t>(m)),
      super(static_cast<size_t>(m)), xc(static_cast<size_t>(m * n));
  for (int64_t k = 0; k < batch; ++k) {
    std::copy(dl + k * m + 1, dl + (k + 1) * m, sub.begin());
    std::copy(d + k * m, d + (k + 1) * m, diag.begin());
    std::copy(du + k * m, du + (k + 1) * m - 1, super.begin());
    to_column_major(b + k * m * n, m, n, xc.data());
    int info = 0;
    routine<T>(sgtsv_, dgtsv_, cgtsv_, zgtsv_)(&mi, &ni, sub.data(), diag.data(), super.data(),
                                               xc.data(), &mi, &info);
    if (info != 0) {  // a zero pivot: the matrix is singular
      fill_nan(x + k * m * n, m * n);
      continue;
    }
    from_column_major(xc.data(), m, n, x + k * m * n);
  }
}

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
    routine<T>(spotrf_, dpotrf_, cpotrf_, zpotrf_)(&uplo, &ni, m.data(), &ni, &info, 1);
    if (info != 0) {
      fill_nan(lb, n * n);
      continue;
    }
    from_column_major(m.data(), n, n, lb);
    for (int64_t i = 0; i < n; ++i) std::fill(lb + i * n + i + 1, lb + (i + 1) * n, T(0));
  }
}

template <class T>
void triangular_solve(int64_t batch, int64_t n, int64_t rows, int64_t cols, const SolveForm& form,
                      const T* a, const T* b, T* x) {
  if (rows == 0 || cols == 0) return;
  const int ni = lapack_int(n), ri = lapack_int(rows), ci = lapack_int(cols);
  const char side = form.left ? 'L' : 'R', uplo = form.lower ? 'L' : 'U';
  // op(a) = a^H is trans 'C'; a conjugated but not transposed is conjugated before the call.
  const bool conjugate = is_complex_v<T> && form.conjugate_a;
  const char trans = !form.transpose_a ? 'N' : conjugate ? 'C' : 'T';
  const char diag = form.unit_diagonal ? 'U' : 'N';
  std::vector<T> ac(static_cast<size_t>(n * n)), xc(static_cast<size_t>(rows * cols));
  for (int64_t k = 0; k < batch; ++k) {
    to_column_major(a + k * n * n, n, n, ac.data());
    if constexpr (is_complex_v<T>)
      if (conjugate && !form.transpose_a)
        for (T& v : ac) v = std::conj(v);
    to_column_major(b + k * rows * cols, rows, cols, xc.data());
    const T one = 1;
    routine<T>(strsm_, dtrsm_, ctrsm_, ztrsm_)(&side, &uplo, &trans, &diag, &ri, &ci, &one,
                                               ac.data(), &ni, xc.data(), &ri, 1, 1, 1, 1);
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
    routine<T>(sgetrf_, dgetrf_, cgetrf_, zgetrf_)(&mi, &ni, mat.data(), &ld, ipiv.data(), &info);
    from_column_major(mat.data(), m, n, lu + b * m * n);
    for (int64_t j = 0; j < k; ++j) {
      pb[j] = ipiv[static_cast<size_t>(j)] - 1;  // LAPACK's pivots count from 1
      std::swap(perm[j], perm[pb[j]]);
    }
  }
}

// geqp3 for T; `rwork` (2n reals) is read by the complex routines only.
template <class T>
void geqp3(const int* m, const int* n, T* a, const int* lda, int* jpvt, T* tau, T* work,
           const int* lwork, Real<T>* rwork, int* info) {
  if constexpr (std::is_same_v<T, float>)
    sgeqp3_(m, n, a, lda, jpvt, tau, work, lwork, info);
  else if constexpr (std::is_same_v<T, double>)
    dgeqp3_(m, n, a, lda, jpvt, tau, work, lwork, info);
  else if constexpr (std::is_same_v<T, c64>)
    cgeqp3_(m, n, a, lda, jpvt, tau, work, lwork, rwork, info);
  else
    zgeqp3_(m, n, a, lda, jpvt, tau, work, lwork, rwork, info);
}

template <class T>
void qr(int64_t batch, int64_t m, int64_t n, bool full_matrices, const T* a, T* q, T* r,
        int32_t* p) {
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
  const auto geqrf = routine<T>(sgeqrf_, dgeqrf_, cgeqrf_, zgeqrf_);
  const auto orgqr = routine<T>(sorgqr_, dorgqr_, cungqr_, zungqr_);
  // With pivoting (p not null): geqp3, whose jpvt starts at zeros (every column free).
  std::vector<int> jpvt(p ? static_cast<size_t>(n) : 0);
  std::vector<Real<T>> rwork(p && is_complex_v<T> ? static_cast<size_t>(2 * n) : 0);
  auto factor = [&](T* work, const int* lwork) {
    if (p)
      geqp3(&mi, &ni, mat.data(), &ld, jpvt.data(), tau.data(), work, lwork, rwork.data(), &info);
    else
      geqrf(&mi, &ni, mat.data(), &ld, tau.data(), work, lwork, &info);
  };
  if (k > 0) {
    factor(&query_geqrf, &query);
    orgqr(&mi, &qi, &ki, qc.data(), &ld, tau.data(), &query_orgqr, &query, &info);
  }
  const int lwork = std::max(workspace_size(query_geqrf), workspace_size(query_orgqr));
  std::vector<T> work(static_cast<size_t>(lwork));
  for (int64_t b = 0; b < batch; ++b) {
    T* qb = q + b * m * q_cols;
    T* rb = r + b * r_rows * n;
    std::fill(rb, rb + r_rows * n, T(0));
    if (k == 0) {  // no reflections: Q is the identity's first columns (and p zeros, as JAX's)
      std::fill(qb, qb + m * q_cols, T(0));
      for (int64_t i = 0; i < std::min(m, q_cols); ++i) qb[i * q_cols + i] = 1;
      if (p) std::fill(p + b * n, p + (b + 1) * n, 0);
      continue;
    }
    to_column_major(a + b * m * n, m, n, mat.data());
    std::fill(jpvt.begin(), jpvt.end(), 0);
    factor(work.data(), &lwork);
    for (int64_t j = 0; p && j < n; ++j) p[b * n + j] = jpvt[static_cast<size_t>(j)] - 1;
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

#define REFJIT_FACTORIZATIONS_INSTANTIATE(T)                                                  \
  template void cholesky<T>(int64_t, int64_t, const T*, T*);                                  \
  template void triangular_solve<T>(int64_t, int64_t, int64_t, int64_t, const SolveForm&,     \
                                    const T*, const T*, T*);                                  \
  template void lu<T>(int64_t, int64_t, int64_t, const T*, T*, int32_t*, int32_t*);           \
  template void qr<T>(int64_t, int64_t, int64_t, bool, const T*, T*, T*, int32_t*);           \
  template void tridiagonal_solve<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, \
                                     const T*, T*);
REFJIT_FACTORIZATIONS_INSTANTIATE(float)
REFJIT_FACTORIZATIONS_INSTANTIATE(double)
REFJIT_FACTORIZATIONS_INSTANTIATE(std::complex<float>)
REFJIT_FACTORIZATIONS_INSTANTIATE(std::complex<double>)
#undef REFJIT_FACTORIZATIONS_INSTANTIATE

}  // namespace refjit::kernels

using namespace refjit::kernels::lapack_support;

extern "C" {

void refjit_cholesky(int64_t type, int64_t batch, int64_t n, int64_t, const RefjitMemRefHead* a,
                     int64_t, const RefjitMemRefHead* l) {
  with_lapack_type(type, [&](auto zero) {
    using T = decltype(zero);
    refjit::kernels::cholesky<T>(batch, n, data_of<T>(a), data_of<T>(l));
  });
}
void refjit_triangular_solve(int64_t type, int64_t batch, int64_t n, int64_t rows, int64_t cols,
                             int64_t flags, int64_t, const RefjitMemRefHead* a, int64_t,
                             const RefjitMemRefHead* b, int64_t, const RefjitMemRefHead* x) {
  const refjit::kernels::SolveForm form = refjit::kernels::SolveForm::from_flags(flags);
  with_lapack_type(type, [&](auto zero) {
    using T = decltype(zero);
    refjit::kernels::triangular_solve<T>(batch, n, rows, cols, form, data_of<T>(a), data_of<T>(b),
                                         data_of<T>(x));
  });
}
void refjit_tridiagonal_solve(int64_t type, int64_t batch, int64_t m, int64_t n, int64_t,
                              const RefjitMemRefHead* dl, int64_t, const RefjitMemRefHead* d,
                              int64_t, const RefjitMemRefHead* du, int64_t,
                              const RefjitMemRefHead* b, int64_t, const RefjitMemRefHead* x) {
  with_lapack_type(type, [&](auto zero) {
    using T = decltype(zero);
    refjit::kernels::tridiagonal_solve<T>(batch, m, n, data_of<T>(dl), data_of<T>(d),
                                          data_of<T>(du), data_of<T>(b), data_of<T>(x));
  });
}
void refjit_lu(int64_t type, int64_t batch, int64_t m, int64_t n, int64_t,
               const RefjitMemRefHead* a, int64_t, const RefjitMemRefHead* lu, int64_t,
               const RefjitMemRefHead* pivots, int64_t, const RefjitMemRefHead* permutation) {
  with_lapack_type(type, [&](auto zero) {
    using T = decltype(zero);
    refjit::kernels::lu<T>(batch, m, n, data_of<T>(a), data_of<T>(lu), data_of<int32_t>(pivots),
                           data_of<int32_t>(permutation));
  });
}
void refjit_qr(int64_t type, int64_t batch, int64_t m, int64_t n, int64_t full_matrices,
               int64_t pivoting, int64_t, const RefjitMemRefHead* a, int64_t,
               const RefjitMemRefHead* q, int64_t, const RefjitMemRefHead* r, int64_t,
               const RefjitMemRefHead* p) {
  with_lapack_type(type, [&](auto zero) {
    using T = decltype(zero);
    refjit::kernels::qr<T>(batch, m, n, full_matrices != 0, data_of<T>(a), data_of<T>(q),
                           data_of<T>(r), pivoting ? data_of<int32_t>(p) : nullptr);
  });
}
}
