// Which writes of an index array survive: for ops where the last of several writes to one
// position wins (scatter, swap through index arrays), the transpose gives an update's
// cotangent only to the write that is not overwritten later.
#pragma once

#include <cstdint>

#include "passes/emitter.h"

namespace refjit {

// `keys`: an int array of any shape, its entries positions in [0, range). Returns a bool
// array of the same shape: true where no later entry (row-major order) has the same key.
// Entries outside [0, range) get an unspecified value: callers mask them out.
//
// Cost (the type system cannot tell whether indices repeat, so this is always emitted when
// there are at least two keys): K = |keys|. When K*K <= max(kPairwiseLimit, range) the keys
// are compared pairwise (O(K^2) work, no scratch: chosen for the small index vectors of
// loop bodies); otherwise the positions 0..K-1 are scattered into an int scratch of `range`
// entries (last write wins) and gathered back (O(K) work plus filling the scratch, O(range),
// once per execution: inside a loop body that is once per step).
Atom last_write_mask(Emitter& e, Atom keys, int64_t range);

inline constexpr int64_t kPairwiseLimit = 1024;

}  // namespace refjit
