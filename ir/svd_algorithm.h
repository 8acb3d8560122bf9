// Internal: which LAPACK routine computes an svd eqn. JAX's CPU backend takes gesdd by default
// and gesvd for `algorithm=SvdAlgorithm.QR`; refjit does the same, so the singular vectors' signs
// are JAX's. Shared by the svd type rule, the interpreter and the lowering.
#pragma once

#include <string>
#include <string_view>

#include "refjit/ir/params.h"

namespace refjit {

inline constexpr std::string_view kSvdQrAlgorithm = "SvdAlgorithm.QR";

// Whether the svd eqn with `params` is computed by gesvd (else by gesdd).
inline bool svd_uses_gesvd(const Params& params) {
  return params.get_or<std::string>("algorithm", "") == kSvdQrAlgorithm;
}

}  // namespace refjit
