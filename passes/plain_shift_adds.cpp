#include "passes/plain_shift_adds.h"

#include <algorithm>

#include "ir/sub_jaxprs.h"
#include "ir/window_params.h"

namespace refjit {

namespace {

bool holds_shift_add(const Jaxpr& j) {
  return std::any_of(j.eqns.begin(), j.eqns.end(), [](const Eqn& e) {
    return e.prim == Prim::shift_add || any_sub_jaxpr(e, holds_shift_add);
  });
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
void write_out(Jaxpr& j, const Eqn& shift, std::vector<Eqn>& out) {
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

void write_out_all(Jaxpr& j) {
  std::vector<Eqn> eqns;
  eqns.reserve(j.eqns.size());
  for (Eqn& e : j.eqns) {
    if (e.prim == Prim::shift_add) {
      write_out(j, e, eqns);
      continue;
    }
    rewrite_sub_jaxprs(e, [](const Jaxpr& body) {
      std::optional<Jaxpr> plain;
      (void)plain_shift_adds(body, plain);
      return plain;
    });
    eqns.push_back(std::move(e));
  }
  j.eqns = std::move(eqns);
}

}  // namespace

const Jaxpr& plain_shift_adds(const Jaxpr& j, std::optional<Jaxpr>& storage) {
  if (!holds_shift_add(j)) return j;
  storage.emplace(j);
  write_out_all(*storage);
  return *storage;
}

}  // namespace refjit
