#include "passes/simplify_dots.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "passes/jaxpr_util.h"

namespace refjit {

namespace {

// Dims of an operand of `dn` that are neither contracted nor batch, in order.
IntList free_dims(int64_t rank, const IntList& contract, const IntList& batch) {
  IntList free;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(contract.begin(), contract.end(), d) == contract.end() &&
        std::find(batch.begin(), batch.end(), d) == batch.end())
      free.push_back(d);
  return free;
}

DotDims swapped(const DotDims& dn) {
  return {dn.rhs_contract, dn.lhs_contract, dn.rhs_batch, dn.lhs_batch};
}

class DotSimplifier {
 public:
  explicit DotSimplifier(Jaxpr& j) : j_(j) {
    uses_.assign(j.vars.size(), 0);
    def_.assign(j.vars.size(), -1);
    for (size_t i = 0; i < j.eqns.size(); ++i) {
      for (const Atom& a : j.eqns[i].ins)
        if (is_var(a)) ++uses_[as_var(a).id];
      for (Var o : j.eqns[i].outs) def_[o.id] = static_cast<int32_t>(i);
    }
    for (const Atom& a : j.outvars)
      if (is_var(a)) uses_[as_var(a).id] += 2;  // returned: never rewritten away
  }

  int run() {
    std::vector<Eqn> out;
    out.reserve(j_.eqns.size());
    for (size_t i = 0; i < j_.eqns.size(); ++i) {
      Eqn e = j_.eqns[i];
      recurse(e);
      if (e.prim == Prim::transpose && rewrite_transpose_of_dot(e)) {
        out.push_back(std::move(e));
        continue;
      }
      if (e.prim == Prim::dot_general) {
        if (std::vector<Eqn> r = dot_of_broadcast(e); !r.empty()) {
          for (Eqn& k : r) out.push_back(std::move(k));
          continue;
        }
      }
      out.push_back(std::move(e));
    }
    j_.eqns = drop_unread(std::move(out));
    return changes_;
  }

  // The products and broadcasts a rewrite left unread (dce does the same at the top level,
  // but not inside scan bodies, where they would run every step).
  std::vector<Eqn> drop_unread(std::vector<Eqn> eqns) const {
    if (changes_ == 0) return eqns;
    std::vector<int> reads(j_.vars.size(), 0);
    for (const Atom& a : j_.outvars)
      if (is_var(a)) ++reads[as_var(a).id];
    std::vector<bool> keep(eqns.size(), true);
    for (size_t i = eqns.size(); i-- > 0;) {
      const Eqn& e = eqns[i];
      const bool droppable = e.prim == Prim::dot_general || e.prim == Prim::broadcast_in_dim;
      if (droppable && e.outs.size() == 1 && reads[e.outs[0].id] == 0) {
        keep[i] = false;
        continue;
      }
      for (const Atom& a : e.ins)
        if (is_var(a)) ++reads[as_var(a).id];
    }
    std::vector<Eqn> kept;
    for (size_t i = 0; i < eqns.size(); ++i)
      if (keep[i]) kept.push_back(std::move(eqns[i]));
    return kept;
  }

 private:
  void recurse(Eqn& e) {
    changes_ += rewrite_body(e, [](Jaxpr& body) { return DotSimplifier(body).run(); });
  }

  const Eqn* def(const Atom& a) const {
    if (!is_var(a) || def_[as_var(a).id] < 0) return nullptr;
    return &j_.eqns[static_cast<size_t>(def_[as_var(a).id])];
  }
  bool single_use(const Atom& a) const { return is_var(a) && uses_[as_var(a).id] == 1; }

  // Whether `a` is a broadcast_in_dim of a scalar (other readers keep it; it is cheap).
  bool scalar_broadcast(const Atom& a) const {
    const Eqn* b = def(a);
    return b && b->prim == Prim::broadcast_in_dim && j_.type_of(b->ins.at(0)).array.rank() == 0;
  }

  // transpose(d) with d = dot_general(x, y) read only here, and a permutation mapping
  // (batch, x free, y free) to (batch, y free, x free): the eqn becomes dot_general(y, x).
  bool rewrite_transpose_of_dot(Eqn& e) {
    const Eqn* d = def(e.ins.at(0));
    if (!d || d->prim != Prim::dot_general || !single_use(e.ins[0])) return false;
    if (scalar_broadcast(d->ins[0]) || scalar_broadcast(d->ins[1]))
      return false;  // that dot becomes a reduction, which is cheaper still
    const DotDims& dn = d->params.get<DotDims>("dimension_numbers");
    const int64_t nb = static_cast<int64_t>(dn.lhs_batch.size());
    const int64_t nx = static_cast<int64_t>(
        free_dims(j_.type_of(d->ins[0]).array.rank(), dn.lhs_contract, dn.lhs_batch).size());
    const int64_t rank = j_.type_of(d->outs[0]).array.rank();
    IntList want;
    for (int64_t k = 0; k < nb; ++k) want.push_back(k);
    for (int64_t k = nb + nx; k < rank; ++k) want.push_back(k);
    for (int64_t k = nb; k < nb + nx; ++k) want.push_back(k);
    if (e.params.get<IntList>("permutation") != want) return false;
    Eqn dot = *d;
    std::swap(dot.ins[0], dot.ins[1]);
    dot.params.set("dimension_numbers", swapped(dn));
    dot.outs = e.outs;
    e = std::move(dot);
    ++changes_;
    return true;
  }

  // dot_general(broadcast_in_dim(s), y) or dot_general(y, broadcast_in_dim(s)) with s a
  // scalar: reduce_sum of y over its contracted dims, times
  // s, broadcast to the result. Empty when the pattern does not apply (or y's kept dims are
  // not already in the result's order, which would need a transpose).
  std::vector<Eqn> dot_of_broadcast(const Eqn& e) {
    const DotDims& dn = e.params.get<DotDims>("dimension_numbers");
    const ArrayType rt = j_.type_of(e.outs[0]).array;
    for (int side = 0; side < 2; ++side) {
      const Atom& other = e.ins[1 - side];
      if (!scalar_broadcast(e.ins[side])) continue;
      const Eqn* b = def(e.ins[side]);
      const ArrayType yt = j_.type_of(other).array;
      const IntList& contract = side == 0 ? dn.rhs_contract : dn.lhs_contract;
      const IntList& batch = side == 0 ? dn.rhs_batch : dn.lhs_batch;
      const IntList yfree = free_dims(yt.rank(), contract, batch);
      // y's kept dims in y's order must be (batch in pairing order, then free).
      IntList kept = batch;
      kept.insert(kept.end(), yfree.begin(), yfree.end());
      if (!std::is_sorted(kept.begin(), kept.end())) continue;
      const DType d = rt.dtype;
      if (yt.dtype != d || !is_float(d)) continue;

      std::vector<Eqn> eqns;
      Shape reduced_shape;
      for (int64_t k : kept) reduced_shape.push_back(yt.shape[static_cast<size_t>(k)]);
      const ArrayType reduced_type{d, reduced_shape};
      // Without contracted dims (an outer product) there is nothing to sum, and a scalar one
      // (reverse mode's seed) scales nothing.
      Atom scaled = other;
      if (!contract.empty()) {
        Var sum = j_.new_var(Type(reduced_type));
        IntList axes(contract.begin(), contract.end());
        std::sort(axes.begin(), axes.end());
        eqns.push_back(Eqn{Prim::reduce_sum, Params{{"axes", axes}}, {other}, {sum}});
        scaled = sum;
      }
      const Literal* s = std::get_if<Literal>(&b->ins[0]);
      if (!s || !s->equals(1.0)) {
        Var product = j_.new_var(Type(reduced_type));
        eqns.push_back(Eqn{Prim::mul, Params{}, {scaled, b->ins[0]}, {product}});
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
      for (int64_t k = 0; k < static_cast<int64_t>(yfree.size()); ++k)
        dims.push_back(first_free + k);
      IntList shape(rt.shape.begin(), rt.shape.end());
      eqns.push_back(Eqn{Prim::broadcast_in_dim,
                         Params{{"shape", shape}, {"broadcast_dimensions", dims}},
                         {scaled},
                         {e.outs[0]}});
      ++changes_;
      return eqns;
    }
    return {};
  }

  Jaxpr& j_;
  std::vector<int> uses_;
  std::vector<int32_t> def_;
  int changes_ = 0;
};

}  // namespace

Jaxpr simplify_dots(const Jaxpr& jaxpr, int* changes) {
  return rewritten_copy(
      jaxpr, [](Jaxpr& j) { return DotSimplifier(j).run(); }, changes);
}

}  // namespace refjit
