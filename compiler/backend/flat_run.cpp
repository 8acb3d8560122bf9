#include "compiler/backend/flat_run.h"

#include <optional>

namespace refjit::backend {

using mlir::Value;
namespace arith = mlir::arith;

bool lower_with_flat_run(LowerCtx& c, const Eqn& e, size_t first, const FlatRunFn& fast,
                         const std::function<void()>& general) {
  // Decided by the pipeline's fusion pass (passes/simplify/unit_run.h indexes_with_run, which also
  // checked the shapes: one rank-1 index array per dim of the ref, n of them, 1 <= n <= |R|).
  if (!c.index_run_decided()) return false;
  const Type rt = c.type_of(e.ins.at(0));
  const Shape& shape = rt.array.shape;
  const std::vector<Atom> idx(e.ins.begin() + static_cast<long>(first), e.ins.end());
  const int64_t n = c.type_of(idx.at(0)).array.shape.at(0);
  const int64_t total = rt.array.num_elements();
  // x itself may be fused away or its buffer reused by now; the access's own operands are
  // valid. Their entries j name flat(j) = clamp(x[j]); x[j + 1] == x[j] + 1 (mod wrap-around)
  // and clamping never raises a step above 1, so flat(n-1) - flat(0) == n - 1 exactly when
  // no entry was clamped or wrapped: then flat(j) == flat(0) + j.
  auto flat_at = [&](int64_t j) {
    Value f = c.int_constant(DType::i64, 0);
    int64_t stride = total;
    for (size_t d = 0; d < shape.size(); ++d) {
      stride /= shape[d];
      Value v = c.load(idx[d], {c.index(j)});
      v = c.index_to_i64(v, c.type_of(idx[d]).array.dtype);
      v = c.b.create<arith::MulIOp>(c.loc, v, c.int_constant(DType::i64, stride));
      f = c.b.create<arith::AddIOp>(c.loc, f, v);
    }
    return f;
  };
  Value x0 = flat_at(0);
  Value span = c.b.create<arith::SubIOp>(c.loc, flat_at(n - 1), x0);
  Value inside = c.b.create<arith::AndIOp>(
      c.loc,
      c.b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::eq, span,
                                c.int_constant(DType::i64, n - 1)),
      c.b.create<arith::AndIOp>(c.loc,
                                c.b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::sge, x0,
                                                          c.int_constant(DType::i64, 0)),
                                c.b.create<arith::CmpIOp>(c.loc, arith::CmpIPredicate::sle, x0,
                                                          c.int_constant(DType::i64, total - n))));
  auto branch = c.b.create<mlir::scf::IfOp>(c.loc, inside, /*withElseRegion=*/true);
  mlir::OpBuilder::InsertionGuard g(c.b);
  c.b.setInsertionPoint(branch.thenBlock()->getTerminator());
  Value flat_ref = c.view_as(c.buffer(e.ins[0]), ArrayType{rt.array.dtype, {total}});
  fast(flat_ref, c.b.create<arith::IndexCastOp>(c.loc, c.b.getIndexType(), x0), n);
  c.b.setInsertionPoint(branch.elseBlock()->getTerminator());
  general();
  return true;
}

}  // namespace refjit::backend
