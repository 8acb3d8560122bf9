#include "passes/plain_decisions.h"

#include <algorithm>

#include "ir/sub_jaxprs.h"
#include "ir/window_params.h"

namespace refjit {

namespace {

bool indexes_several_dims(const Eqn& e) {
  switch (e.prim) {
    case Prim::gather:
    case Prim::scatter:
    case Prim::scatter_add:
    case Prim::scatter_mul:
    case Prim::scatter_min:
    case Prim::scatter_max: return indexed_dims(e.params) > 1;
    default: return false;
  }
}

bool is_decision(const Eqn& e) {
  return e.prim == Prim::shift_add || e.prim == Prim::get_flat_run ||
         e.prim == Prim::swap_flat_run || indexes_several_dims(e);
}

template <bool (*Kind)(const Eqn&)>
bool holds(const Jaxpr& j) {
  return std::any_of(j.eqns.begin(), j.eqns.end(),
                     [](const Eqn& e) { return Kind(e) || any_sub_jaxpr(e, holds<Kind>); });
}

// A window of `sizes` at dynamic starts, as a ref access takes it.
Indexer window(const IntList& sizes) {
  Indexer ix;
  for (int64_t s : sizes) ix.dims.push_back(IndexerDim{IndexerDim::Kind::slice, 0, s, 1, true});
  return ix;
}

Params reshape_params(const Shape& to) {
  return Params{{"dimensions", NoneParam{}}, {"new_sizes", IntList(to)}};
}

Params run_params(int64_t start, int64_t length) {
  return Params{{"start_indices", IntList{start}},
                {"limit_indices", IntList{start + length}},
                {"strides", IntList{1}}};
}

// Appends to `out` the plain eqns of `shift`, a shift_add of `j`.
void write_out_shift_add(Jaxpr& j, const Eqn& shift, std::vector<Eqn>& out) {
  const ShiftAddParams p = ShiftAddParams::of(shift);
  const Atom& r = shift.ins[0];
  const DType dt = j.type_of(r).array.dtype;
  const Shape written(p.write_sizes->begin(), p.write_sizes->end());
  const Shape added(p.add_sizes->begin(), p.add_sizes->end());
  const int64_t length = p.write_length();
  auto array = [&](const Shape& s) { return j.new_var(Type(ArrayType{dt, s})); };

  const Var zeros = array(written);
  out.push_back(Eqn{Prim::broadcast_in_dim,
                    Params{{"shape", IntList(written)},
                           {"broadcast_dimensions", IntList{}},
                           {"sharding", NoneParam{}}},
                    {shift.ins[1]},
                    {zeros}});
  const Var old = array(written);
  std::vector<Atom> swap_ins{r, zeros};
  const std::span<const Atom> w1 = p.write_starts(shift), w2 = p.add_starts(shift);
  swap_ins.insert(swap_ins.end(), w1.begin(), w1.end());
  out.push_back(Eqn{Prim::swap, Params{{"indexer", window(*p.write_sizes)}}, swap_ins, {old}});
  const Var run = array({length});
  out.push_back(Eqn{Prim::reshape, reshape_params({length}), {old}, {run}});
  for (size_t k = 0; k < shift.outs.size(); ++k)
    out.push_back(Eqn{Prim::slice,
                      run_params((*p.side_offsets)[k], (*p.side_lengths)[k]),
                      {run},
                      {shift.outs[k]}});
  const Var part = array({p.add_length()});
  out.push_back(Eqn{Prim::slice, run_params(p.offset, p.add_length()), {run}, {part}});
  const Var shaped = array(added);
  out.push_back(Eqn{Prim::reshape, reshape_params(added), {part}, {shaped}});
  std::vector<Atom> add_ins{r, shaped};
  add_ins.insert(add_ins.end(), w2.begin(), w2.end());
  out.push_back(Eqn{Prim::addupdate, Params{{"indexer", window(*p.add_sizes)}}, add_ins, {}});
}

// Appends to `out` the plain eqns of `access`, a get_flat_run or swap_flat_run of `j`: the
// run's positions clamped into [0, bound], split row-major into one index array per dim.
void write_out_flat_run(Jaxpr& j, const Eqn& access, std::vector<Eqn>& out) {
  const Shape& shape = j.type_of(access.ins[0]).array.shape;
  const int64_t length = access.params.get<int64_t>("length");
  const int64_t bound = access.params.get<int64_t>("bound");
  const DType it = j.type_of(access.ins[1]).array.dtype;
  auto emit = [&](Prim p, std::vector<Atom> ins, Params params = {}) -> Atom {
    const Var v = j.new_var(Type(ArrayType{it, {length}}));
    out.push_back(Eqn{p, std::move(params), std::move(ins), {v}});
    return v;
  };
  auto lit = [&](int64_t v) -> Atom { return Literal::of_int(it, v); };
  const Atom iota = emit(
      Prim::iota, {}, Params{{"dimension", int64_t{0}}, {"dtype", it}, {"shape", IntList{length}}});
  const Atom start = emit(Prim::broadcast_in_dim, {access.ins[1]},
                          Params{{"shape", IntList{length}},
                                 {"broadcast_dimensions", IntList{}},
                                 {"sharding", NoneParam{}}});
  const Atom run = emit(Prim::add, {start, iota});
  const Atom flat = emit(Prim::min, {emit(Prim::max, {run, lit(0)}), lit(bound)});
  int64_t stride = num_elements(shape);
  std::vector<Atom> idx;
  std::optional<Atom> outer;  // flat / stride of the previous dim
  for (int64_t d : shape) {
    stride /= d;
    const Atom quotient = stride == 1 ? flat : emit(Prim::div, {flat, lit(stride)});
    idx.push_back(outer ? emit(Prim::sub, {quotient, emit(Prim::mul, {*outer, lit(d)})})
                        : quotient);
    outer = quotient;
  }
  Indexer ix;
  ix.dims.assign(shape.size(), IndexerDim{IndexerDim::Kind::index_array, 0, 0, 1, true});
  std::vector<Atom> ins{access.ins[0]};
  if (access.prim == Prim::swap_flat_run) ins.push_back(access.ins[2]);
  ins.insert(ins.end(), idx.begin(), idx.end());
  out.push_back(Eqn{access.prim == Prim::get_flat_run ? Prim::get : Prim::swap,
                    Params{{"indexer", ix}}, std::move(ins), access.outs});
}

// Appends to `out` the plain eqns of `e`, a gather or scatter of `j` whose indices address
// several dims: the operand reshaped to one dim there, the op on that dim, the result reshaped
// back (a scatter's; a gather's result already has its shape).
void write_out_indexed_dims(Jaxpr& j, const Eqn& e, std::vector<Eqn>& out) {
  const ArrayType x = j.type_of(e.ins[0]).array;  // a copy: new_var may move the types
  const int64_t axis = e.params.get<int64_t>("axis"), count = indexed_dims(e.params);
  Shape flat(x.shape.begin(), x.shape.begin() + axis);
  flat.push_back(num_elements(Shape(x.shape.begin() + axis, x.shape.begin() + axis + count)));
  flat.insert(flat.end(), x.shape.begin() + axis + count, x.shape.end());
  const Var operand = j.new_var(Type(ArrayType{x.dtype, flat}));
  out.push_back(Eqn{Prim::reshape, reshape_params(flat), {e.ins[0]}, {operand}});
  Eqn one_dim = e;
  one_dim.ins[0] = operand;
  one_dim.params.erase("dims");
  if (e.prim == Prim::gather) {
    out.push_back(std::move(one_dim));
    return;
  }
  const Var result = j.new_var(Type(ArrayType{x.dtype, flat}));
  one_dim.outs = {result};
  out.push_back(std::move(one_dim));
  out.push_back(Eqn{Prim::reshape, reshape_params(x.shape), {result}, e.outs});
}

template <bool (*Kind)(const Eqn&)>
void write_out_all(Jaxpr& j) {
  std::vector<Eqn> eqns;
  eqns.reserve(j.eqns.size());
  for (Eqn& e : j.eqns) {
    if (!Kind(e)) {
      rewrite_sub_jaxprs(e, [](const Jaxpr& body) -> std::optional<Jaxpr> {
        if (!holds<Kind>(body)) return std::nullopt;
        Jaxpr plain = body;
        write_out_all<Kind>(plain);
        return plain;
      });
      eqns.push_back(std::move(e));
    } else if (indexes_several_dims(e)) {
      write_out_indexed_dims(j, e, eqns);
    } else if (e.prim == Prim::shift_add) {
      write_out_shift_add(j, e, eqns);
    } else {
      write_out_flat_run(j, e, eqns);
    }
  }
  j.eqns = std::move(eqns);
}

}  // namespace

const Jaxpr& plain_decisions(const Jaxpr& j, std::optional<Jaxpr>& storage) {
  if (!holds<is_decision>(j)) return j;
  storage.emplace(j);
  write_out_all<is_decision>(*storage);
  return *storage;
}

Jaxpr one_dim_indexing(const Jaxpr& j) {
  if (!holds<indexes_several_dims>(j)) return j;
  Jaxpr plain = j;
  write_out_all<indexes_several_dims>(plain);
  return plain;
}

}  // namespace refjit
