#include "runtime/kernels/lapack.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstddef>
#include <vector>

#include "runtime/kernels/lapack_support.h"

// LAPACK's Fortran entries (liblapack): every argument by address; the trailing size_t
// arguments are the lengths of the character arguments, which gfortran passes hidden.
// std::complex<T> has the layout of Fortran's COMPLEX.
extern "C" {
using c64 = std::complex<float>;
using c128 = std::complex<double>;
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w,
             float* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t,
             size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info, size_t,
             size_t);
void cheevd_(const char* jobz, const char* uplo, const int* n, c64* a, const int* lda, float* w,
             c64* work, const int* lwork, float* rwork, const int* lrwork, int* iwork,
             const int* liwork, int* info, size_t, size_t);
void zheevd_(const char* jobz, const char* uplo, const int* n, c128* a, const int* lda, double* w,
             c128* work, const int* lwork, double* rwork, const int* lrwork, int* iwork,
             const int* liwork, int* info, size_t, size_t);
#define REFJIT_REAL_GEEV(name, T)                                                             \
  void name(const char* jobvl, const char* jobvr, const int* n, T* a, const int* lda, T* wr,  \
            T* wi, T* vl, const int* ldvl, T* vr, const int* ldvr, T* work, const int* lwork, \
            int* info, size_t, size_t);
REFJIT_REAL_GEEV(sgeev_, float)
REFJIT_REAL_GEEV(dgeev_, double)
#undef REFJIT_REAL_GEEV
#define REFJIT_COMPLEX_GEEV(name, T, R)                                                            \
  void name(const char* jobvl, const char* jobvr, const int* n, T* a, const int* lda, T* w, T* vl, \
            const int* ldvl, T* vr, const int* ldvr, T* work, const int* lwork, R* rwork,          \
            int* info, size_t, size_t);
REFJIT_COMPLEX_GEEV(cgeev_, c64, float)
REFJIT_COMPLEX_GEEV(zgeev_, c128, double)
#undef REFJIT_COMPLEX_GEEV
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s,
             float* u, const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork,
             int* iwork, int* info, size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
             int* iwork, int* info, size_t);
void cgesdd_(const char* jobz, const int* m, const int* n, c64* a, const int* lda, float* s, c64* u,
             const int* ldu, c64* vt, const int* ldvt, c64* work, const int* lwork, float* rwork,
             int* iwork, int* info, size_t);
void zgesdd_(const char* jobz, const int* m, const int* n, c128* a, const int* lda, double* s,
             c128* u, const int* ldu, c128* vt, const int* ldvt, c128* work, const int* lwork,
             double* rwork, int* iwork, int* info, size_t);
#define REFJIT_REAL_GESVD(name, T)                                                                 \
  void name(const char* jobu, const char* jobvt, const int* m, const int* n, T* a, const int* lda, \
            T* s, T* u, const int* ldu, T* vt, const int* ldvt, T* work, const int* lwork,         \
            int* info, size_t, size_t);
REFJIT_REAL_GESVD(sgesvd_, float)
REFJIT_REAL_GESVD(dgesvd_, double)
#undef REFJIT_REAL_GESVD
#define REFJIT_COMPLEX_GESVD(name, T, R)                                                           \
  void name(const char* jobu, const char* jobvt, const int* m, const int* n, T* a, const int* lda, \
            R* s, T* u, const int* ldu, T* vt, const int* ldvt, T* work, const int* lwork,         \
            R* rwork, int* info, size_t, size_t);
REFJIT_COMPLEX_GESVD(cgesvd_, c64, float)
REFJIT_COMPLEX_GESVD(zgesvd_, c128, double)
#undef REFJIT_COMPLEX_GESVD
}

namespace refjit::kernels {

using namespace lapack_support;

namespace {

// syevd / heevd (the complex form also takes a real workspace, rwork).
template <class T>
void syevd(const char* jobz, const char* uplo, const int* n, T* a, const int* lda, Real<T>* w,
           T* work, const int* lwork, Real<T>* rwork, const int* lrwork, int* iwork,
           const int* liwork, int* info) {
  if constexpr (std::is_same_v<T, float>)
    ssyevd_(jobz, uplo, n, a, lda, w, work, lwork, iwork, liwork, info, 1, 1);
  else if constexpr (std::is_same_v<T, double>)
    dsyevd_(jobz, uplo, n, a, lda, w, work, lwork, iwork, liwork, info, 1, 1);
  else if constexpr (std::is_same_v<T, c64>)
    cheevd_(jobz, uplo, n, a, lda, w, work, lwork, rwork, lrwork, iwork, liwork, info, 1, 1);
  else
    zheevd_(jobz, uplo, n, a, lda, w, work, lwork, rwork, lrwork, iwork, liwork, info, 1, 1);
}

template <class T>
void gesdd(const char* jobz, const int* m, const int* n, T* a, const int* lda, Real<T>* s, T* u,
           const int* ldu, T* vt, const int* ldvt, T* work, const int* lwork, Real<T>* rwork,
           int* iwork, int* info) {
  if constexpr (std::is_same_v<T, float>)
    sgesdd_(jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork, info, 1);
  else if constexpr (std::is_same_v<T, double>)
    dgesdd_(jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork, info, 1);
  else if constexpr (std::is_same_v<T, c64>)
    cgesdd_(jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, rwork, iwork, info, 1);
  else
    zgesdd_(jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, rwork, iwork, info, 1);
}

// gesvd (JAX's SvdAlgorithm.QR): the same job for u and vt.
template <class T>
void gesvd(const char* job, const int* m, const int* n, T* a, const int* lda, Real<T>* s, T* u,
           const int* ldu, T* vt, const int* ldvt, T* work, const int* lwork, Real<T>* rwork,
           int* info) {
  if constexpr (std::is_same_v<T, float>)
    sgesvd_(job, job, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, info, 1, 1);
  else if constexpr (std::is_same_v<T, double>)
    dgesvd_(job, job, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, info, 1, 1);
  else if constexpr (std::is_same_v<T, c64>)
    cgesvd_(job, job, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, rwork, info, 1, 1);
  else
    zgesvd_(job, job, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, rwork, info, 1, 1);
}

// LAPACK's real geev gives a complex conjugate pair's eigenvectors packed in two columns (the
// real part in column j, the imaginary part in j + 1); JAX unpacks them into two complex
// columns, conjugates of each other. `packed` and `out` are column-major n x n.
template <class R>
void unpack_eigenvectors(int64_t n, const R* wi, const R* packed, std::complex<R>* out) {
  for (int64_t j = 0; j < n;) {
    if (wi[j] == R(0) || std::isnan(wi[j]) || j + 1 == n) {
      for (int64_t k = 0; k < n; ++k) out[k + j * n] = {packed[k + j * n], R(0)};
      ++j;
      continue;
    }
    for (int64_t k = 0; k < n; ++k) {
      const R re = packed[k + j * n], im = packed[k + (j + 1) * n];
      out[k + j * n] = {re, im};
      out[k + (j + 1) * n] = {re, -im};
    }
    j += 2;
  }
}

}  // namespace

template <class T>
void eig(int64_t batch, int64_t n, bool left, bool right, const T* a, Complex<T>* w, Complex<T>* vl,
         Complex<T>* vr) {
  using R = Real<T>;
  using C = Complex<T>;
  if (n == 0) return;
  const int ni = lapack_int(n);
  const char jobvl = left ? 'V' : 'N', jobvr = right ? 'V' : 'N';
  const int ldvl = left ? ni : 1, ldvr = right ? ni : 1;
  std::vector<T> m(static_cast<size_t>(n * n));
  std::vector<T> vlc(left ? static_cast<size_t>(n * n) : 1),
      vrc(right ? static_cast<size_t>(n * n) : 1);
  std::vector<R> wr(static_cast<size_t>(n)), wi(static_cast<size_t>(n));
  std::vector<C> wc(static_cast<size_t>(n)), unpacked(static_cast<size_t>(n * n));
  std::vector<R> rwork(static_cast<size_t>(2 * n));
  auto call = [&](T* work, const int* lwork, int* info) {
    if constexpr (is_complex_v<T>) {
      if constexpr (std::is_same_v<T, c64>)
        cgeev_(&jobvl, &jobvr, &ni, m.data(), &ni, wc.data(), vlc.data(), &ldvl, vrc.data(), &ldvr,
               work, lwork, rwork.data(), info, 1, 1);
      else
        zgeev_(&jobvl, &jobvr, &ni, m.data(), &ni, wc.data(), vlc.data(), &ldvl, vrc.data(), &ldvr,
               work, lwork, rwork.data(), info, 1, 1);
    } else if constexpr (std::is_same_v<T, float>) {
      sgeev_(&jobvl, &jobvr, &ni, m.data(), &ni, wr.data(), wi.data(), vlc.data(), &ldvl,
             vrc.data(), &ldvr, work, lwork, info, 1, 1);
    } else {
      dgeev_(&jobvl, &jobvr, &ni, m.data(), &ni, wr.data(), wi.data(), vlc.data(), &ldvl,
             vrc.data(), &ldvr, work, lwork, info, 1, 1);
    }
  };
  T work_query = 0;
  int info = 0;
  const int query = -1;
  call(&work_query, &query, &info);
  const int lwork = workspace_size(work_query);
  std::vector<T> work(static_cast<size_t>(lwork));
  for (int64_t b = 0; b < batch; ++b) {
    C* wb = w + b * n;
    C* vlb = left ? vl + b * n * n : nullptr;
    C* vrb = right ? vr + b * n * n : nullptr;
    to_column_major(a + b * n * n, n, n, m.data());
    call(work.data(), &lwork, &info);
    if (info != 0) {
      fill_nan(wb, n);
      if (left) fill_nan(vlb, n * n);
      if (right) fill_nan(vrb, n * n);
      continue;
    }
    if constexpr (is_complex_v<T>) {
      std::copy(wc.begin(), wc.end(), wb);
      if (left) from_column_major(vlc.data(), n, n, vlb);
      if (right) from_column_major(vrc.data(), n, n, vrb);
    } else {
      for (int64_t j = 0; j < n; ++j)
        wb[j] = {wr[static_cast<size_t>(j)], wi[static_cast<size_t>(j)]};
      if (left) {
        unpack_eigenvectors(n, wi.data(), vlc.data(), unpacked.data());
        from_column_major(unpacked.data(), n, n, vlb);
      }
      if (right) {
        unpack_eigenvectors(n, wi.data(), vrc.data(), unpacked.data());
        from_column_major(unpacked.data(), n, n, vrb);
      }
    }
  }
}

template <class T>
void eigh(int64_t batch, int64_t n, bool lower, const T* a, T* v, Real<T>* w) {
  if (n == 0) return;
  const int ni = lapack_int(n);
  const char jobz = 'V', uplo = lower ? 'L' : 'U';
  std::vector<T> m(static_cast<size_t>(n * n));
  // Workspace sizes, asked once (they depend on n only).
  T work_query = 0;
  Real<T> rwork_query = 0;
  int iwork_query = 0, info = 0;
  const int query = -1;
  syevd(&jobz, &uplo, &ni, m.data(), &ni, w, &work_query, &query, &rwork_query, &query,
        &iwork_query, &query, &info);
  const int lwork = workspace_size(work_query), liwork = std::max(1, iwork_query);
  const int lrwork = workspace_size(rwork_query);
  std::vector<T> work(static_cast<size_t>(lwork));
  std::vector<Real<T>> rwork(static_cast<size_t>(lrwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  for (int64_t b = 0; b < batch; ++b) {
    T* vb = v + b * n * n;
    Real<T>* wb = w + b * n;
    to_column_major(a + b * n * n, n, n, m.data());
    syevd(&jobz, &uplo, &ni, m.data(), &ni, wb, work.data(), &lwork, rwork.data(), &lrwork,
          iwork.data(), &liwork, &info);
    if (info != 0) {
      fill_nan(vb, n * n);
      fill_nan(wb, n);
      continue;
    }
    from_column_major(m.data(), n, n, vb);
  }
}

template <class T>
void svd(int64_t batch, int64_t m, int64_t n, bool full_matrices, bool qr, const T* a, Real<T>* s,
         T* u, T* vt) {
  const bool vectors = u != nullptr && vt != nullptr;
  const int64_t k = std::min(m, n);
  const int64_t u_cols = full_matrices ? m : k, vt_rows = full_matrices ? n : k;
  if (k == 0) {  // no singular values; full singular vectors are the identity
    if (!vectors) return;
    std::fill(u, u + batch * m * u_cols, T(0));
    std::fill(vt, vt + batch * vt_rows * n, T(0));
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < std::min(m, u_cols); ++i) u[b * m * u_cols + i * u_cols + i] = 1;
      for (int64_t i = 0; i < std::min(vt_rows, n); ++i) vt[b * vt_rows * n + i * n + i] = 1;
    }
    return;
  }
  const int mi = lapack_int(m), ni = lapack_int(n);
  const char jobz = !vectors ? 'N' : full_matrices ? 'A' : 'S';
  const int ldu = lapack_int(m), ldvt = lapack_int(std::max<int64_t>(vt_rows, 1));
  std::vector<T> mat(static_cast<size_t>(m * n));
  std::vector<T> uc(vectors ? static_cast<size_t>(m * u_cols) : 1);
  std::vector<T> vtc(vectors ? static_cast<size_t>(vt_rows * n) : 1);
  std::vector<int> iwork(static_cast<size_t>(8 * k));
  // The complex routine's real workspace (its documented minimum, for either job).
  const int64_t mx = std::max(m, n);
  std::vector<Real<T>> rwork(
      is_complex_v<T> ? static_cast<size_t>(std::max(5 * k * k + 7 * k, 2 * mx * k + 2 * k * k + k))
                      : 1);
  // gesdd, or gesvd for SvdAlgorithm.QR (whose complex form needs 5k reals of rwork, fewer
  // than gesdd's).
  auto decompose = [&](Real<T>* sb, T* work, const int* lwork, int* info) {
    if (qr)
      gesvd(&jobz, &mi, &ni, mat.data(), &mi, sb, uc.data(), &ldu, vtc.data(), &ldvt, work, lwork,
            rwork.data(), info);
    else
      gesdd(&jobz, &mi, &ni, mat.data(), &mi, sb, uc.data(), &ldu, vtc.data(), &ldvt, work, lwork,
            rwork.data(), iwork.data(), info);
  };
  T work_query = 0;
  int info = 0;
  const int query = -1;
  decompose(s, &work_query, &query, &info);
  const int lwork = workspace_size(work_query);
  std::vector<T> work(static_cast<size_t>(lwork));
  for (int64_t b = 0; b < batch; ++b) {
    Real<T>* sb = s + b * k;
    to_column_major(a + b * m * n, m, n, mat.data());
    decompose(sb, work.data(), &lwork, &info);
    T* ub = vectors ? u + b * m * u_cols : nullptr;
    T* vtb = vectors ? vt + b * vt_rows * n : nullptr;
    if (info != 0) {
      fill_nan(sb, k);
      if (vectors) {
        fill_nan(ub, m * u_cols);
        fill_nan(vtb, vt_rows * n);
      }
      continue;
    }
    if (vectors) {
      from_column_major(uc.data(), m, u_cols, ub);
      from_column_major(vtc.data(), vt_rows, n, vtb);
    }
  }
}

#define REFJIT_LAPACK_INSTANTIATE(T)                                                       \
  template void eigh<T>(int64_t, int64_t, bool, const T*, T*, Real<T>*);                   \
  template void svd<T>(int64_t, int64_t, int64_t, bool, bool, const T*, Real<T>*, T*, T*); \
  template void eig<T>(int64_t, int64_t, bool, bool, const T*, Complex<T>*, Complex<T>*,   \
                       Complex<T>*);
REFJIT_LAPACK_INSTANTIATE(float)
REFJIT_LAPACK_INSTANTIATE(double)
REFJIT_LAPACK_INSTANTIATE(std::complex<float>)
REFJIT_LAPACK_INSTANTIATE(std::complex<double>)
#undef REFJIT_LAPACK_INSTANTIATE

}  // namespace refjit::kernels

using namespace refjit::kernels::lapack_support;

extern "C" {

void refjit_eigh(int64_t type, int64_t batch, int64_t n, int64_t lower, int64_t,
                 const RefjitMemRefHead* a, int64_t, const RefjitMemRefHead* v, int64_t,
                 const RefjitMemRefHead* w) {
  with_lapack_type(type, [&](auto zero) {
    using T = decltype(zero);
    refjit::kernels::eigh<T>(batch, n, lower != 0, data_of<T>(a), data_of<T>(v),
                             data_of<Real<T>>(w));
  });
}
void refjit_eig(int64_t type, int64_t batch, int64_t n, int64_t left, int64_t right, int64_t,
                const RefjitMemRefHead* a, int64_t, const RefjitMemRefHead* w, int64_t,
                const RefjitMemRefHead* vl, int64_t, const RefjitMemRefHead* vr) {
  with_lapack_type(type, [&](auto zero) {
    using T = decltype(zero);
    using C = Complex<T>;
    refjit::kernels::eig<T>(batch, n, left != 0, right != 0, data_of<T>(a), data_of<C>(w),
                            left ? data_of<C>(vl) : nullptr, right ? data_of<C>(vr) : nullptr);
  });
}
void refjit_svd(int64_t type, int64_t batch, int64_t m, int64_t n, int64_t full_matrices,
                int64_t compute_uv, int64_t qr, int64_t, const RefjitMemRefHead* a, int64_t,
                const RefjitMemRefHead* s, int64_t, const RefjitMemRefHead* u, int64_t,
                const RefjitMemRefHead* vt) {
  with_lapack_type(type, [&](auto zero) {
    using T = decltype(zero);
    refjit::kernels::svd<T>(batch, m, n, full_matrices != 0, qr != 0, data_of<T>(a),
                            data_of<Real<T>>(s), compute_uv ? data_of<T>(u) : nullptr,
                            compute_uv ? data_of<T>(vt) : nullptr);
  });
}
}
