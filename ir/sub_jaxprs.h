// The jaxprs an eqn's params hold: a scan's, jit's or decision's body, cond's branches, while's
// cond and body, a custom rule's jaxprs. How a walk or a rewrite reaches every eqn of a
// program at any depth, whatever the primitive, without naming its params.
#pragma once

#include <functional>
#include <optional>
#include <variant>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// Calls `f(const Jaxpr&)` on each sub-jaxpr of `e`, in param order (a list in its order);
// null ones are skipped.
template <class F>
void for_each_sub_jaxpr(const Eqn& e, F&& f) {
  for (const auto& [name, value] : e.params.entries()) {
    if (const JaxprPtr* body = std::get_if<JaxprPtr>(&value); body && *body) f(**body);
    if (const JaxprList* list = std::get_if<JaxprList>(&value))
      for (const JaxprPtr& b : *list)
        if (b) f(*b);
  }
}

// Whether `pred(const Jaxpr&)` holds for some sub-jaxpr of `e`.
template <class P>
bool any_sub_jaxpr(const Eqn& e, P&& pred) {
  bool found = false;
  for_each_sub_jaxpr(e, [&](const Jaxpr& sub) { found = found || pred(sub); });
  return found;
}

// Replaces each sub-jaxpr of `e` by `rewrite(sub)` where that returns a jaxpr (nullopt keeps
// it: the eqn then still shares it). Returns how many were replaced.
int rewrite_sub_jaxprs(Eqn& e, const std::function<std::optional<Jaxpr>(const Jaxpr&)>& rewrite);

}  // namespace refjit
