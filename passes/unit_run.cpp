#include "passes/unit_run.h"

namespace refjit {

namespace {

const Eqn* producer_of(const Jaxpr& j, Var v) {
  for (const Eqn& q : j.eqns)
    for (const Var& o : q.outs)
      if (o.id == v.id) return &q;
  return nullptr;
}

bool is_scalar_array(const Jaxpr& j, const Atom& a) {
  const Type t = j.type_of(a);
  return !t.is_ref && t.array.rank() == 0;
}

bool is_index_vector(const Jaxpr& j, const Atom& a) {
  const Type t = j.type_of(a);
  return !t.is_ref && t.array.rank() == 1 &&
         (t.array.dtype == DType::i32 || t.array.dtype == DType::i64);
}

bool unit_run(const Jaxpr& j, const Atom& a, int depth) {
  if (!is_var(a) || depth > 16 || !is_index_vector(j, a)) return false;
  const Eqn* q = producer_of(j, as_var(a));
  if (!q) return false;
  if (q->prim == Prim::iota) return q->params.get<int64_t>("dimension") == 0;
  const bool add = q->prim == Prim::add || q->prim == Prim::add_any;
  if ((!add && q->prim != Prim::sub) || q->ins.size() != 2) return false;
  if (is_scalar_array(j, q->ins[1]) && unit_run(j, q->ins[0], depth + 1)) return true;
  return add && is_scalar_array(j, q->ins[0]) && unit_run(j, q->ins[1], depth + 1);
}

}  // namespace

bool is_unit_run(const Jaxpr& j, const Atom& a) { return unit_run(j, a, 0); }

}  // namespace refjit
