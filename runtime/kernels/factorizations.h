// The factorizations refjit takes from LAPACK (and BLAS's triangular solve), the routines
// JAX's CPU backend calls: `cholesky` (potrf), `triangular_solve` (trsm), `tridiagonal_solve`
// (gtsv), `lu` (getrf) and
// `qr` (geqrf, or geqp3 with pivoting, then orgqr / ungqr for Q), for f32, f64, c64 and c128.
//
// Arrays are row-major and contiguous with leading batch dims, as in lapack.h; each matrix is
// copied to column-major for the call, so LAPACK sees what it sees under JAX.
#pragma once

#include <cstdint>

#include "runtime/kernels/lapack_support.h"

namespace refjit::kernels {

// The lower Cholesky factor `l` of each n x n symmetric (Hermitian) positive definite matrix
// of `a`, reading its lower triangle; the strict upper triangle of `l` is zero. A matrix that
// is not positive definite gets NaN everywhere, as in JAX.
template <class T>
void cholesky(int64_t batch, int64_t n, const T* a, T* l);

// Which triangular system a solve is: op(a) x = b (`left`) or x op(a) = b, op(a) = a, a^T or
// (`conjugate_a`) their conjugates, a lower or upper, its diagonal taken to be 1 and not read
// with `unit_diagonal`.
struct SolveForm {
  bool left = false, lower = false, transpose_a = false, conjugate_a = false, unit_diagonal = false;
  // The flags generated code passes: bit 0 left, 1 lower, 2 transpose_a, 3 unit_diagonal,
  // 4 conjugate_a.
  static SolveForm from_flags(int64_t f) {
    return {(f & 1) != 0, (f & 2) != 0, (f & 4) != 0, (f & 16) != 0, (f & 8) != 0};
  }
};

// x for each n x n triangular matrix of `a` and each rows x cols matrix of `b` and `x`.
template <class T>
void triangular_solve(int64_t batch, int64_t n, int64_t rows, int64_t cols, const SolveForm& form,
                      const T* a, const T* b, T* x);

// x with A x = b for each tridiagonal m x m matrix A (sub-, main and superdiagonal `dl`, `d`,
// `du`, m entries each as JAX takes them: dl[0] and du[m - 1] are not read) and each m x n
// matrix of `b` and `x`, by LAPACK's gtsv (Gaussian elimination with partial pivoting). A
// singular matrix gets NaN everywhere, as in JAX.
template <class T>
void tridiagonal_solve(int64_t batch, int64_t m, int64_t n, const T* dl, const T* d, const T* du,
                       const T* b, T* x);

// LU with partial pivoting of each m x n matrix of `a`: `lu` holds L (unit diagonal implied)
// and U packed, `pivots` (min(m, n) per matrix) says row j was swapped with row pivots[j],
// and `permutation` (m per matrix) that row i of P^T a is row permutation[i] of a. A singular
// matrix is no error: U has a zero on its diagonal.
template <class T>
void lu(int64_t batch, int64_t m, int64_t n, const T* a, T* lu, int32_t* pivots,
        int32_t* permutation);

// QR of each m x n matrix of `a` (k = min(m, n)): `q` is m x m (full) or m x k with
// orthonormal columns, `r` m x n (full) or k x n, upper triangular. With `p` (n per matrix)
// the columns are pivoted (LAPACK's geqp3): a[:, p] = q r, p counting from 0.
template <class T>
void qr(int64_t batch, int64_t m, int64_t n, bool full_matrices, const T* a, T* q, T* r,
        int32_t* p = nullptr);

}  // namespace refjit::kernels

// The entries generated code calls (backend/lower_linalg.cpp): the element type
// (LapackType), sizes, then contiguous buffers as unranked memrefs (rank, descriptor).
extern "C" {
void refjit_cholesky(int64_t type, int64_t batch, int64_t n, int64_t, const RefjitMemRefHead* a,
                     int64_t, const RefjitMemRefHead* l);
// flags: SolveForm::from_flags.
void refjit_triangular_solve(int64_t type, int64_t batch, int64_t n, int64_t rows, int64_t cols,
                             int64_t flags, int64_t, const RefjitMemRefHead* a, int64_t,
                             const RefjitMemRefHead* b, int64_t, const RefjitMemRefHead* x);
void refjit_tridiagonal_solve(int64_t type, int64_t batch, int64_t m, int64_t n, int64_t,
                              const RefjitMemRefHead* dl, int64_t, const RefjitMemRefHead* d,
                              int64_t, const RefjitMemRefHead* du, int64_t,
                              const RefjitMemRefHead* b, int64_t, const RefjitMemRefHead* x);
void refjit_lu(int64_t type, int64_t batch, int64_t m, int64_t n, int64_t,
               const RefjitMemRefHead* a, int64_t, const RefjitMemRefHead* lu, int64_t,
               const RefjitMemRefHead* pivots, int64_t, const RefjitMemRefHead* permutation);
// Without `pivoting`, `p` is not read or written.
void refjit_qr(int64_t type, int64_t batch, int64_t m, int64_t n, int64_t full_matrices,
               int64_t pivoting, int64_t, const RefjitMemRefHead* a, int64_t,
               const RefjitMemRefHead* q, int64_t, const RefjitMemRefHead* r, int64_t,
               const RefjitMemRefHead* p);
}
