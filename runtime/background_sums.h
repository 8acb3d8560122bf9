// Sums that run while the caller computes: what psum_start and psum_wait do (docs/distributed.md
// "Overlapping the sums"). The started sums run one at a time in the order they were started,
// which every member starts in the same order (the program's), so the members' collectives
// match as if they had run in line. A communication thread runs them when their group allows it
// (CollectiveGroup::sums_in_background); a caller waiting for a sum runs those before it that
// have not begun itself, so without the thread each bucket is summed at its wait.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "refjit/ir/dtype.h"
#include "runtime/collectives.h"

namespace refjit {

// Starts summing `count` elements of `dtype` at `data`, in place, over `group` (the axis
// `axis`, for messages). `data` must not be read or written until finish_background_sum(data).
void start_background_sum(std::shared_ptr<CollectiveGroup> group, std::string axis, void* data,
                          int64_t count, DType dtype);

// Waits for the sum started at `data`; returns its error message ("psum over 'x': ..."), empty
// on success or when no sum was started there (it was done at the start).
std::string finish_background_sum(void* data);

// Waits until every started sum has finished (their errors are kept for their waits): what a
// collective run on the calling thread does first, so the collectives stay in program order.
void finish_background_sums();

// Whether the calling thread is the communication thread (which yields while it polls).
bool on_communication_thread();

// How many sums the communication thread has run in this process (for the tests).
int64_t sums_run_on_communication_thread();

}  // namespace refjit
