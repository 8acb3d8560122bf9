#include "passes/remat.h"

#include "passes/jaxpr_util.h"

namespace refjit {

namespace {

bool structured(Prim p) {
  return p == Prim::scan || p == Prim::cond || p == Prim::while_ || p == Prim::jit ||
         p == Prim::custom_vjp_call;
}

}  // namespace

bool recomputed_by_remat(const Jaxpr& j, const Eqn& e, std::string_view policy) {
  if (policy.empty() || policy == "everything_saveable") return false;
  if (structured(e.prim) || touches_refs(j, e)) return false;
  if (policy.starts_with(kSaveOnlyTheseNames)) {
    if (e.prim != Prim::checkpoint_name) return true;
    // Saved when its name is in the comma-separated list.
    const std::string& name = e.params.get<std::string>("name");
    std::string_view list = policy.substr(kSaveOnlyTheseNames.size());
    while (!list.empty()) {
      const size_t comma = list.find(',');
      if (list.substr(0, comma) == name) return false;
      list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
    return true;
  }
  if (e.prim == Prim::dot_general) {
    if (policy == "dots_saveable") return false;
    if (policy == "dots_with_no_batch_dims_saveable" &&
        e.params.get<DotDims>("dimension_numbers").lhs_batch.empty())
      return false;
  }
  return true;
}

}  // namespace refjit
