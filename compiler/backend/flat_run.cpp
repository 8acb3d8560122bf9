#include "compiler/backend/flat_run.h"

#include <optional>

#include "passes/unit_run.h"

namespace refjit::backend {
namespace {

using mlir::Value;
namespace arith = mlir::arith;

const Eqn* producer_of(const Jaxpr& j, const Atom& a) {
  if (!is_var(a)) return nullptr;
  for (const Eqn& q : j.eqns)
    for (const Var& o : q.outs)
      if (o.id == as_var(a).id) return &q;
  return nullptr;
}

bool is_literal(const Atom& a, int64_t v) {
  const Literal* l = std::get_if<Literal>(&a);
  return l && !is_float(l->dtype) && l->i == v;
}

bool same_var(const Atom& a, const Atom& b) {
  return is_var(a) && is_var(b) && as_var(a).id == as_var(b).id;
}

// `a` = prim(x, literal v): x, else nullopt. v = nullopt accepts any integer literal.
std::optional<Atom> operand_with(const Jaxpr& j, const Atom& a, Prim p, std::optional<int64_t> v) {
  const Eqn* q = producer_of(j, a);
  if (!q || q->prim != p || q->ins.size() != 2) return std::nullopt;
  const Literal* l = std::get_if<Literal>(&q->ins[1]);
  if (!l || is_float(l->dtype) || (v && !is_literal(q->ins[1], *v))) return std::nullopt;
  return q->ins[0];
}

// The unit run x whose clamped row-major split the index operands `idx` are (see the
// header), or nullopt.
std::optional<Atom> split_unit_run(const Jaxpr& j, const std::vector<Atom>& idx,
                                   const Shape& shape) {
  const size_t rank = shape.size();
  // q[d] = flat / stride(d); idx[0] = q[0]; idx[d] = q[d] - q[d-1] * shape[d].
  std::vector<Atom> q(rank);
  q[0] = idx[0];
  for (size_t d = 1; d < rank; ++d) {
    const Eqn* s = producer_of(j, idx[d]);
    if (!s || s->prim != Prim::sub || s->ins.size() != 2) return std::nullopt;
    std::optional<Atom> prev = operand_with(j, s->ins[1], Prim::mul, shape[d]);
    if (!prev || !same_var(*prev, q[d - 1])) return std::nullopt;
    q[d] = s->ins[0];
  }
  const Atom flat = q[rank - 1];
  int64_t stride = 1;
  for (size_t d = rank - 1; d-- > 0;) {
    stride *= shape[d + 1];
    std::optional<Atom> f = operand_with(j, q[d], Prim::div, stride);
    if (!f || !same_var(*f, flat)) return std::nullopt;
  }
  // flat = min(max(x, 0), M), or (rank 1) x itself: the access clamps it anyway. M is
  // total - 1 as the transpose emits it, or larger once row trimming (passes/trim_rows.h)
  // has shrunk the ref; any M is safe because the run-time test below rejects every run
  // that a clamp changed (a clamp by a constant never raises a step above 1).
  Atom x = flat;
  if (std::optional<Atom> lo = operand_with(j, flat, Prim::min, std::nullopt)) {
    std::optional<Atom> inner = operand_with(j, *lo, Prim::max, 0);
    if (!inner) return std::nullopt;
    x = *inner;
  } else if (rank != 1) {
    return std::nullopt;
  }
  if (!is_unit_run(j, x)) return std::nullopt;
  return x;
}

}  // namespace

bool lower_with_flat_run(LowerCtx& c, const Eqn& e, size_t first, const FlatRunFn& fast,
                         const std::function<void()>& general) {
  const Type rt = c.type_of(e.ins.at(0));
  const ParamValue* pv = e.params.find("indexer");
  const Indexer* ix = pv ? std::get_if<Indexer>(pv) : nullptr;
  if (!rt.is_ref || !ix) return false;
  const Shape& shape = rt.array.shape;
  if (shape.empty() || ix->dims.size() != shape.size() || e.ins.size() != first + shape.size())
    return false;
  std::vector<Atom> idx(e.ins.begin() + static_cast<long>(first), e.ins.end());
  int64_t n = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (ix->dims[d].kind != IndexerDim::Kind::index_array || !ix->dims[d].dynamic) return false;
    const Type t = c.type_of(idx[d]);
    if (t.is_ref || t.array.rank() != 1) return false;
    if (n >= 0 && t.array.shape[0] != n) return false;
    n = t.array.shape[0];
  }
  const int64_t total = rt.array.num_elements();
  if (n < 1 || n > total) return false;
  if (!split_unit_run(c.jaxpr_of_frame(), idx, shape)) return false;
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
