// A generator of well-typed random Jaxprs, for differential testing (docs/testing.md
// "Random programs"). Every program is a pure function of (seed, options).
#pragma once

#include <cstdint>
#include <vector>

#include "refjit/ir/jaxpr.h"
#include "runtime/interpreter.h"

namespace refjit::randgen {

struct GenOptions {
  DType float_dtype = DType::f32;  // the dtype of every float value in the program
  int max_eqns = 14;               // top-level generation steps (one step may add several eqns)
  int max_depth = 2;               // nesting of scan/cond bodies
  bool refs = true;                // new_ref/get/swap/addupdate/freeze and Ref invars
  bool control = true;             // scan and cond
  // For programs checked against finite differences: no stop_gradient (its JVP is zero by
  // design) and no round trip through f32 (FD of a staircase is noise).
  bool differentiable = false;
};

struct Program {
  Jaxpr jaxpr;
  // One random value per invar (the generated jaxprs have no constvars): floats in [-1, 1],
  // integer indices in [-2, 6] (sometimes out of range: they must clamp), refs freshly made.
  std::vector<RtValue> args;
};

// A random program: float inputs of rank 0-3 (dims 1-4), integer scalar indices, maybe a
// Ref input; elementwise math on domain-safe operands (log/sqrt/rsqrt/pow of x*x+0.5, tan and
// exp of tanh x), shape ops, dynamic slicing, reductions, dot_general, select_n, ref ops with
// whole/static/dynamic indexers, scan (carries, xs, closed-over refs) and cond. Outputs are
// float arrays. The result verifies; a failure to build an eqn is a generator bug (throws).
Program generate(uint64_t seed, const GenOptions& options = {});

// Fresh copies of `args` (ref buffers are copied, so runs don't see each other's writes).
std::vector<RtValue> copy_args(const std::vector<RtValue>& args);

}  // namespace refjit::randgen
