// Named array operations, one per primitive of docs/primitives.md (JAX's lax names), plus
// numpy-style conveniences (matmul, zeros, arange, ...). Each runs eagerly outside a trace
// and appends one eqn (or a few) inside one.
#pragma once

#include <cstdint>
#include <vector>

#include "refjit/ir/params.h"
#include "refjit/value.h"

namespace refjit {

using Ints = std::vector<int64_t>;

// Elementwise unary.
Value neg(const Value& x);
Value exp(const Value& x);
Value log(const Value& x);
Value log1p(const Value& x);
Value expm1(const Value& x);
Value sin(const Value& x);
Value cos(const Value& x);
Value tan(const Value& x);
Value tanh(const Value& x);
Value logistic(const Value& x);
Value sqrt(const Value& x);
Value rsqrt(const Value& x);
Value abs(const Value& x);
Value sign(const Value& x);
Value floor(const Value& x);
Value ceil(const Value& x);
// rounding_method 0: half away from zero; 1: half to even.
Value round(const Value& x, int rounding_method = 0);
Value logical_not(const Value& x);
Value integer_pow(const Value& x, int64_t y);
Value convert(const Value& x, DType new_dtype);
Value stop_gradient(const Value& x);
Value copy(const Value& x);
// Complex numbers (lax.real, imag, conj, complex): the parts, the conjugate (of a real float:
// that value as complex), and the complex number re + i im.
Value real(const Value& x);
Value imag(const Value& x);
Value conj(const Value& x);
Value complex(const Value& re, const Value& im);

// Elementwise binary (same shapes, or one side a scalar; C++ scalars take the other side's
// dtype).
Value add(const Value& a, const Value& b);
Value add_any(const Value& a, const Value& b);
Value sub(const Value& a, const Value& b);
Value mul(const Value& a, const Value& b);
Value div(const Value& a, const Value& b);
Value max(const Value& a, const Value& b);
Value min(const Value& a, const Value& b);
Value pow(const Value& a, const Value& b);
Value eq(const Value& a, const Value& b);
Value ne(const Value& a, const Value& b);
Value lt(const Value& a, const Value& b);
Value le(const Value& a, const Value& b);
Value gt(const Value& a, const Value& b);
Value ge(const Value& a, const Value& b);
Value logical_and(const Value& a, const Value& b);
Value logical_or(const Value& a, const Value& b);

// select_n(p, c0, c1, ...): case p elementwise (bool p: c0 where false, c1 where true).
Value select_n(const Value& pred, const std::vector<Value>& cases);
// numpy's where(p, on_true, on_false) = select_n(p, on_false, on_true).
Value where(const Value& pred, const Value& on_true, const Value& on_false);

// Shapes and data movement.
Value broadcast_in_dim(const Value& x, const Ints& shape, const Ints& broadcast_dimensions);
// numpy-style broadcast (trailing dims aligned).
Value broadcast_to(const Value& x, const Ints& shape);
Value reshape(const Value& x, const Ints& new_sizes);
Value squeeze(const Value& x, const Ints& dimensions);
Value expand_dims(const Value& x, const Ints& dimensions);
Value transpose(const Value& x, const Ints& permutation);
Value concatenate(const std::vector<Value>& xs, int64_t dimension);
// padding_config: (lo, hi, interior) per dim.
Value pad(const Value& x, const Value& padding_value, const IntListList& padding_config);
Value slice(const Value& x, const Ints& start_indices, const Ints& limit_indices,
            const Ints& strides = {});
Value dynamic_slice(const Value& x, const std::vector<Value>& start_indices,
                    const Ints& slice_sizes);
Value dynamic_update_slice(const Value& x, const Value& update,
                           const std::vector<Value>& start_indices);
Value iota(DType dtype, const Ints& shape, int64_t dimension = 0);
// x[..., indices, ...] on `axis`. With dims > 1 an index addresses dims axis..axis+dims-1
// together, as one position in their row-major order: JAX's x.at[i, j] on a [h, w] array is
// gather(x, i * w + j, 0, 2), without the copies a reshape of x could cost.
Value gather(const Value& x, const Value& indices, int64_t axis = 0, int64_t dims = 1);
// unique_indices (JAX's flag of the same name) promises no index repeats: the gradient
// then skips the last-write-wins mask it otherwise builds for duplicate indices.
Value scatter(const Value& x, const Value& indices, const Value& updates, int64_t axis = 0,
              bool unique_indices = false, int64_t dims = 1);
Value scatter_add(const Value& x, const Value& indices, const Value& updates, int64_t axis = 0,
                  int64_t dims = 1);

// Reductions (no axes given: all of them) and contractions.
Value reduce_sum(const Value& x, const Ints& axes);
Value reduce_sum(const Value& x);
Value reduce_max(const Value& x, const Ints& axes);
Value reduce_max(const Value& x);
Value reduce_min(const Value& x, const Ints& axes);
Value reduce_min(const Value& x);
Value argmax(const Value& x, int64_t axis, DType index_dtype = DType::i32);
Value dot_general(const Value& lhs, const Value& rhs, const DotDims& dimension_numbers);
// numpy matmul/dot for rank 1 and 2 operands (contracts lhs's last dim with rhs's first).
Value matmul(const Value& a, const Value& b);
Value dot(const Value& a, const Value& b);

// Matrix decompositions on the last two dims (leading dims are a batch), computed by LAPACK as
// on JAX's CPU backend (jax.lax.linalg.eigh and svd). eigh reads one triangle of each matrix
// (no symmetrizing: jnp.linalg.eigh symmetrizes first) and gives the eigenvectors (column j
// for eigenvalue j) and the eigenvalues in ascending order.
struct Eigh {
  Value vectors, values;
};
Eigh eigh(const Value& a, bool lower = true);
// s descending; u is [..., m, m] and vt [..., n, n] with full_matrices, else [..., m, k] and
// [..., k, n], k = min(m, n). Only the reduced form with vectors, or s alone (svd_values),
// is differentiable, as in JAX.
struct Svd {
  Value u, s, vt;
};
Svd svd(const Value& a, bool full_matrices = false);
Value svd_values(const Value& a);
// Eigenvalues (complex, LAPACK's order) and, as asked, left and right eigenvectors (complex
// columns of unit norm) of a general matrix, as LAPACK's geev and jax.lax.linalg.eig give
// them. Eigenvector derivatives need `eigenvector_derivatives` (JAX's enable_eigvec_derivs).
struct Eig {
  Value values, left, right;  // left / right: empty Values when not asked for
};
Eig eig(const Value& a, bool left = false, bool right = true, bool eigenvector_derivatives = false);
// The lower Cholesky factor of each symmetric positive definite matrix, reading its lower
// triangle (jax.lax.linalg.cholesky with symmetrize_input=False); NaN where the matrix is not
// positive definite.
Value cholesky(const Value& a);
// x with op(a) x = b (left_side) or x op(a) = b, op(a) = a or a^T, reading only a's lower
// (`lower`) or upper triangle, its diagonal taken as 1 with `unit_diagonal`
// (jax.lax.linalg.triangular_solve; differentiable in both operands).
struct TriangularSolveOptions {
  bool left_side = false;
  bool lower = false;
  bool transpose_a = false;
  bool unit_diagonal = false;
};
Value triangular_solve(const Value& a, const Value& b, const TriangularSolveOptions& options = {});
// x with A x = b for the tridiagonal A of diagonals dl, d, du ([..., m]; dl[0] and du[m - 1]
// are not read) and b [..., m, n] (jax.lax.linalg.tridiagonal_solve, LAPACK's gtsv).
Value tridiagonal_solve(const Value& dl, const Value& d, const Value& du, const Value& b);
// LU with partial pivoting, as LAPACK's getrf: `factors` packs L (unit diagonal implied) and
// U, `pivots` (i32, min(m, n)) are the row swaps and `permutation` (i32, m) the rows of a in
// the order of P^T a = L U (jax.lax.linalg.lu).
struct Lu {
  Value factors, pivots, permutation;
};
Lu lu(const Value& a);
// a = q r, q with orthonormal columns ([..., m, m] with full_matrices, else [..., m, k]) and r
// upper triangular (jax.lax.linalg.qr).
struct Qr {
  Value q, r;
};
Qr qr(const Value& a, bool full_matrices = false);

// Constructors (concrete, or constants of the trace).
Value full(const Ints& shape, const Value& fill, DType dtype);
Value zeros(const Ints& shape, DType dtype = DType::f32);
Value ones(const Ints& shape, DType dtype = DType::f32);
Value zeros_like(const Value& x);
Value ones_like(const Value& x);
// [0, 1, ..., n-1] as iota.
Value arange(int64_t n, DType dtype = DType::i32);
// A concrete array from values and a shape.
template <class T>
Value array(const std::vector<T>& values, Shape shape) {
  return Value(Array::from_vector<T>(values, std::move(shape)));
}
template <class T>
Value array(const std::vector<T>& values) {
  return array(values, Shape{static_cast<int64_t>(values.size())});
}

}  // namespace refjit
