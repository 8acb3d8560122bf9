// Rematerialisation (JAX's jax.checkpoint / remat): code under a checkpoint policy has its
// intermediate values recomputed by the backward pass instead of kept from the forward pass.
//
// A checkpointed region is a `jit` eqn with a `policy` param (the C++ API's checkpoint(f),
// JAX's remat2). The policy says which values of the region may still be saved:
//   nothing_saveable                   none: everything the backward pass needs is recomputed
//                                      from the region's inputs (JAX's default policy)
//   dots_saveable                      the results of dot_general
//   dots_with_no_batch_dims_saveable   the results of dot_general without batch dims
//   everything_saveable                all (the region is an ordinary call)
//   save_only_these_names:A,B          the values tagged A or B by checkpoint_name (`name`
//                                      eqns, JAX's name_p)
// Linearize (passes/ad/linearize.cpp, and the linear body of a scan, linearize_scan.cpp) copies an
// eqn whose result the linear part reads into the linear part when the eqn is recomputable:
// under a policy that does not save it, free of ref effects, not a loop or branch. Its
// operands are then needed in turn, so what is saved is what the region was given (for a
// checkpointed scan step: the carry and xs of each step) and what the policy allows.
#pragma once

#include <string_view>

#include "ir/remat_policy.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// Whether the backward pass recomputes eqn `e` of `j`, run under `policy` ("" for code
// outside any checkpoint), instead of saving its results.
bool recomputed_by_remat(const Jaxpr& j, const Eqn& e, std::string_view policy);

}  // namespace refjit
