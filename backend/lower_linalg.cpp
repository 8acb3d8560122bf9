// Lowering of the matrix decompositions: calls of the LAPACK kernels
// (runtime/kernels/lapack.h, factorizations.h) on contiguous buffers, the operand and results
// copied to and from fresh ones when their views are strided.

#include "backend/lowering.h"
#include "ir/svd_algorithm.h"
#include "runtime/kernels/lapack_support.h"

namespace refjit::backend {

namespace {

// Operand `i` in a contiguous buffer (a copy when its view is strided).
Value dense_operand(LowerCtx& c, const Eqn& e, size_t i = 0) {
  Value in = c.buffer(e.ins[i]);
  if (is_contiguous(in)) return in;
  const ArrayType t = c.type_of(e.ins[i]).array;
  Value dense = c.alloc(t);
  c.copy(in, dense, t);
  return dense;
}

// Where the kernel writes result i, and the copy back into the result's buffer afterwards
// when that buffer is a strided view.
struct ResultBuffer {
  Value call, result;
  ArrayType type;
};

ResultBuffer result_buffer(LowerCtx& c, const Eqn& e, size_t i) {
  const ArrayType t = c.type_of(e.outs[i]).array;
  const Value result = c.result_buffer(e.outs[i]);
  return {is_contiguous(result) ? result : c.alloc(t), result, t};
}

void finish(LowerCtx& c, const std::vector<ResultBuffer>& results) {
  for (const ResultBuffer& r : results)
    if (r.call != r.result) c.copy(r.call, r.result, r.type);
}

int64_t batch_of(const ArrayType& t) {
  int64_t b = 1;
  for (int d = 0; d + 2 < t.rank(); ++d) b *= t.shape[d];
  return b;
}

// The element type code the runtime entries take (runtime/kernels/lapack_support.h).
Value type_code(LowerCtx& c, DType d) {
  using kernels::LapackType;
  const LapackType t = d == DType::f32   ? LapackType::f32
                       : d == DType::f64 ? LapackType::f64
                       : d == DType::c64 ? LapackType::c64
                                         : LapackType::c128;
  return c.index(static_cast<int64_t>(t));
}

void lower_eigh(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "the decomposition (LAPACK)");
  const ArrayType t = c.type_of(e.ins[0]).array;
  const Value a = dense_operand(c, e);
  const std::vector<ResultBuffer> r = {result_buffer(c, e, 0), result_buffer(c, e, 1)};
  c.call_runtime("refjit_eigh",
                 {type_code(c, t.dtype), c.index(batch_of(t)), c.index(t.shape.back()),
                  c.index(e.params.get_or<bool>("lower", true) ? 1 : 0), unranked_memref(c, a),
                  unranked_memref(c, r[0].call), unranked_memref(c, r[1].call)});
  finish(c, r);
}

void lower_svd(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "the decomposition (LAPACK)");
  const ArrayType t = c.type_of(e.ins[0]).array;
  const bool compute_uv = e.outs.size() == 3;
  const Value a = dense_operand(c, e);
  std::vector<ResultBuffer> r = {result_buffer(c, e, 0)};
  if (compute_uv) {
    r.push_back(result_buffer(c, e, 1));
    r.push_back(result_buffer(c, e, 2));
  }
  // Without singular vectors the kernel reads neither u nor vt: s stands in for both.
  const Value u = compute_uv ? r[1].call : r[0].call, vt = compute_uv ? r[2].call : r[0].call;
  c.call_runtime(
      "refjit_svd",
      {type_code(c, t.dtype), c.index(batch_of(t)), c.index(t.shape[t.rank() - 2]),
       c.index(t.shape.back()), c.index(e.params.get_or<bool>("full_matrices", true) ? 1 : 0),
       c.index(compute_uv ? 1 : 0), c.index(svd_uses_gesvd(e.params) ? 1 : 0),
       unranked_memref(c, a), unranked_memref(c, r[0].call), unranked_memref(c, u),
       unranked_memref(c, vt)});
  finish(c, r);
}

void lower_eig(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "the decomposition (LAPACK)");
  const ArrayType t = c.type_of(e.ins[0]).array;
  const bool left = e.params.get_or<bool>("compute_left_eigenvectors", false);
  const bool right = e.params.get_or<bool>("compute_right_eigenvectors", true);
  const Value a = dense_operand(c, e);
  std::vector<ResultBuffer> r;
  for (size_t i = 0; i < e.outs.size(); ++i) r.push_back(result_buffer(c, e, i));
  // Vectors not asked for are neither read nor written: w stands in for them.
  const Value vl = left ? r[1].call : r[0].call, vr = right ? r.back().call : r[0].call;
  c.call_runtime("refjit_eig",
                 {type_code(c, t.dtype), c.index(batch_of(t)), c.index(t.shape.back()),
                  c.index(left ? 1 : 0), c.index(right ? 1 : 0), unranked_memref(c, a),
                  unranked_memref(c, r[0].call), unranked_memref(c, vl), unranked_memref(c, vr)});
  finish(c, r);
}

void lower_cholesky(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "the factorization (LAPACK)");
  const ArrayType t = c.type_of(e.ins[0]).array;
  const Value a = dense_operand(c, e);
  const std::vector<ResultBuffer> r = {result_buffer(c, e, 0)};
  c.call_runtime("refjit_cholesky",
                 {type_code(c, t.dtype), c.index(batch_of(t)), c.index(t.shape.back()),
                  unranked_memref(c, a), unranked_memref(c, r[0].call)});
  finish(c, r);
}

void lower_triangular_solve(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "the triangular solve (BLAS)");
  const ArrayType at = c.type_of(e.ins[0]).array, bt = c.type_of(e.ins[1]).array;
  const Value a = dense_operand(c, e, 0), b = dense_operand(c, e, 1);
  const std::vector<ResultBuffer> r = {result_buffer(c, e, 0)};
  // kernels::SolveForm::from_flags.
  int64_t flags = 0;
  if (e.params.get_or<bool>("left_side", false)) flags |= 1;
  if (e.params.get_or<bool>("lower", false)) flags |= 2;
  if (e.params.get_or<bool>("transpose_a", false)) flags |= 4;
  if (e.params.get_or<bool>("unit_diagonal", false)) flags |= 8;
  if (e.params.get_or<bool>("conjugate_a", false)) flags |= 16;
  c.call_runtime("refjit_triangular_solve",
                 {type_code(c, at.dtype), c.index(batch_of(at)), c.index(at.shape.back()),
                  c.index(bt.shape[bt.rank() - 2]), c.index(bt.shape.back()), c.index(flags),
                  unranked_memref(c, a), unranked_memref(c, b), unranked_memref(c, r[0].call)});
  finish(c, r);
}

void lower_tridiagonal_solve(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "the tridiagonal solve (LAPACK)");
  const ArrayType bt = c.type_of(e.ins[3]).array;
  std::vector<Value> operands;
  for (size_t i = 0; i < 4; ++i) operands.push_back(dense_operand(c, e, i));
  const std::vector<ResultBuffer> r = {result_buffer(c, e, 0)};
  c.call_runtime("refjit_tridiagonal_solve",
                 {type_code(c, bt.dtype), c.index(batch_of(bt)), c.index(bt.shape[bt.rank() - 2]),
                  c.index(bt.shape.back()), unranked_memref(c, operands[0]),
                  unranked_memref(c, operands[1]), unranked_memref(c, operands[2]),
                  unranked_memref(c, operands[3]), unranked_memref(c, r[0].call)});
  finish(c, r);
}

void lower_lu(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "the factorization (LAPACK)");
  const ArrayType t = c.type_of(e.ins[0]).array;
  const Value a = dense_operand(c, e);
  const std::vector<ResultBuffer> r = {result_buffer(c, e, 0), result_buffer(c, e, 1),
                                       result_buffer(c, e, 2)};
  c.call_runtime("refjit_lu",
                 {type_code(c, t.dtype), c.index(batch_of(t)), c.index(t.shape[t.rank() - 2]),
                  c.index(t.shape.back()), unranked_memref(c, a), unranked_memref(c, r[0].call),
                  unranked_memref(c, r[1].call), unranked_memref(c, r[2].call)});
  finish(c, r);
}

void lower_qr(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "the factorization (LAPACK)");
  const ArrayType t = c.type_of(e.ins[0]).array;
  const Value a = dense_operand(c, e);
  const bool pivoting = e.outs.size() == 3;
  std::vector<ResultBuffer> r = {result_buffer(c, e, 0), result_buffer(c, e, 1)};
  if (pivoting) r.push_back(result_buffer(c, e, 2));
  // Without pivoting the kernel does not touch p: r stands in for it.
  const Value p = pivoting ? r[2].call : r[1].call;
  c.call_runtime(
      "refjit_qr",
      {type_code(c, t.dtype), c.index(batch_of(t)), c.index(t.shape[t.rank() - 2]),
       c.index(t.shape.back()), c.index(e.params.get_or<bool>("full_matrices", true) ? 1 : 0),
       c.index(pivoting ? 1 : 0), unranked_memref(c, a), unranked_memref(c, r[0].call),
       unranked_memref(c, r[1].call), unranked_memref(c, p)});
  finish(c, r);
}

}  // namespace

void register_linalg_lowerings(LowerTable& t) {
  t.set(Prim::eigh, &lower_eigh);
  t.set(Prim::svd, &lower_svd);
  t.set(Prim::eig, &lower_eig);
  t.set(Prim::cholesky, &lower_cholesky);
  t.set(Prim::triangular_solve, &lower_triangular_solve);
  t.set(Prim::lu, &lower_lu);
  t.set(Prim::tridiagonal_solve, &lower_tridiagonal_solve);
  t.set(Prim::qr, &lower_qr);
}

}  // namespace refjit::backend
