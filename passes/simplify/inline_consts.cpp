#include "passes/simplify/inline_consts.h"

#include <fmt/format.h>

#include <unordered_map>

#include "refjit/ir/error.h"

namespace refjit {

Jaxpr inline_known_consts(const Jaxpr& jaxpr, const std::vector<ConstFold>& folds,
                          bool keep_binders) {
  if (folds.size() != jaxpr.constvars.size())
    throw Error(fmt::format("inline_known_consts: {} entries for {} constvars", folds.size(),
                            jaxpr.constvars.size()));
  Jaxpr out = jaxpr;
  if (!keep_binders) out.constvars.clear();
  std::vector<Eqn> defs;
  std::unordered_map<uint32_t, Var> folded;  // keep_binders: constvar -> the var readers read
  for (size_t k = 0; k < jaxpr.constvars.size(); ++k) {
    const Var binder = jaxpr.constvars[k];
    const Type t = jaxpr.type_of(binder);
    const ConstFold& f = folds[k];
    const bool run = f.kind == ConstFold::Kind::run && t.array.rank() == 1 && is_int(t.array.dtype);
    if (t.is_ref || (f.kind != ConstFold::Kind::zeros && !run)) {
      if (!keep_binders) out.constvars.push_back(binder);
      continue;
    }
    const Var v = keep_binders ? out.new_var(t) : binder;
    if (keep_binders) folded.emplace(binder.id, v);
    if (!run) {
      defs.push_back(Eqn{Prim::broadcast_in_dim,
                         Params{{"shape", IntList(t.array.shape)},
                                {"broadcast_dimensions", IntList{}},
                                {"sharding", NoneParam{}}},
                         {Literal::of(t.array.dtype, 0.0)},
                         {v}});
      continue;
    }
    const Var iota = f.run_start == 0 ? v : out.new_var(t);
    defs.push_back(Eqn{
        Prim::iota,
        Params{
            {"dimension", int64_t{0}}, {"dtype", t.array.dtype}, {"shape", IntList(t.array.shape)}},
        {},
        {iota}});
    if (f.run_start != 0)
      defs.push_back(Eqn{Prim::add, {}, {iota, Literal::of_int(t.array.dtype, f.run_start)}, {v}});
  }
  auto read = [&](Atom& a) {
    if (!is_var(a)) return;
    if (auto it = folded.find(as_var(a).id); it != folded.end()) a = it->second;
  };
  for (Eqn& e : out.eqns)
    for (Atom& a : e.ins) read(a);
  for (Atom& a : out.outvars) read(a);
  out.eqns.insert(out.eqns.begin(), defs.begin(), defs.end());
  return out;
}

}  // namespace refjit
