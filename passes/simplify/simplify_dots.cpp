#include "passes/simplify/simplify_dots.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "passes/jaxpr_util.h"
#include "passes/pattern_rewriter.h"

namespace refjit {

namespace {

DotDims swapped(const DotDims& dn) {
  return {dn.rhs_contract, dn.lhs_contract, dn.rhs_batch, dn.lhs_batch};
}

// Whether `a` is a broadcast_in_dim of a scalar (other readers keep it; it is cheap).
bool scalar_broadcast(const Atom& a, const Rewriter& r) {
  const Eqn* b = r.def(a);
  return b && b->prim == Prim::broadcast_in_dim && r.array_type(b->ins.at(0)).rank() == 0;
}

// transpose(d) with d = dot_general(x, y) read only here, and a permutation mapping
// (batch, x free, y free) to (batch, y free, x free): the eqn becomes dot_general(y, x).
Rewritten transpose_of_dot(Eqn& e, Rewriter& r) {
  const Eqn* d = r.def(e.ins.at(0));
  if (!d || d->prim != Prim::dot_general || r.use_count(e.ins[0]) != 1) return Rewritten::no;
  if (scalar_broadcast(d->ins[0], r) || scalar_broadcast(d->ins[1], r))
    return Rewritten::no;  // that dot becomes a reduction, which is cheaper still
  const DotDims& dn = d->params.get<DotDims>("dimension_numbers");
  const int64_t nb = static_cast<int64_t>(dn.lhs_batch.size());
  const int64_t nx = static_cast<int64_t>(
      free_dims(r.array_type(d->ins[0]).rank(), dn.lhs_contract, dn.lhs_batch).size());
  const int64_t rank = r.array_type(d->outs[0]).rank();
  IntList want;
  for (int64_t k = 0; k < nb; ++k) want.push_back(k);
  for (int64_t k = nb + nx; k < rank; ++k) want.push_back(k);
  for (int64_t k = nb; k < nb + nx; ++k) want.push_back(k);
  if (e.params.get<IntList>("permutation") != want) return Rewritten::no;
  Eqn dot = *d;
  std::swap(dot.ins[0], dot.ins[1]);
  dot.params.set("dimension_numbers", swapped(dn));
  dot.outs = e.outs;
  e = std::move(dot);  // the product nobody reads now goes when the driver prunes
  return Rewritten::in_place;
}

// dot_general(broadcast_in_dim(s), y) or dot_general(y, broadcast_in_dim(s)) with s a
// scalar: reduce_sum of y over its contracted dims, times s, broadcast to the result. Not
// taken when y's kept dims are not already in the result's order (that would need a
// transpose).
Rewritten dot_of_scalar_broadcast(Eqn& e, Rewriter& r) {
  const DotDims& dn = e.params.get<DotDims>("dimension_numbers");
  const ArrayType rt = r.array_type(e.outs[0]);
  for (int side = 0; side < 2; ++side) {
    const Atom& other = e.ins[1 - side];
    if (!scalar_broadcast(e.ins[side], r)) continue;
    const Eqn* b = r.def(e.ins[side]);
    const ArrayType yt = r.array_type(other);
    const IntList& contract = side == 0 ? dn.rhs_contract : dn.lhs_contract;
    const IntList& batch = side == 0 ? dn.rhs_batch : dn.lhs_batch;
    const IntList yfree = free_dims(yt.rank(), contract, batch);
    // y's kept dims in y's order must be (batch in pairing order, then free).
    IntList kept = batch;
    kept.insert(kept.end(), yfree.begin(), yfree.end());
    if (!std::is_sorted(kept.begin(), kept.end())) continue;
    const DType d = rt.dtype;
    if (yt.dtype != d || !is_float(d)) continue;

    Shape reduced_shape;
    for (int64_t k : kept) reduced_shape.push_back(yt.shape[static_cast<size_t>(k)]);
    const ArrayType reduced_type{d, reduced_shape};
    const Atom s = b->ins[0];
    // Without contracted dims (an outer product) there is nothing to sum, and a scalar one
    // (reverse mode's seed) scales nothing.
    Atom scaled = other;
    if (!contract.empty()) {
      Var sum = r.new_var(Type(reduced_type));
      IntList axes(contract.begin(), contract.end());
      std::sort(axes.begin(), axes.end());
      r.emit(Eqn{Prim::reduce_sum, Params{{"axes", axes}}, {other}, {sum}});
      scaled = sum;
    }
    const Literal* literal = std::get_if<Literal>(&s);
    if (!literal || !literal->equals(1.0)) {
      Var product = r.new_var(Type(reduced_type));
      r.emit(Eqn{Prim::mul, Params{}, {scaled, s}, {product}});
      scaled = product;
    }
    // The result is (batch, lhs free, rhs free): y's dims land on the batch dims and on
    // its own free group; the broadcast operand's free dims are new.
    const int64_t nb = static_cast<int64_t>(batch.size());
    const int64_t nfree_other =
        rt.rank() - nb - static_cast<int64_t>(yfree.size());  // the broadcast side's free dims
    IntList dims;
    for (int64_t k = 0; k < nb; ++k) dims.push_back(k);
    const int64_t first_free = side == 0 ? nb + nfree_other : nb;
    for (int64_t k = 0; k < static_cast<int64_t>(yfree.size()); ++k) dims.push_back(first_free + k);
    IntList shape(rt.shape.begin(), rt.shape.end());
    r.emit(Eqn{Prim::broadcast_in_dim,
               Params{{"shape", shape}, {"broadcast_dimensions", dims}},
               {scaled},
               {e.outs[0]}});
    return Rewritten::replaced;
  }
  return Rewritten::no;
}

const RewritePattern kPatterns[] = {
    {"transpose-of-dot", Prim::transpose, transpose_of_dot},
    {"dot-of-scalar-broadcast", Prim::dot_general, dot_of_scalar_broadcast},
};

}  // namespace

std::span<const RewritePattern> simplify_dots_patterns() { return kPatterns; }

}  // namespace refjit
