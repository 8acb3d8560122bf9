// Type rules of the matrix decompositions (docs/primitives.md "Matrix decompositions"): eigh
// and svd, on the last two dims of a float array, any leading dims a batch.
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

// Operand 0: f32 or f64, rank 2 or more. (LAPACK has no half floats; complex matrices are not
// supported yet.)
const ArrayType& matrix_operand(const Checker& c) {
  c.expect_count(1);
  const ArrayType& a = c.array(0);
  if (a.dtype != DType::f32 && a.dtype != DType::f64)
    c.fail("operand 0 has type {}; refjit decomposes f32 and f64 matrices (convert first{})",
           a.str(), is_complex(a.dtype) ? "; complex matrices are not supported yet" : "");
  if (a.rank() < 2) c.fail("operand 0 has type {}; a matrix (rank 2 or more) is needed", a.str());
  // LAPACK counts rows and columns in 32-bit ints.
  for (int d = a.rank() - 2; d < a.rank(); ++d)
    if (a.shape[d] > std::numeric_limits<int32_t>::max())
      c.fail("operand 0 has type {}; LAPACK takes at most 2^31 - 1 rows and columns", a.str());
  return a;
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

// algorithm: None, or one of `accepted` (the spellings that pick the LAPACK routine refjit
// calls).
void check_algorithm(const Checker& c, std::initializer_list<std::string_view> accepted,
                     std::string_view routine) {
  const std::string* algorithm = c.optional_param<std::string>("algorithm");
  if (!algorithm) return;
  for (std::string_view a : accepted)
    if (*algorithm == a) return;
  c.fail("algorithm={} is not supported; refjit computes it with LAPACK's {} (algorithm=None)",
         *algorithm, routine);
}

// eigh: a:T[..., n, n] -> (eigenvectors T[..., n, n], eigenvalues T[..., n]).
std::vector<Type> eigh_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::eigh, in, params);
  const ArrayType& a = matrix_operand(c);
  const int64_t n = a.shape[a.rank() - 1];
  if (a.shape[a.rank() - 2] != n)
    c.fail("operand 0 has type {}; a square matrix is needed", a.str());
  check_whole_subset(c, n);
  check_algorithm(c, {"EighImplementation.QR"}, "syevd");
  (void)flag(c, "lower", true);
  if (!flag(c, "sort_eigenvalues", true))
    c.fail("sort_eigenvalues=False is not supported; the eigenvalues come in ascending order");
  Shape w_shape(a.shape.begin(), a.shape.end() - 1);
  return {Type(a), Type(ArrayType{a.dtype, w_shape})};
}

// svd: a:T[..., m, n] -> s:T[..., k] (k = min(m, n)), then with compute_uv
// u:T[..., m, m or k] and vt:T[..., n or k, n].
std::vector<Type> svd_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::svd, in, params);
  const ArrayType& a = matrix_operand(c);
  const int64_t m = a.shape[a.rank() - 2], n = a.shape[a.rank() - 1], k = std::min(m, n);
  check_whole_subset(c, k);
  check_algorithm(c, {"SvdAlgorithm.DEFAULT", "SvdAlgorithm.DIVIDE_AND_CONQUER"}, "gesdd");
  const bool full = flag(c, "full_matrices", true);
  const Shape batch(a.shape.begin(), a.shape.end() - 2);
  auto with_batch = [&](std::initializer_list<int64_t> dims) {
    Shape s = batch;
    s.insert(s.end(), dims.begin(), dims.end());
    return Type(ArrayType{a.dtype, s});
  };
  std::vector<Type> out = {with_batch({k})};
  if (flag(c, "compute_uv", true)) {
    out.push_back(with_batch({m, full ? m : k}));
    out.push_back(with_batch({full ? n : k, n}));
  }
  return out;
}

}  // namespace

void register_linalg_type_rules(TypeRuleTable& t) {
  t[static_cast<int>(Prim::eigh)] = eigh_rule;
  t[static_cast<int>(Prim::svd)] = svd_rule;
}

}  // namespace refjit
