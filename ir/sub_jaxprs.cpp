#include "ir/sub_jaxprs.h"

#include <string>
#include <utility>
#include <vector>

namespace refjit {

int rewrite_sub_jaxprs(Eqn& e, const std::function<std::optional<Jaxpr>(const Jaxpr&)>& rewrite) {
  int replaced = 0;
  auto rewritten = [&](const JaxprPtr& body) -> JaxprPtr {
    if (!body) return body;
    std::optional<Jaxpr> out = rewrite(*body);
    if (!out) return body;
    ++replaced;
    return std::make_shared<const Jaxpr>(std::move(*out));
  };
  std::vector<std::pair<std::string, ParamValue>> changed;
  for (const auto& [name, value] : e.params.entries()) {
    const int before = replaced;
    if (const JaxprPtr* body = std::get_if<JaxprPtr>(&value)) {
      JaxprPtr out = rewritten(*body);
      if (replaced > before) changed.emplace_back(name, std::move(out));
    } else if (const JaxprList* list = std::get_if<JaxprList>(&value)) {
      JaxprList out;
      for (const JaxprPtr& b : *list) out.push_back(rewritten(b));
      if (replaced > before) changed.emplace_back(name, std::move(out));
    }
  }
  for (auto& [name, value] : changed) e.params.set(name, std::move(value));
  return replaced;
}

}  // namespace refjit
