#include "passes/inline_zero_consts.h"

#include <fmt/format.h>

#include "refjit/ir/error.h"

namespace refjit {

Jaxpr inline_zero_consts(const Jaxpr& jaxpr, const std::vector<bool>& zero) {
  if (zero.size() != jaxpr.constvars.size())
    throw Error(fmt::format("inline_zero_consts: {} flags for {} constvars", zero.size(),
                            jaxpr.constvars.size()));
  Jaxpr out = jaxpr;
  out.constvars.clear();
  std::vector<Eqn> fills;
  for (size_t k = 0; k < jaxpr.constvars.size(); ++k) {
    const Var v = jaxpr.constvars[k];
    const Type& t = jaxpr.type_of(v);
    if (!zero[k] || t.is_ref) {
      out.constvars.push_back(v);
      continue;
    }
    const Literal z = Literal::of(t.array.dtype, 0.0);
    fills.push_back(Eqn{Prim::broadcast_in_dim,
                        Params{{"shape", IntList(t.array.shape)},
                               {"broadcast_dimensions", IntList{}},
                               {"sharding", NoneParam{}}},
                        {z},
                        {v}});
  }
  out.eqns.insert(out.eqns.begin(), fills.begin(), fills.end());
  return out;
}

}  // namespace refjit
