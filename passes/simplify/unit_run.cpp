#include "passes/simplify/unit_run.h"

namespace refjit {

namespace {

const Eqn* producer_of(const Jaxpr& j, Var v) {
  for (const Eqn& q : j.eqns)
    for (const Var& o : q.outs)
      if (o.id == v.id) return &q;
  return nullptr;
}

bool is_index_type(const Type& t) {
  return !t.is_ref && (t.array.dtype == DType::i32 || t.array.dtype == DType::i64);
}

// Adds the terms of `a` (a rank-0 scalar, or a rank-1 vector of `length`), negated if
// `negated`, to `run`; counts the iotas added (+1) and subtracted (-1) in `iotas`.
bool collect(const Jaxpr& j, const Atom& a, int64_t length, bool negated, int depth, UnitRun& run,
             int& iotas) {
  const Type t = j.type_of(a);
  if (depth > 16 || !is_index_type(t)) return false;
  if (t.array.rank() == 0) {
    run.terms.push_back(UnitRun::Term{a, negated});
    return true;
  }
  if (t.array.shape != Shape{length} || !is_var(a)) return false;
  const Eqn* q = producer_of(j, as_var(a));
  if (!q) return false;
  switch (q->prim) {
    case Prim::iota:
      if (q->params.get<int64_t>("dimension") != 0) return false;
      iotas += negated ? -1 : 1;
      return true;
    case Prim::broadcast_in_dim:
      if (q->ins.size() != 1 || j.type_of(q->ins[0]).array.rank() != 0) return false;
      return collect(j, q->ins[0], length, negated, depth + 1, run, iotas);
    case Prim::add:
    case Prim::add_any:
    case Prim::sub:
      if (q->ins.size() != 2) return false;
      return collect(j, q->ins[0], length, negated, depth + 1, run, iotas) &&
             collect(j, q->ins[1], length, negated != (q->prim == Prim::sub), depth + 1, run,
                     iotas);
    default: return false;
  }
}

void scalar_terms(const Jaxpr& j, const Atom& a, bool negated, int depth,
                  std::vector<UnitRun::Term>& out) {
  const Eqn* q = is_var(a) && depth < 16 ? producer_of(j, as_var(a)) : nullptr;
  const bool chain = q && q->ins.size() == 2 &&
                     (q->prim == Prim::add || q->prim == Prim::add_any || q->prim == Prim::sub);
  if (!chain) {
    out.push_back(UnitRun::Term{a, negated});
    return;
  }
  scalar_terms(j, q->ins[0], negated, depth + 1, out);
  scalar_terms(j, q->ins[1], negated != (q->prim == Prim::sub), depth + 1, out);
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
  const Eqn* q = is_var(a) ? producer_of(j, as_var(a)) : nullptr;
  if (!q || q->prim != p || q->ins.size() != 2) return std::nullopt;
  const Literal* l = std::get_if<Literal>(&q->ins[1]);
  if (!l || is_float(l->dtype) || (v && !is_literal(q->ins[1], *v))) return std::nullopt;
  return q->ins[0];
}

}  // namespace

std::optional<SplitRun> split_unit_run(const Jaxpr& j, std::span<const Atom> idx,
                                       const Shape& shape) {
  const size_t rank = shape.size();
  if (rank == 0 || idx.size() != rank) return std::nullopt;
  // q[d] = flat / stride(d); idx[0] = q[0]; idx[d] = q[d] - q[d-1] * shape[d].
  std::vector<Atom> q(rank);
  q[0] = idx[0];
  for (size_t d = 1; d < rank; ++d) {
    const Eqn* s = is_var(idx[d]) ? producer_of(j, as_var(idx[d])) : nullptr;
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
  // flat = min(max(x, 0), M), or (rank 1) x itself, which the access clamps into [0, n - 1]
  // anyway. M is total - 1 as the transpose emits it, or larger once row trimming
  // (passes/simplify/trim_rows.h) has shrunk the ref.
  SplitRun split{flat, shape[0] - 1};
  if (std::optional<Atom> lo = operand_with(j, flat, Prim::min, std::nullopt)) {
    std::optional<Atom> inner = operand_with(j, *lo, Prim::max, 0);
    if (!inner) return std::nullopt;
    split.run = *inner;
    split.bound = std::get<Literal>(producer_of(j, as_var(flat))->ins[1]).i;
  } else if (rank != 1) {
    return std::nullopt;
  }
  if (split.bound < 0 || !is_unit_run(j, split.run)) return std::nullopt;
  return split;
}

std::optional<SplitRun> flat_run_of_access(const Jaxpr& j, const Eqn& e) {
  if (e.prim != Prim::get && e.prim != Prim::swap) return std::nullopt;
  const size_t first = e.prim == Prim::get ? 1 : 2;
  if (e.ins.size() < first || e.outs.size() != 1) return std::nullopt;
  const Type rt = j.type_of(e.ins[0]);
  const ParamValue* pv = e.params.find("indexer");
  const Indexer* ix = pv ? std::get_if<Indexer>(pv) : nullptr;
  if (!rt.is_ref || !ix) return std::nullopt;
  const Shape& shape = rt.array.shape;
  if (shape.empty() || ix->dims.size() != shape.size() || e.ins.size() != first + shape.size())
    return std::nullopt;
  int64_t n = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (ix->dims[d].kind != IndexerDim::Kind::index_array || !ix->dims[d].dynamic)
      return std::nullopt;
    const Type t = j.type_of(e.ins[first + d]);
    if (t.is_ref || t.array.rank() != 1) return std::nullopt;
    if (n >= 0 && t.array.shape[0] != n) return std::nullopt;
    n = t.array.shape[0];
  }
  if (n < 1) return std::nullopt;
  return split_unit_run(j, std::span(e.ins).subspan(first), shape);
}

std::vector<UnitRun::Term> scalar_sum_terms(const Jaxpr& j, const Atom& a) {
  std::vector<UnitRun::Term> terms;
  scalar_terms(j, a, false, 0, terms);
  return terms;
}

std::optional<UnitRun> as_unit_run(const Jaxpr& j, const Atom& a) {
  const Type t = j.type_of(a);
  if (!is_var(a) || !is_index_type(t) || t.array.rank() != 1) return std::nullopt;
  UnitRun run;
  run.length = t.array.shape[0];
  int iotas = 0;
  // The iotas' coefficients must sum to 1: then a[i] is the scalars' sum plus i.
  if (!collect(j, a, run.length, false, 0, run, iotas) || iotas != 1) return std::nullopt;
  return run;
}

Atom sum_of_terms(std::span<const UnitRun::Term> terms, DType dt,
                  const std::function<Atom(Prim, std::vector<Atom>)>& make) {
  std::optional<Atom> sum;
  for (const UnitRun::Term& t : terms) {
    if (!sum)
      sum = t.negated ? make(Prim::neg, {t.scalar}) : t.scalar;
    else
      sum = make(t.negated ? Prim::sub : Prim::add, {*sum, t.scalar});
  }
  return sum ? *sum : Atom(Literal::of_int(dt, 0));
}

}  // namespace refjit
