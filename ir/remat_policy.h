// Internal: the remat policies a checkpointed jit's `policy` param may name (passes/remat.h
// says what each saves). Shared by the jit type rule and the passes.
#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace refjit {

inline constexpr std::array<std::string_view, 4> kRematPolicies = {
    "nothing_saveable", "dots_saveable", "dots_with_no_batch_dims_saveable",
    "everything_saveable"};

inline bool is_remat_policy(std::string_view policy) {
  return std::find(kRematPolicies.begin(), kRematPolicies.end(), policy) != kRematPolicies.end();
}

}  // namespace refjit
