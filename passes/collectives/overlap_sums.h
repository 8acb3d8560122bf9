// overlap-sums: each psum (and psum_invariant) becomes a psum_start, as early as its operand is
// ready, and a psum_wait, as late as its result is first read, so the sum runs on the runtime's
// communication thread while the eqns between compute (runtime/background_sums.h): the gradient
// sums of data-parallel training run during the backward pass, as PyTorch DDP's and Horovod's
// do. Small sums of one axis and dtype whose operands become ready one after another are
// bucketed, up to a size, into one sum of their concatenation: one message's latency instead of
// several, for the cost of copying them in and out (a large sum is a bucket of its own, summed
// in place). The bits are those of a psum of the concatenation: the same on every process.
//
// The order is fixed by the program alone (every process buckets and starts the same sums in
// the same order). Starts and waits stay within their eqn list (a scan body's sums within the
// body) and are not moved across another collective, a host call or an eqn whose body holds
// either (a callback may communicate itself).
#pragma once

#include <cstdint>

#include "refjit/ir/jaxpr.h"

namespace refjit {

struct OverlapSumsOptions {
  // A bucket's operands, concatenated, hold at most this many bytes (a single larger sum is a
  // bucket of its own). REFJIT_SUM_BUCKET_BYTES overrides it.
  int64_t bucket_bytes = int64_t{1} << 20;
  // A sum of more bytes than this is a bucket of its own: its copies into and out of a bucket
  // would cost more than the latency of a message of its own (about 15 us for three MPI
  // collectives, against copies at some 5 GB/s; docs/distributed.md "Overlapping the sums").
  int64_t shared_bytes = int64_t{64} << 10;
  // REFJIT_OVERLAP_SUMS=0 turns the pass off (to measure what it gains).
  bool enabled = true;
  static OverlapSumsOptions from_environment();
};

// `jaxpr` with its psums split into starts and waits, bucketed.
Jaxpr overlap_sums(const Jaxpr& jaxpr, const OverlapSumsOptions& options);

}  // namespace refjit
