// The decompositions refjit takes from LAPACK, as JAX's CPU backend does: `eigh` (symmetric or
// Hermitian eigendecomposition, LAPACK's syevd / heevd), `eig` (general eigendecomposition, geev)
// and `svd` (singular value decomposition, gesdd). The same routine gives the same eigenvector
// signs and the same order as JAX's results.
//
// Arrays here are row-major and contiguous, with leading batch dims: a batch of `batch`
// matrices, each `rows` x `cols`. LAPACK works on column-major copies; results are written
// back row-major. A matrix LAPACK fails on (its `info` is not 0: a NaN in the input) gets NaN
// in every result, as JAX gives.
#pragma once

#include <cstdint>

#include "runtime/kernels/lapack_support.h"

namespace refjit::kernels {

// Eigenvectors `v` (n x n per matrix: column j is the eigenvector of w[j]) and eigenvalues `w`
// (n per matrix, ascending) of each n x n matrix of `a`, reading its lower triangle when
// `lower`, else its upper one.
template <class T>
void eigh(int64_t batch, int64_t n, bool lower, const T* a, T* v, lapack_support::Real<T>* w);

// Eigenvalues `w` of each n x n general matrix of `a`, in LAPACK's order, and its left (`vl`,
// u_j^H a = w_j u_j^H) and right (`vr`, a v_j = w_j v_j) eigenvectors as columns when those
// are not null, each of unit norm with its largest component real (LAPACK's geev). A real
// matrix's complex conjugate pairs are unpacked into two complex columns, as JAX does.
template <class T>
void eig(int64_t batch, int64_t n, bool left, bool right, const T* a, lapack_support::Complex<T>* w,
         lapack_support::Complex<T>* vl, lapack_support::Complex<T>* vr);

// Singular values `s` (k = min(m, n) per matrix, descending) of each m x n matrix of `a`, and,
// when `u` and `vt` are not null, the singular vectors: `u` is m x m (full) or m x k, `vt` is
// n x n (full) or k x n. LAPACK's gesdd computes them, or with `qr` its gesvd (JAX's
// SvdAlgorithm.QR, whose vectors may differ from gesdd's in sign).
template <class T>
void svd(int64_t batch, int64_t m, int64_t n, bool full_matrices, bool qr, const T* a,
         lapack_support::Real<T>* s, T* u, T* vt);

}  // namespace refjit::kernels

// The entries generated code calls (backend/lower_linalg.cpp): the element type
// (LapackType), sizes, then operands and results as unranked memrefs (rank, descriptor) of
// contiguous buffers. Without `compute_uv`, `u` and `vt` are not read or written (any memref
// may be passed).
extern "C" {
void refjit_eigh(int64_t type, int64_t batch, int64_t n, int64_t lower, int64_t,
                 const RefjitMemRefHead* a, int64_t, const RefjitMemRefHead* v, int64_t,
                 const RefjitMemRefHead* w);
// Without `left` (`right`), `vl` (`vr`) is not read or written.
void refjit_eig(int64_t type, int64_t batch, int64_t n, int64_t left, int64_t right, int64_t,
                const RefjitMemRefHead* a, int64_t, const RefjitMemRefHead* w, int64_t,
                const RefjitMemRefHead* vl, int64_t, const RefjitMemRefHead* vr);
void refjit_svd(int64_t type, int64_t batch, int64_t m, int64_t n, int64_t full_matrices,
                int64_t compute_uv, int64_t qr, int64_t, const RefjitMemRefHead* a, int64_t,
                const RefjitMemRefHead* s, int64_t, const RefjitMemRefHead* u, int64_t,
                const RefjitMemRefHead* vt);
}
