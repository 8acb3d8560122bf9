#include "passes/dump.h"

#include "passes/ad/jvp.h"
#include "passes/ad/vjp.h"
#include "refjit/ir/text.h"

namespace refjit {

std::vector<bool> float_inputs(const Jaxpr& f) {
  std::vector<bool> r;
  for (Var v : f.invars) r.push_back(is_inexact(f.type_of(v).dtype()));
  return r;
}

std::string dump_jvp(const Jaxpr& f, std::vector<bool> differentiated) {
  if (differentiated.empty()) differentiated = float_inputs(f);
  return print_jaxpr(jvp_jaxpr(f, differentiated));
}

std::string dump_vjp(const Jaxpr& f, std::vector<bool> differentiated) {
  if (differentiated.empty()) differentiated = float_inputs(f);
  std::vector<AccumKind> kinds;
  for (size_t i = 0; i < f.invars.size(); ++i)
    if (differentiated[i])
      kinds.push_back(f.type_of(f.invars[i]).is_ref ? AccumKind::ref : AccumKind::value);
  VjpJaxprs v = vjp_jaxpr(f, differentiated, kinds);
  return print_jaxpr(v.forward) + "\n" + print_jaxpr(v.backward);
}

}  // namespace refjit
