// Internal: the remat policies a checkpointed jit's `policy` param may name (passes/ad/remat.h
// says what each saves). Shared by the jit type rule and the passes.
#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace refjit {

inline constexpr std::array<std::string_view, 4> kRematPolicies = {
    "nothing_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable", "everything_saveable"};

// save_only_these_names:NAME,NAME,...: the values tagged with those names by checkpoint_name.
inline constexpr std::string_view kSaveOnlyTheseNames = "save_only_these_names:";
// save_any_names_but_these:NAME,...: every value tagged by checkpoint_name except those names.
inline constexpr std::string_view kSaveAnyNamesButThese = "save_any_names_but_these:";

inline bool is_remat_policy(std::string_view policy) {
  return policy.starts_with(kSaveOnlyTheseNames) || policy.starts_with(kSaveAnyNamesButThese) ||
         std::find(kRematPolicies.begin(), kRematPolicies.end(), policy) != kRematPolicies.end();
}

}  // namespace refjit
