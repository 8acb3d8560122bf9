// Type rules of the matrix decompositions (docs/primitives.md "Matrix decompositions"): eigh,
// svd, cholesky, triangular_solve, lu and qr, on the last two dims of a float array, any
// leading dims a batch.
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>

#include "ir/type_rule_support.h"
#include "ir/type_rules.h"

namespace refjit {

namespace {

using type_rules::Checker;

// A boolean param, `fallback` when absent (programs built in C++ may leave it out).
bool flag(const Checker& c, std::string_view key, bool fallback) {
  const ParamValue* v = c.params().find(key);
  if (!v) return fallback;
  const bool* b = std::get_if<bool>(v);
  if (!b) c.fail("param '{}' has the wrong kind of value", key);
  return *b;
}

// Operand `i`: f32, f64, c64 or c128, rank 2 or more (LAPACK has no half floats).
const ArrayType& matrix_operand(const Checker& c, int i = 0) {
  const ArrayType& a = c.array(static_cast<size_t>(i));
  if (a.dtype != DType::f32 && a.dtype != DType::f64 && a.dtype != DType::c64 &&
      a.dtype != DType::c128)
    c.fail(
        "operand {} has type {}; refjit decomposes f32, f64, c64 and c128 matrices (convert "
        "first)",
        i, a.str());
  if (a.rank() < 2)
    c.fail("operand {} has type {}; a matrix (rank 2 or more) is needed", i, a.str());
  // LAPACK counts rows and columns in 32-bit ints.
  for (int d = a.rank() - 2; d < a.rank(); ++d)
    if (a.shape[d] > std::numeric_limits<int32_t>::max())
      c.fail("operand {} has type {}; LAPACK takes at most 2^31 - 1 rows and columns", i, a.str());
  return a;
}

const ArrayType& square_operand(const Checker& c) {
  const ArrayType& a = matrix_operand(c);
  if (a.shape[a.rank() - 2] != a.shape[a.rank() - 1])
    c.fail("operand 0 has type {}; a square matrix is needed", a.str());
  return a;
}

Shape batch_of(const ArrayType& a) { return Shape(a.shape.begin(), a.shape.end() - 2); }

Type with_batch(const ArrayType& a, DType dtype, std::initializer_list<int64_t> dims) {
  Shape s = batch_of(a);
  s.insert(s.end(), dims.begin(), dims.end());
  return Type(ArrayType{dtype, s});
}

// subset_by_index: None, or the whole range (0, count), as JAX's CPU backend allows.
void check_whole_subset(const Checker& c, int64_t count) {
  const IntList* subset = c.optional_param<IntList>("subset_by_index");
  if (subset && !(subset->size() == 2 && (*subset)[0] == 0 && (*subset)[1] == count))
    c.fail(
        "subset_by_index must be None or (0, {}) (a partial decomposition is not supported, "
        "as on JAX's CPU backend)",
        count);
}

// Param `key` (the algorithm): None, or one of `accepted` (the spellings that pick the LAPACK
// routine refjit calls).
void check_algorithm_param(const Checker& c, std::string_view key,
                           std::initializer_list<std::string_view> accepted,
                           std::string_view routine) {
  const std::string* algorithm = c.optional_param<std::string>(key);
  if (!algorithm) return;
  for (std::string_view a : accepted)
    if (*algorithm == a) return;
  c.fail("{}={} is not supported; refjit computes it with LAPACK's {} ({}=None)", key, *algorithm,
         routine, key);
}

void check_algorithm(const Checker& c, std::initializer_list<std::string_view> accepted,
                     std::string_view routine) {
  check_algorithm_param(c, "algorithm", accepted, routine);
}

// eigh: a:T[..., n, n] -> (eigenvectors T[..., n, n], eigenvalues T[..., n]).
std::vector<Type> eigh_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::eigh, in, params);
  c.expect_count(1);
  const ArrayType& a = square_operand(c);
  const int64_t n = a.shape[a.rank() - 1];
  check_whole_subset(c, n);
  check_algorithm(c, {"EighImplementation.QR"}, "syevd");
  (void)flag(c, "lower", true);
  if (!flag(c, "sort_eigenvalues", true))
    c.fail("sort_eigenvalues=False is not supported; the eigenvalues come in ascending order");
  // The eigenvalues of a symmetric or Hermitian matrix are real.
  Shape w_shape(a.shape.begin(), a.shape.end() - 1);
  return {Type(a), Type(ArrayType{real_dtype(a.dtype), w_shape})};
}

// svd: a:T[..., m, n] -> s:T[..., k] (k = min(m, n)), then with compute_uv
// u:T[..., m, m or k] and vt:T[..., n or k, n].
std::vector<Type> svd_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::svd, in, params);
  c.expect_count(1);
  const ArrayType& a = matrix_operand(c);
  const int64_t m = a.shape[a.rank() - 2], n = a.shape[a.rank() - 1], k = std::min(m, n);
  check_whole_subset(c, k);
  check_algorithm(c, {"SvdAlgorithm.DEFAULT", "SvdAlgorithm.DIVIDE_AND_CONQUER", "SvdAlgorithm.QR"},
                  "gesdd, or gesvd for SvdAlgorithm.QR");
  const bool full = flag(c, "full_matrices", true);
  std::vector<Type> out = {with_batch(a, real_dtype(a.dtype), {k})};
  if (flag(c, "compute_uv", true)) {
    out.push_back(with_batch(a, a.dtype, {m, full ? m : k}));
    out.push_back(with_batch(a, a.dtype, {full ? n : k, n}));
  }
  return out;
}

// eig[compute_left_eigenvectors compute_right_eigenvectors ...] a:T[..., n, n] -> (w C[..., n],
// then vl C[..., n, n] and vr C[..., n, n] as asked), C the complex dtype of T's precision.
std::vector<Type> eig_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::eig, in, params);
  c.expect_count(1);
  const ArrayType& a = square_operand(c);
  check_algorithm_param(c, "implementation", {"EigImplementation.LAPACK"}, "geev");
  (void)flag(c, "enable_eigvec_derivs", false);
  const DType complex = complex_dtype(a.dtype);
  const int64_t n = a.shape.back();
  std::vector<Type> out = {with_batch(a, complex, {n})};
  if (flag(c, "compute_left_eigenvectors", false)) out.push_back(with_batch(a, complex, {n, n}));
  if (flag(c, "compute_right_eigenvectors", true)) out.push_back(with_batch(a, complex, {n, n}));
  return out;
}

// cholesky: a:T[..., n, n] -> the lower factor T[..., n, n].
std::vector<Type> cholesky_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::cholesky, in, params);
  c.expect_count(1);
  return {Type(square_operand(c))};
}

// triangular_solve[left_side lower transpose_a conjugate_a unit_diagonal] a:T[..., n, n]
// b:T[..., n, k] (left side) or T[..., k, n] -> x with b's type.
std::vector<Type> triangular_solve_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::triangular_solve, in, params);
  c.expect_count(2);
  const ArrayType& a = square_operand(c);
  const ArrayType& b = matrix_operand(c, 1);
  if (b.dtype != a.dtype || b.rank() != a.rank() ||
      !std::equal(a.shape.begin(), a.shape.end() - 2, b.shape.begin()))
    c.fail(
        "operand 1 has type {}; a right-hand side of operand 0's dtype and batch dims ({}) "
        "is needed",
        b.str(), a.str());
  const bool left = flag(c, "left_side", false);
  for (std::string_view f : {"lower", "transpose_a", "conjugate_a", "unit_diagonal"})
    (void)flag(c, f, false);
  const int d = left ? b.rank() - 2 : b.rank() - 1;
  if (b.shape[d] != a.shape.back())
    c.fail("operand 1 has type {}; its {} ({}) must match operand 0's order {} (left_side={})",
           b.str(), left ? "rows" : "columns", b.shape[d], a.shape.back(), left ? "True" : "False");
  return {Type(b)};
}

// tridiagonal_solve[perturb_singular] dl:T[..., m] d:T[..., m] du:T[..., m] b:T[..., m, n]
// -> x with b's type.
std::vector<Type> tridiagonal_solve_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::tridiagonal_solve, in, params);
  c.expect_count(4);
  const ArrayType& b = matrix_operand(c, 3);
  for (int i = 0; i < 3; ++i) {
    const ArrayType& diagonal = c.array(static_cast<size_t>(i));
    if (diagonal.dtype != b.dtype || diagonal.rank() != b.rank() - 1 ||
        !std::equal(diagonal.shape.begin(), diagonal.shape.end(), b.shape.begin()))
      c.fail(
          "operand {} has type {}; the three diagonals must be {}[{}] for the right-hand "
          "side {} (its leading dims)",
          i, diagonal.str(), short_name(b.dtype),
          fmt::join(b.shape.begin(), b.shape.end() - 1, ", "), b.str());
  }
  if (flag(c, "perturb_singular", false))
    c.fail(
        "perturb_singular=True is not supported (refjit solves with LAPACK's gtsv, which "
        "gives NaN for a singular matrix)");
  return {Type(b)};
}

// lu: a:T[..., m, n] -> (lu T[..., m, n], pivots i32[..., min(m, n)], permutation i32[..., m]).
std::vector<Type> lu_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::lu, in, params);
  c.expect_count(1);
  const ArrayType& a = matrix_operand(c);
  const int64_t m = a.shape[a.rank() - 2], n = a.shape.back();
  return {Type(a), with_batch(a, DType::i32, {std::min(m, n)}), with_batch(a, DType::i32, {m})};
}

// qr[full_matrices pivoting use_magma] a:T[..., m, n] -> (q T[..., m, m or k],
// r T[..., m or k, n]), k = min(m, n), and with pivoting the column permutation p i32[..., n].
std::vector<Type> qr_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::qr, in, params);
  c.expect_count(1);
  const ArrayType& a = matrix_operand(c);
  const int64_t m = a.shape[a.rank() - 2], n = a.shape.back(), k = std::min(m, n);
  const bool full = flag(c, "full_matrices", true);
  std::vector<Type> out = {with_batch(a, a.dtype, {m, full ? m : k}),
                           with_batch(a, a.dtype, {full ? m : k, n})};
  if (flag(c, "pivoting", false)) out.push_back(with_batch(a, DType::i32, {n}));
  return out;
}

}  // namespace

void register_linalg_type_rules(TypeRuleTable& t) {
  t[static_cast<int>(Prim::eigh)] = eigh_rule;
  t[static_cast<int>(Prim::svd)] = svd_rule;
  t[static_cast<int>(Prim::eig)] = eig_rule;
  t[static_cast<int>(Prim::cholesky)] = cholesky_rule;
  t[static_cast<int>(Prim::triangular_solve)] = triangular_solve_rule;
  t[static_cast<int>(Prim::lu)] = lu_rule;
  t[static_cast<int>(Prim::tridiagonal_solve)] = tridiagonal_solve_rule;
  t[static_cast<int>(Prim::qr)] = qr_rule;
}

}  // namespace refjit
