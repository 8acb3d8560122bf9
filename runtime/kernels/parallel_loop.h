// Large loops of generated code on the runtime's threads: the lowering outlines a loop whose
// iterations are independent into a function over a range of them
// (backend/parallel_loops.h), and the loop becomes one call of
// refjit_parallel_for, which splits the range over the pool (thread_pool.h).
//
// Each iteration writes its own memory, so results do not depend on how the range is split;
// loops that combine across iterations (a sum) are split into a fixed number of partial
// results by the lowering first, so their results do not depend on REFJIT_NUM_THREADS either.
#pragma once

#include <cstdint>

// On a function that calls JIT code through a pointer. Clang's -fsanitize=function (part of
// the UBSan build) checks a type signature stored just before the callee, which JIT code has
// not got; the check reads the 8 bytes before the function, unmapped when the code starts a
// page (as the second object file of a module compiled in pieces does).
#if defined(__clang__)
#define REFJIT_CALLS_JIT_CODE __attribute__((no_sanitize("function")))
#else
#define REFJIT_CALLS_JIT_CODE
#endif

namespace refjit::kernels {

// How many tasks a loop of `n` iterations is split into when a task should run at least
// `min_per_task` of them: at most a few per thread, so that a late worker leaves no long
// tail; 1 means the caller runs the whole loop.
int64_t parallel_task_count(int64_t n, int64_t min_per_task);

}  // namespace refjit::kernels

extern "C" {
// Runs body(ctx, lo, hi) over consecutive ranges [lo, hi) covering [0, n) exactly once, on
// the pool's threads and the caller's; returns when all have run. `ctx` is the loop's
// live-in values, packed by the generated code.
void refjit_parallel_for(void (*body)(void* ctx, int64_t lo, int64_t hi), void* ctx, int64_t n,
                         int64_t min_per_task);
}
