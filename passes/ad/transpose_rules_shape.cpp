// Transpose rules of the linear shape, slicing, indexing, reduction and contraction
// primitives. The transposes of slice, dynamic_slice and gather are sparse: they add into
// just the touched entries of the accumulator (Accum::add_at), never through a dense one-hot.
#include <algorithm>
#include <numeric>

#include "passes/ad/transpose_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

Atom slice(Emitter& e, Atom x, IntList start, IntList limit, IntList strides) {
  return e.emit1(Prim::slice, {x},
                 Params{{"start_indices", std::move(start)},
                        {"limit_indices", std::move(limit)},
                        {"strides", std::move(strides)}});
}

// Cotangent of one dot_general operand ("mine") given the other ("other", a residual), at
// the product's own precision (as JAX's transpose keeps it).
// The result of dot_general(ct, other) has dims [batch, my free, my contracting dims ordered
// by the other's contracting dims]; a transpose puts them back in my order.
Atom dot_transpose(Emitter& e, Atom ct, Atom other, const ArrayType& mine, bool mine_is_lhs,
                   const DotDims& dn, const ParamValue& precision) {
  const ArrayType ot = e.array_type_of(other);
  const IntList& my_c = mine_is_lhs ? dn.lhs_contract : dn.rhs_contract;
  const IntList& my_b = mine_is_lhs ? dn.lhs_batch : dn.rhs_batch;
  const IntList& o_c = mine_is_lhs ? dn.rhs_contract : dn.lhs_contract;
  const IntList& o_b = mine_is_lhs ? dn.rhs_batch : dn.lhs_batch;
  const IntList my_free = free_dims(mine.rank(), my_c, my_b);
  const IntList o_free = free_dims(ot.rank(), o_c, o_b);
  const int64_t nb = static_cast<int64_t>(my_b.size());
  // Positions of the other operand's free dims in the output.
  const int64_t o_free_start = mine_is_lhs ? nb + static_cast<int64_t>(my_free.size()) : nb;
  DotDims d;
  for (size_t k = 0; k < o_free.size(); ++k) d.lhs_contract.push_back(o_free_start + k);
  d.rhs_contract = o_free;
  for (int64_t k = 0; k < nb; ++k) d.lhs_batch.push_back(k);
  d.rhs_batch = o_b;
  Atom r = e.emit1(Prim::dot_general, {ct, other},
                   Params{{"dimension_numbers", d},
                          {"precision", precision},
                          {"preferred_element_type", NoneParam{}}});
  // r's dims, named by my dims: batch, then my free dims (in the output they sit before the
  // other's free dims when I am lhs, after when I am rhs; in either case in increasing
  // order), then my contracting dims in increasing order of the other's matching dim.
  IntList mine_of_r(my_b.begin(), my_b.end());
  mine_of_r.insert(mine_of_r.end(), my_free.begin(), my_free.end());
  std::vector<size_t> order(o_c.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return o_c[x] < o_c[y]; });
  for (size_t j : order) mine_of_r.push_back(my_c[j]);
  IntList perm(mine.rank());
  for (size_t k = 0; k < mine_of_r.size(); ++k) perm[mine_of_r[k]] = static_cast<int64_t>(k);
  bool identity = true;
  for (size_t k = 0; k < perm.size(); ++k) identity &= perm[k] == static_cast<int64_t>(k);
  if (identity) return r;
  return e.emit1(Prim::transpose, {r}, Params{{"permutation", perm}});
}

}  // namespace

void register_shape_transpose_rules(TransposeRuleTable& t) {
  t.set(Prim::broadcast_in_dim, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0)) return;
    const ArrayType& x = a.acc[0]->type();
    const IntList& bd = a.eqn.params.get<IntList>("broadcast_dimensions");
    const Shape out = e.array_type_of(a.ct0()).shape;
    IntList axes;
    for (int64_t d = 0; d < static_cast<int64_t>(out.size()); ++d) {
      auto it = std::find(bd.begin(), bd.end(), d);
      if (it == bd.end() || (x.shape[it - bd.begin()] == 1 && out[d] != 1)) axes.push_back(d);
    }
    a.acc[0]->add(e, e.reshape(e.reduce_sum(a.ct0(), axes), x.shape));
  });
  // reshape, squeeze, expand_dims, scatter and scatter-add alias their operand's accumulator
  // to their result's: see transpose_rules_scatter.cpp.
  t.set(Prim::transpose, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0)) return;
    const IntList& perm = a.eqn.params.get<IntList>("permutation");
    IntList inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
    a.acc[0]->add(e, e.emit1(Prim::transpose, {a.ct0()}, Params{{"permutation", inv}}));
  });
  t.set(Prim::reduce_sum, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0)) return;
    const ArrayType& x = a.acc[0]->type();
    const IntList& axes = a.eqn.params.get<IntList>("axes");
    IntList kept;
    for (int64_t d = 0; d < x.rank(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) kept.push_back(d);
    a.acc[0]->add(e, e.broadcast_in_dim(a.ct0(), x.shape, kept));
  });
  // Sparse: acc[start:limit:stride] += ct.
  t.set(Prim::slice, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0)) return;
    const IntList& start = a.eqn.params.get<IntList>("start_indices");
    const IntList strides = a.eqn.params.get_or<IntList>("strides", IntList{});
    const Shape out = e.array_type_of(a.ct0()).shape;
    Indexer ix;
    for (size_t d = 0; d < start.size(); ++d)
      ix.dims.push_back(IndexerDim{IndexerDim::Kind::slice, start[d], out[d],
                                   strides.empty() ? 1 : strides[d], false});
    a.acc[0]->add_at(e, a.ct0(), ix, {});
  });
  // Sparse: acc[i:i+size, ...] += ct (starts clamp exactly as dynamic_slice's do).
  t.set(Prim::dynamic_slice, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0)) return;
    const IntList& sizes = a.eqn.params.get<IntList>("slice_sizes");
    Indexer ix;
    for (int64_t s : sizes) ix.dims.push_back(IndexerDim{IndexerDim::Kind::slice, 0, s, 1, true});
    a.acc[0]->add_at(e, a.ct0(), ix, a.dyn(1));
  });
  // Sparse: acc[..., idx, ...] += ct (duplicate indices accumulate).
  t.set(Prim::gather, [](Emitter& e, TransposeArgs& a) {
    if (!a.wants(0)) return;
    if (a.linear(1)) throw Error("transpose: `gather` is not linear in its indices");
    int64_t axis = a.eqn.params.get<int64_t>("axis");
    a.acc[0]->add_at(e, a.ct0(), axis_indexer(a.acc[0]->type(), axis), {a.val[1]});
  });
  // dynamic_update_slice: its transpose aliases the operand's accumulator to the result's,
  // so a loop's carry cotangent stays in one ref: see transpose_rules_scatter.cpp.
  t.set(Prim::concatenate, [](Emitter& e, TransposeArgs& a) {
    const int64_t dim = a.eqn.params.get<int64_t>("dimension");
    const Shape out = e.array_type_of(a.ct0()).shape;
    int64_t off = 0;
    for (size_t i = 0; i < a.acc.size(); ++i) {
      const ArrayType ti = a.acc[i] ? a.acc[i]->type() : e.array_type_of(a.val[i]);
      if (a.wants(i)) {
        IntList start(out.size(), 0), limit(out.begin(), out.end());
        start[dim] = off;
        limit[dim] = off + ti.shape[dim];
        a.acc[i]->add(e, slice(e, a.ct0(), start, limit, IntList(out.size(), 1)));
      }
      off += ti.shape[dim];
    }
  });
  // pad: un-pad (a pad by the negated edges), then take every (interior+1)-th element.
  t.set(Prim::pad, [](Emitter& e, TransposeArgs& a) {
    const IntListList& cfg = a.eqn.params.get<IntListList>("padding_config");
    const ArrayType xt = a.acc[0] ? a.acc[0]->type() : e.array_type_of(a.val[0]);
    Atom ct = a.ct0();
    IntListList neg;
    for (const auto& c : cfg) neg.push_back({-c[0], -c[1], 0});
    Atom unpadded =
        e.emit1(Prim::pad, {ct, e.scalar(xt.dtype, 0.0)}, Params{{"padding_config", neg}});
    IntList start(xt.rank(), 0), limit, strides;
    const Shape us = e.array_type_of(unpadded).shape;
    for (int64_t d = 0; d < xt.rank(); ++d) {
      limit.push_back(us[d]);
      strides.push_back(cfg[d][2] + 1);
    }
    Atom cx = slice(e, unpadded, start, limit, strides);
    if (a.wants(0)) a.acc[0]->add(e, cx);
    if (a.wants(1)) {
      IntList all(e.array_type_of(ct).rank());
      std::iota(all.begin(), all.end(), 0);
      IntList allx(xt.rank());
      std::iota(allx.begin(), allx.end(), 0);
      a.acc[1]->add(e, e.sub(e.reduce_sum(ct, all), e.reduce_sum(cx, allx)));
    }
  });
  // dot_general is bilinear; only wanted sides are computed (one dot with DontWant).
  t.set(Prim::dot_general, [](Emitter& e, TransposeArgs& a) {
    const DotDims& dn = a.eqn.params.get<DotDims>("dimension_numbers");
    const ParamValue* given = a.eqn.params.find("precision");
    const ParamValue precision = given ? *given : ParamValue(NoneParam{});
    if (a.linear(0) && a.linear(1))
      throw Error("transpose: `dot_general` of two linear values is not linear");
    if (a.wants(0))
      a.acc[0]->add(e, dot_transpose(e, a.ct0(), a.val[1], a.acc[0]->type(), true, dn, precision));
    if (a.wants(1))
      a.acc[1]->add(e, dot_transpose(e, a.ct0(), a.val[0], a.acc[1]->type(), false, dn, precision));
  });
}

}  // namespace refjit
