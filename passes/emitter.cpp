#include "passes/emitter.h"

#include <fmt/format.h>

#include "passes/jaxpr_util.h"
#include "refjit/ir/error.h"

namespace refjit {

void Emitter::tag(size_t n_before) {
  const auto& eqns = b_->jaxpr().eqns;
  if (linear_ && tangent_) {
    for (size_t k = n_before; k < eqns.size(); ++k) {
      bool lin = eqns[k].prim == Prim::new_ref;
      for (const Atom& a : eqns[k].ins) lin |= is_var(a) && linear_->count(as_var(a).id);
      if (lin)
        for (Var o : eqns[k].outs) linear_->insert(o.id);
    }
  }
  if (!tags_) return;
  tags_->resize(n_before, false);
  tags_->resize(eqns.size(), tangent_);
}

std::vector<Var> Emitter::emit(Prim p, std::vector<Atom> ins, Params params) {
  size_t n = b_->jaxpr().eqns.size();
  std::vector<Var> outs = b_->add_eqn(p, std::move(ins), std::move(params));
  tag(n);
  return outs;
}

Atom Emitter::emit1(Prim p, std::vector<Atom> ins, Params params) {
  std::vector<Var> outs = emit(p, std::move(ins), std::move(params));
  if (outs.size() != 1)
    throw Error(
        fmt::format("internal: {} emitted {} outputs, expected 1", prim_name(p), outs.size()));
  return outs[0];
}

std::vector<Var> Emitter::copy_eqn(const Jaxpr& src, const Eqn& eqn, std::vector<Atom> ins) {
  size_t n = b_->jaxpr().eqns.size();
  std::vector<Var> outs;
  for (Var o : eqn.outs) outs.push_back(b_->new_var(src.type_of(o)));
  b_->add_eqn_with_outs(eqn.prim, std::move(ins), eqn.params, outs);
  tag(n);
  return outs;
}

std::vector<Atom> Emitter::inline_jaxpr(const Jaxpr& callee, const std::vector<Atom>& args) {
  size_t n = b_->jaxpr().eqns.size();
  std::vector<Atom> outs = inline_call(*b_, callee, args);
  tag(n);
  return outs;
}

Atom Emitter::full(const ArrayType& t, double v) {
  Atom s = Literal::of(t.dtype, v);
  if (t.is_scalar()) return s;
  return emit1(Prim::broadcast_in_dim, {s},
               Params{{"shape", IntList(t.shape)},
                      {"broadcast_dimensions", IntList{}},
                      {"sharding", NoneParam{}}});
}

Atom Emitter::convert(Atom x, DType d) {
  if (array_type_of(x).dtype == d) return x;
  return emit1(Prim::convert_element_type, {x}, Params{{"new_dtype", d}, {"weak_type", false}});
}

Atom Emitter::select(Atom pred, std::vector<Atom> cases) {
  std::vector<Atom> ins{pred};
  for (auto& c : cases) ins.push_back(c);
  return emit1(Prim::select_n, std::move(ins));
}

Atom Emitter::broadcast_to(Atom x, const Shape& shape) {
  const ArrayType t = array_type_of(x);
  if (t.shape == shape) return x;
  if (!t.is_scalar())
    throw Error(fmt::format("internal: cannot broadcast {} to [{}]", t.str(), shape_text(shape)));
  return emit1(Prim::broadcast_in_dim, {x},
               Params{{"shape", IntList(shape)},
                      {"broadcast_dimensions", IntList{}},
                      {"sharding", NoneParam{}}});
}

Atom Emitter::broadcast_in_dim(Atom x, const Shape& shape, const IntList& dims) {
  if (array_type_of(x).shape == shape) return x;
  return emit1(Prim::broadcast_in_dim, {x},
               Params{{"shape", IntList(shape)}, {"broadcast_dimensions", dims}});
}

Atom Emitter::iota(const Shape& shape, int64_t dimension, DType dtype) {
  return emit1(Prim::iota, {},
               Params{{"dimension", dimension}, {"dtype", dtype}, {"shape", IntList(shape)}});
}

Atom Emitter::reshape(Atom x, const Shape& shape) {
  if (array_type_of(x).shape == shape) return x;
  return emit1(Prim::reshape, {x},
               Params{{"dimensions", NoneParam{}}, {"new_sizes", IntList(shape)}});
}

Atom Emitter::reduce_sum(Atom x, std::vector<int64_t> axes) {
  if (axes.empty()) return x;
  return emit1(Prim::reduce_sum, {x}, Params{{"axes", IntList(std::move(axes))}});
}

Atom Emitter::sum_to(Atom x, const Shape& shape) {
  const ArrayType t = array_type_of(x);
  if (t.shape == shape) return x;
  if (!shape.empty())
    throw Error(fmt::format("internal: cannot sum {} to [{}]", t.str(), shape_text(shape)));
  std::vector<int64_t> axes;
  for (int i = 0; i < t.rank(); ++i) axes.push_back(i);
  return reduce_sum(x, axes);
}

Var Emitter::new_ref(Atom init) { return emit(Prim::new_ref, {init})[0]; }

Atom Emitter::get(Atom ref, const Indexer& idx, const std::vector<Atom>& dyn) {
  std::vector<Atom> ins{ref};
  ins.insert(ins.end(), dyn.begin(), dyn.end());
  return emit1(Prim::get, std::move(ins), Params{{"indexer", idx}});
}

Atom Emitter::swap(Atom ref, Atom val, const Indexer& idx, const std::vector<Atom>& dyn) {
  std::vector<Atom> ins{ref, val};
  ins.insert(ins.end(), dyn.begin(), dyn.end());
  return emit1(Prim::swap, std::move(ins), Params{{"indexer", idx}});
}

void Emitter::addupdate(Atom ref, Atom val, const Indexer& idx, const std::vector<Atom>& dyn) {
  std::vector<Atom> ins{ref, val};
  ins.insert(ins.end(), dyn.begin(), dyn.end());
  emit(Prim::addupdate, std::move(ins), Params{{"indexer", idx}});
}

Atom Emitter::freeze(Atom ref) { return emit1(Prim::freeze, {ref}); }

}  // namespace refjit
