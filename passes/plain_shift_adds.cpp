#include "passes/plain_shift_adds.h"

#include "ir/window_params.h"

namespace refjit {

namespace {

bool holds_shift_add(const Jaxpr& j) {
  for (const Eqn& e : j.eqns) {
    if (e.prim == Prim::shift_add) return true;
    for (const auto& [name, value] : e.params.entries()) {
      if (const JaxprPtr* body = std::get_if<JaxprPtr>(&value); body && *body)
        if (holds_shift_add(**body)) return true;
      if (const JaxprList* list = std::get_if<JaxprList>(&value))
        for (const JaxprPtr& b : *list)
          if (b && holds_shift_add(*b)) return true;
    }
  }
  return false;
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

// The body written out, or nullopt when it holds no shift_add.
std::optional<JaxprPtr> plain_body(const JaxprPtr& body) {
  std::optional<Jaxpr> storage;
  if (body) (void)plain_shift_adds(*body, storage);
  if (!storage) return std::nullopt;
  return std::make_shared<const Jaxpr>(std::move(*storage));
}

void write_out_all(Jaxpr& j) {
  std::vector<Eqn> eqns;
  eqns.reserve(j.eqns.size());
  for (Eqn& e : j.eqns) {
    if (e.prim == Prim::shift_add) {
      write_out(j, e, eqns);
      continue;
    }
    std::vector<std::pair<std::string, ParamValue>> rewritten;
    for (const auto& [name, value] : e.params.entries()) {
      if (const JaxprPtr* body = std::get_if<JaxprPtr>(&value)) {
        if (std::optional<JaxprPtr> plain = plain_body(*body)) rewritten.emplace_back(name, *plain);
      } else if (const JaxprList* list = std::get_if<JaxprList>(&value)) {
        JaxprList plain_list = *list;
        bool changed = false;
        for (JaxprPtr& b : plain_list)
          if (std::optional<JaxprPtr> plain = plain_body(b)) {
            b = *plain;
            changed = true;
          }
        if (changed) rewritten.emplace_back(name, std::move(plain_list));
      }
    }
    for (auto& [name, value] : rewritten) e.params.set(name, std::move(value));
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
