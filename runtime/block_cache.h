// Storage for arrays, with large blocks recycled.
//
// A compiled call returns fresh output arrays, and a training loop frees them a step later.
// Left to malloc, a block of a few megabytes is mapped and unmapped (or the heap trimmed) on
// every call, so every call page-faults its outputs in again, zero-filled by the kernel: the
// gradient of a 10k x 128 embedding table (a 5 MB result) took 0.31 to 0.75 ms from one run to
// the next on the 2-core test machine, 0.31 to 0.34 with the blocks kept. Blocks of
// kMinCachedBytes or more are therefore kept when freed, up to kMaxCachedBytes in all, and
// handed out again for a request of the same rounded size (a loop asks for the same sizes
// every step), as XLA's allocator keeps its memory. Smaller blocks go to malloc directly.
#pragma once

#include <cstddef>
#include <memory>

namespace refjit {

inline constexpr size_t kMinCachedBytes = size_t{256} << 10;  // 256 KiB
inline constexpr size_t kMaxCachedBytes = size_t{256} << 20;  // 256 MiB

// 64-byte aligned storage of at least `bytes` bytes (rounded up to a multiple of 64, at least
// 64), contents unspecified. Thread-safe; the storage returns to the cache when the last
// shared_ptr to it goes.
std::shared_ptr<std::byte[]> allocate_block(size_t bytes);

// The bytes the cache holds now, and releasing them all to malloc (tests, memory pressure).
size_t cached_block_bytes();
void release_cached_blocks();

}  // namespace refjit
