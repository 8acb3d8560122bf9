#include "passes/simplify/accumulate_products.h"

#include <algorithm>

#include "passes/jaxpr_util.h"

namespace refjit {

namespace {

bool reads(const Eqn& e, const Atom& x) {
  return std::find(e.ins.begin(), e.ins.end(), x) != e.ins.end();
}

Rewritten addupdate_of_product(Eqn& add, Rewriter& r) {
  if (add.ins.size() != 2 || !is_var(add.ins[1])) return Rewritten::no;  // no dynamic indices
  const Indexer* idx = std::get_if<Indexer>(add.params.find("indexer"));
  if (idx && !idx->is_whole()) return Rewritten::no;
  const Atom& p = add.ins[1];
  const Eqn* dot = r.def(p);
  if (!dot || dot->prim != Prim::dot_general || dot->ins.size() != 2 || r.use_count(p) != 1)
    return Rewritten::no;
  const ArrayType& pt = r.array_type(p);
  if (!is_float(pt.dtype) || r.type_of(add.ins[0]).array != pt) return Rewritten::no;
  const Atom x = dot->ins[0], y = dot->ins[1];
  if (!is_var(x) || !is_var(y) || r.type_of(x).is_ref || r.type_of(y).is_ref) return Rewritten::no;
  for (const Eqn& between : r.kept_after(*dot))
    if (!is_pure(r.jaxpr(), between) || reads(between, x) || reads(between, y))
      return Rewritten::no;
  r.emit(Eqn{Prim::dot_accumulate, dot->params, {add.ins[0], x, y}, {}});
  return Rewritten::replaced;  // the product, unread now, is pruned
}

const RewritePattern kPatterns[] = {
    {"addupdate-of-product", Prim::addupdate, addupdate_of_product},
};

}  // namespace

std::span<const RewritePattern> accumulate_products_patterns() { return kPatterns; }

}  // namespace refjit
