// Implementation details of refjit/vmap.h that its templates need. Not part of the API: names
// here may change at any time.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "refjit/trace.h"

namespace refjit::detail {

// The batch size and each leaf's per-example type, from the leaves and their batch axes
// (nullopt: not batched). Throws Error naming the leaf for an axis out of range, batch axes of
// different sizes, a ref batched along an axis other than 0, or no batched leaf at all.
struct VmapShape {
  int64_t size = 0;
  std::vector<Type> per_example;
};
VmapShape vmap_shape(const std::vector<Operand>& leaves,
                     const std::vector<std::optional<int>>& axes, const std::string& name);

// Runs the per-example function `traced` over the batch: the batched leaves' axes moved to the
// front, the jaxpr batched (passes/vmap.h) and called, each output's batch dim put at its
// out axis (an output that does not depend on the batch is broadcast there; with out axis
// nullopt it must not depend on it).
std::vector<Operand> vmap_call(const TracedFunction& traced, const std::vector<Operand>& leaves,
                               const std::vector<std::optional<int>>& axes,
                               const std::vector<std::optional<int>>& out_axes,
                               const VmapShape& shape, const std::string& name);

}  // namespace refjit::detail
