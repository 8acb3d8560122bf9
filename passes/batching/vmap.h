// Batching (JAX's vmap): a jaxpr written for one example turned into one that computes a
// whole batch at once.
//
// Every batched value carries its batch dim first: a batched input of per-example type T[s]
// is a T[B, s...] invar of the result (a batched ref a Ref{T[B, s...]}), and a batched output
// comes out as T[B, s...]. Unbatched inputs and outputs keep their types. Each primitive has
// a batching rule (passes/batching/vmap_rules.cpp): elementwise ops broadcast their unbatched
// operands, shape ops and reductions shift their dims by one, dot_general gains a batch dim, refs
// are indexed with a leading whole slice, scan/while/cond/jit batch their bodies. An eqn no rule
// covers (a gather whose operand and indices are both batched, a cond on a batched predicate,
// a ref read at batched indices, ...) runs as a scan over the batch, one example per step:
// slower, never wrong. A ref made inside is batched, one per example (as in JAX). Writing a
// batched value, or at a batched index, into an unbatched ref (one given to the function
// unbatched, or captured) is RefError E11.
#pragma once

#include <cstdint>
#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

struct BatchedJaxpr {
  Jaxpr jaxpr;
  std::vector<bool> out_batched;  // per output: whether it has the batch dim
};

// `in_batched`: per invar (constvars are never batched). `force_out`: outputs that must come
// out batched even where they do not depend on a batched input (empty: none).
BatchedJaxpr vmap_jaxpr(const Jaxpr& jaxpr, const std::vector<bool>& in_batched, int64_t size,
                        const std::vector<bool>& force_out = {});

}  // namespace refjit
