// The C++ API's discharge_state (refjit/discharge.h) over the pass (passes/discharge.h).
#include "refjit/discharge.h"

#include "passes/discharge.h"

namespace refjit {

ClosedJaxpr discharge_state(const ClosedJaxpr& closed) {
  ClosedJaxpr out;
  out.jaxpr = std::make_shared<const Jaxpr>(discharge_state(*closed.jaxpr));
  for (const Operand& c : closed.consts) {
    if (const Ref* r = std::get_if<Ref>(&c))
      out.consts.emplace_back(r->get());
    else
      out.consts.push_back(c);
  }
  return out;
}

}  // namespace refjit
