#include "passes/ad/remat.h"

#include "passes/jaxpr_util.h"

namespace refjit {

namespace {

// Whether `name` is in the comma-separated `list`.
bool listed(std::string_view list, std::string_view name) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == name) return true;
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  return false;
}

}  // namespace

bool recomputed_by_remat(const Jaxpr& j, const Eqn& e, std::string_view policy) {
  if (policy.empty() || policy == "everything_saveable") return false;
  if (prim_info(e.prim).has_subjaxprs || touches_refs(j, e)) return false;
  const bool only_these = policy.starts_with(kSaveOnlyTheseNames);
  if (only_these || policy.starts_with(kSaveAnyNamesButThese)) {
    if (e.prim != Prim::checkpoint_name) return true;
    const std::string_view list =
        policy.substr(only_these ? kSaveOnlyTheseNames.size() : kSaveAnyNamesButThese.size());
    const bool in_list = listed(list, e.params.get<std::string>("name"));
    return only_these ? !in_list : in_list;
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
