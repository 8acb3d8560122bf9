// Collectives over a named axis, JAX's jax.lax.psum / all_gather / axis_index: the axis names
// a group of processes (bound with refjit::distributed, docs/distributed.md; an axis bound to
// nothing is this process alone). Each call is one eqn, traced, differentiated (psum is its
// own transpose) and compiled like any other; every process of the group must make the same
// calls in the same order.
//
//   Value total = psum(local_loss, "data");      // jax.lax.psum(x, "data")
//   psum(grad_ref, "data");                      // the ref's contents summed in place
#pragma once

#include <string>

#include "refjit/ref.h"
#include "refjit/value.h"

namespace refjit {

// The elementwise sum of x over the axis's processes, in rank order (the same bits on each).
Value psum(const Value& x, const std::string& axis);
// r[...] = psum(r[...], axis): compiled, the sum happens in the ref's own buffer (no copy).
void psum(const Ref& r, const std::string& axis);
// Every process's x stacked along a new leading axis, in rank order: [size, x.shape...].
Value all_gather(const Value& x, const std::string& axis);
// The root process's x, on every process.
Value broadcast_from(const Value& x, const std::string& axis, int root = 0);
// This process's position along the axis (an i32 scalar), and the number of processes.
Value axis_index(const std::string& axis);
int axis_size(const std::string& axis);

}  // namespace refjit
