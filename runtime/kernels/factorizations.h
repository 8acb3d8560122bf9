// The factorizations refjit takes from LAPACK (and BLAS's triangular solve), the routines
// JAX's CPU backend calls: `cholesky` (potrf), `triangular_solve` (trsm), `lu` (getrf) and
// `qr` (geqrf, then orgqr for Q).
//
// Arrays are row-major and contiguous with leading batch dims, as in lapack.h; each matrix is
// copied to column-major for the call, so LAPACK sees what it sees under JAX.
#pragma once

#include <cstdint>

namespace refjit::kernels {

// The lower Cholesky factor `l` of each n x n matrix of `a`, reading its lower triangle; the
// strict upper triangle of `l` is zero. A matrix that is not positive definite gets NaN
// everywhere, as in JAX.
template <class T>
void cholesky(int64_t batch, int64_t n, const T* a, T* l);

// x with op(a) x = b (`left`) or x op(a) = b, op(a) = a or a^T, for each n x n triangular
// matrix of `a` (lower or upper; with `unit_diagonal`, its diagonal is taken to be 1 and not
// read) and each rows x cols matrix of `b` and `x`.
template <class T>
void triangular_solve(int64_t batch, int64_t n, int64_t rows, int64_t cols, bool left, bool lower,
                      bool transpose_a, bool unit_diagonal, const T* a, const T* b, T* x);

// LU with partial pivoting of each m x n matrix of `a`: `lu` holds L (unit diagonal implied)
// and U packed, `pivots` (min(m, n) per matrix) says row j was swapped with row pivots[j],
// and `permutation` (m per matrix) that row i of P^T a is row permutation[i] of a. A singular
// matrix is no error: U has a zero on its diagonal.
template <class T>
void lu(int64_t batch, int64_t m, int64_t n, const T* a, T* lu, int32_t* pivots,
        int32_t* permutation);

// QR of each m x n matrix of `a` (k = min(m, n)): `q` is m x m (full) or m x k with
// orthonormal columns, `r` m x n (full) or k x n, upper triangular.
template <class T>
void qr(int64_t batch, int64_t m, int64_t n, bool full_matrices, const T* a, T* q, T* r);

}  // namespace refjit::kernels

// The entries generated code calls (compiler/backend/lower_linalg.cpp), on contiguous buffers
// passed as unranked memrefs (rank, descriptor).
extern "C" {
struct RefjitMemRefHead;
void refjit_cholesky_f32(int64_t batch, int64_t n, int64_t, const RefjitMemRefHead* a, int64_t,
                         const RefjitMemRefHead* l);
void refjit_cholesky_f64(int64_t batch, int64_t n, int64_t, const RefjitMemRefHead* a, int64_t,
                         const RefjitMemRefHead* l);
// flags: bit 0 left, bit 1 lower, bit 2 transpose_a, bit 3 unit_diagonal.
void refjit_triangular_solve_f32(int64_t batch, int64_t n, int64_t rows, int64_t cols,
                                 int64_t flags, int64_t, const RefjitMemRefHead* a, int64_t,
                                 const RefjitMemRefHead* b, int64_t, const RefjitMemRefHead* x);
void refjit_triangular_solve_f64(int64_t batch, int64_t n, int64_t rows, int64_t cols,
                                 int64_t flags, int64_t, const RefjitMemRefHead* a, int64_t,
                                 const RefjitMemRefHead* b, int64_t, const RefjitMemRefHead* x);
void refjit_lu_f32(int64_t batch, int64_t m, int64_t n, int64_t, const RefjitMemRefHead* a, int64_t,
                   const RefjitMemRefHead* lu, int64_t, const RefjitMemRefHead* pivots, int64_t,
                   const RefjitMemRefHead* permutation);
void refjit_lu_f64(int64_t batch, int64_t m, int64_t n, int64_t, const RefjitMemRefHead* a, int64_t,
                   const RefjitMemRefHead* lu, int64_t, const RefjitMemRefHead* pivots, int64_t,
                   const RefjitMemRefHead* permutation);
void refjit_qr_f32(int64_t batch, int64_t m, int64_t n, int64_t full_matrices, int64_t,
                   const RefjitMemRefHead* a, int64_t, const RefjitMemRefHead* q, int64_t,
                   const RefjitMemRefHead* r);
void refjit_qr_f64(int64_t batch, int64_t m, int64_t n, int64_t full_matrices, int64_t,
                   const RefjitMemRefHead* a, int64_t, const RefjitMemRefHead* q, int64_t,
                   const RefjitMemRefHead* r);
}
