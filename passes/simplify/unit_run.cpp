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

}  // namespace

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
