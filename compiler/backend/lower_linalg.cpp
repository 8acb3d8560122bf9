// Lowering of the matrix decompositions: calls of the LAPACK kernels
// (runtime/kernels/lapack.h) on contiguous buffers, the operand and results copied to and from
// fresh ones when their views are strided.

#include "compiler/backend/lowering.h"

namespace refjit::backend {

namespace {

using mlir::Value;

// The operand in a contiguous buffer (a copy when its view is strided).
Value dense_operand(LowerCtx& c, const Eqn& e) {
  Value in = c.buffer(e.ins[0]);
  if (is_contiguous(in)) return in;
  const ArrayType t = c.type_of(e.ins[0]).array;
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

void lower_eigh(LowerCtx& c, const Eqn& e) {
  require_runtime(c, e, "the decomposition (LAPACK)");
  const ArrayType t = c.type_of(e.ins[0]).array;
  const Value a = dense_operand(c, e);
  const std::vector<ResultBuffer> r = {result_buffer(c, e, 0), result_buffer(c, e, 1)};
  c.call_runtime(t.dtype == DType::f32 ? "refjit_eigh_f32" : "refjit_eigh_f64",
                 {c.index(batch_of(t)), c.index(t.shape.back()),
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
  c.call_runtime(t.dtype == DType::f32 ? "refjit_svd_f32" : "refjit_svd_f64",
                 {c.index(batch_of(t)), c.index(t.shape[t.rank() - 2]), c.index(t.shape.back()),
                  c.index(e.params.get_or<bool>("full_matrices", true) ? 1 : 0),
                  c.index(compute_uv ? 1 : 0), unranked_memref(c, a), unranked_memref(c, r[0].call),
                  unranked_memref(c, u), unranked_memref(c, vt)});
  finish(c, r);
}

}  // namespace

void register_linalg_lowerings(LowerTable& t) {
  t.set(Prim::eigh, &lower_eigh);
  t.set(Prim::svd, &lower_svd);
}

}  // namespace refjit::backend
