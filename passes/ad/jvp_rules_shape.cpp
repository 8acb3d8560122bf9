// JVP rules of the shape, slicing, indexing, reduction and contraction primitives. Most are
// linear in their data operands: the tangent is the same primitive applied to the tangents
// (index operands stay primal).
#include <algorithm>

#include "passes/ad/jvp_rules.h"

namespace refjit {

namespace {

using Tangents = std::vector<MaybeAtom>;

// The primitive is linear in the operands listed in `linear`; the others are passed as
// primals. Zero tangents among the linear operands are instantiated if any is nonzero.
void linear_in(JvpRuleTable& t, Prim p, std::vector<int> linear) {
  t.set(p, {[linear](JvpCtx& c, JvpArgs& a) -> Tangents {
          bool any = false;
          for (int i : linear)
            if (i < static_cast<int>(a.tangents.size())) any |= a.tangents[i].has_value();
          if (!any) return Tangents(a.eqn.outs.size());
          std::vector<Atom> ins = a.primals;
          for (int i : linear)
            if (i < static_cast<int>(ins.size()))
              ins[i] = instantiate(c.t, a.tangents[i], c.p.array_type_of(a.primals[i]));
          std::vector<Var> outs = c.t.emit(a.eqn.prim, ins, a.eqn.params);
          return Tangents(outs.begin(), outs.end());
        }});
}

// The combining scatters, whose tangents are the primal's coefficients times the operand's and
// the updates' tangents: elementwise products, gathers and scatter-adds, all transposable.
struct ScatterJvp {
  JvpCtx& c;
  JvpArgs& a;
  Params axis;
  ArrayType xt;

  ScatterJvp(JvpCtx& ctx, JvpArgs& args)
      : c(ctx),
        a(args),
        axis{{"axis", args.eqn.params.get<int64_t>("axis")}},
        xt(ctx.p.array_type_of(args.primals[0])) {}

  Atom x() const { return a.primals[0]; }
  Atom idx() const { return a.primals[1]; }
  Atom u() const { return a.primals[2]; }
  Atom flt(Emitter& e, Atom b) const { return e.convert(b, xt.dtype); }
  Atom eq(Emitter& e, Atom p, Atom q) const { return e.emit1(Prim::eq, {p, q}); }
  Atom gather(Emitter& e, Atom from) const { return e.emit1(Prim::gather, {from, idx()}, axis); }
  // base with each update added at its index (duplicates add up).
  Atom scatter_add(Emitter& e, Atom base, Atom upd) const {
    return e.emit1(Prim::scatter_add, {base, idx(), upd}, axis);
  }
  // t_x * operand_coef + scatter_add(0, idx, t_u * updates_coef).
  MaybeAtom tangent(Atom operand_coef, Atom updates_coef) {
    MaybeAtom r;
    if (a.tangents[0]) r = c.t.mul(*a.tangents[0], operand_coef);
    if (a.tangents[2]) {
      Atom s = scatter_add(c.t, c.t.zeros(xt), c.t.mul(*a.tangents[2], updates_coef));
      r = r ? c.t.add(*r, s) : s;
    }
    return r;
  }
};

// scatter-min / scatter-max, as JAX: the result's tangent is the mean of the tangents of every
// input (the operand's element, the updates landing there) equal to the result.
Tangents scatter_extremal_jvp(JvpCtx& c, JvpArgs& a) {
  if (!is_inexact(c.p.array_type_of(a.primals[0]).dtype) || (!a.tangents[0] && !a.tangents[2]))
    return {std::nullopt};
  ScatterJvp s(c, a);
  Emitter& p = c.p;
  const Atom out = a.primal_outs[0];
  const Atom update_won = s.flt(p, s.eq(p, s.u(), s.gather(p, out)));
  const Atom operand_kept = s.flt(p, s.eq(p, s.x(), out));
  const Atom winners = p.add(s.scatter_add(p, p.zeros(s.xt), update_won), operand_kept);
  // 1 / winners, with 1 where none (a NaN result equals nothing; its coefficients are 0).
  const Atom share = p.div(p.full(s.xt, 1.0), p.emit1(Prim::max, {winners, p.full(s.xt, 1.0)}));
  return {s.tangent(p.mul(operand_kept, share), p.mul(update_won, s.gather(p, share)))};
}

// scatter-mul: out = x * (the product of the updates at each index). d/dx is that product;
// d/du_j is x times the product of the other updates at u_j's index, computed without
// dividing by a zero: (nonzero updates' product) / u_j when no update there is zero, the
// nonzero product when u_j is the only zero, else 0. Duplicate indices are exact, unlike
// JAX's rule (unique indices only).
Tangents scatter_mul_jvp(JvpCtx& c, JvpArgs& a) {
  if (!is_inexact(c.p.array_type_of(a.primals[0]).dtype) || (!a.tangents[0] && !a.tangents[2]))
    return {std::nullopt};
  ScatterJvp s(c, a);
  Emitter& p = c.p;
  const ArrayType ut = p.array_type_of(s.u());
  const Atom ones = p.full(s.xt, 1.0);
  const Atom product = p.emit1(Prim::scatter_mul, {ones, s.idx(), s.u()}, s.axis);
  const Atom is_zero = s.eq(p, s.u(), p.zeros(ut));
  const Atom nonzero_u = p.select(is_zero, {s.u(), p.full(ut, 1.0)});
  const Atom nonzero_product =
      s.gather(p, p.emit1(Prim::scatter_mul, {ones, s.idx(), nonzero_u}, s.axis));
  const Atom zeros_here = s.gather(p, s.scatter_add(p, p.zeros(s.xt), s.flt(p, is_zero)));
  const Atom others_if_nonzero =
      p.select(s.eq(p, zeros_here, p.zeros(ut)), {p.zeros(ut), p.div(nonzero_product, nonzero_u)});
  const Atom others_if_zero =
      p.select(s.eq(p, zeros_here, p.full(ut, 1.0)), {p.zeros(ut), nonzero_product});
  const Atom others = p.select(is_zero, {others_if_nonzero, others_if_zero});
  return {s.tangent(product, p.mul(s.gather(p, s.x()), others))};
}

}  // namespace

void register_shape_jvp_rules(JvpRuleTable& t) {
  t.set(Prim::scatter_min, {scatter_extremal_jvp});
  t.set(Prim::scatter_max, {scatter_extremal_jvp});
  t.set(Prim::scatter_mul, {scatter_mul_jvp});
  for (Prim p : {Prim::broadcast_in_dim, Prim::reshape, Prim::squeeze, Prim::expand_dims,
                 Prim::transpose, Prim::slice, Prim::reduce_sum, Prim::dynamic_slice, Prim::gather})
    linear_in(t, p, {0});
  linear_in(t, Prim::pad, {0, 1});
  linear_in(t, Prim::dynamic_update_slice, {0, 1});
  linear_in(t, Prim::scatter, {0, 2});
  linear_in(t, Prim::scatter_add, {0, 2});
  // sort: the tangents follow the primals' permutation. The primal sort gets one more operand,
  // an iota along the dimension, whose sorted copy is the permutation; each tangent is then
  // gathered through the flat positions it gives (the gather's transpose is a scatter-add).
  t.set(Prim::sort,
        {[](JvpCtx& c, JvpArgs& a) -> Tangents {
           const size_t n = a.primals.size();
           bool any = false;
           for (const auto& tg : a.tangents) any |= tg.has_value();
           if (!any) {
             std::vector<Var> outs = c.p.emit(Prim::sort, a.primals, a.eqn.params);
             a.primal_outs.assign(outs.begin(), outs.end());
             return Tangents(n);
           }
           const ArrayType xt = c.p.array_type_of(a.primals[0]);
           const int64_t dim = a.eqn.params.get<int64_t>("dimension");
           auto iota = [&](int64_t d) { return c.p.iota(xt.shape, d); };
           std::vector<Atom> ins = a.primals;
           ins.push_back(iota(dim));
           std::vector<Var> outs = c.p.emit(Prim::sort, ins, a.eqn.params);
           a.primal_outs.assign(outs.begin(), outs.begin() + static_cast<long>(n));
           // Flat source position of each sorted element: perm * stride(dim) + the other dims'.
           std::vector<int64_t> strides(static_cast<size_t>(xt.rank()), 1);
           for (int64_t d = xt.rank() - 1; d > 0; --d) strides[d - 1] = strides[d] * xt.shape[d];
           auto scaled = [&](Atom x, int64_t d) {
             return strides[d] == 1
                        ? x
                        : c.p.mul(x, c.p.scalar(DType::i32, static_cast<double>(strides[d])));
           };
           Atom flat = scaled(outs[n], dim);
           for (int64_t d = 0; d < xt.rank(); ++d)
             if (d != dim) flat = c.p.add(flat, scaled(iota(d), d));
           Tangents ts(n);
           for (size_t i = 0; i < n; ++i) {
             if (!a.tangents[i]) continue;
             Atom tf = c.t.emit1(
                 Prim::reshape, {*a.tangents[i]},
                 Params{{"dimensions", NoneParam{}}, {"new_sizes", IntList{xt.num_elements()}}});
             ts[i] = c.t.emit1(Prim::gather, {tf, flat}, Params{{"axis", int64_t{0}}});
           }
           return ts;
         },
         true});
  // concatenate: every operand is linear.
  t.set(Prim::concatenate, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          bool any = false;
          for (const auto& tg : a.tangents) any |= tg.has_value();
          if (!any) return {std::nullopt};
          std::vector<Atom> ins;
          for (size_t i = 0; i < a.primals.size(); ++i)
            ins.push_back(instantiate(c.t, a.tangents[i], c.p.array_type_of(a.primals[i])));
          return {c.t.emit1(Prim::concatenate, ins, a.eqn.params)};
        }});
  // reduce_max/min: the tangent averaged over the positions equal to the extremum.
  for (Prim p : {Prim::reduce_max, Prim::reduce_min}) {
    t.set(p, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
            if (!a.tangents[0]) return {std::nullopt};
            Atom x = a.primals[0], y = a.primal_outs[0];
            const ArrayType xt = c.p.array_type_of(x);
            const IntList& axes = a.eqn.params.get<IntList>("axes");
            IntList kept;
            for (int64_t i = 0; i < xt.rank(); ++i)
              if (std::find(axes.begin(), axes.end(), i) == axes.end()) kept.push_back(i);
            Atom yb = c.p.broadcast_in_dim(y, xt.shape, kept);
            Atom mask = c.p.convert(c.p.emit1(Prim::eq, {x, yb}), xt.dtype);
            Atom count = c.p.reduce_sum(mask, axes);
            Atom countb = c.p.broadcast_in_dim(count, xt.shape, kept);
            Atom w = c.p.div(mask, countb);
            return {c.t.reduce_sum(c.t.mul(*a.tangents[0], w), axes)};
          }});
  }
  // dot_general is bilinear: dot(tx, y) + dot(x, ty).
  t.set(Prim::dot_general, {[](JvpCtx& c, JvpArgs& a) -> Tangents {
          MaybeAtom r;
          if (a.tangents[0])
            r = c.t.emit1(Prim::dot_general, {*a.tangents[0], a.primals[1]}, a.eqn.params);
          if (a.tangents[1]) {
            Atom d = c.t.emit1(Prim::dot_general, {a.primals[0], *a.tangents[1]}, a.eqn.params);
            r = r ? c.t.add(*r, d) : d;
          }
          return {r};
        }});
}

}  // namespace refjit
