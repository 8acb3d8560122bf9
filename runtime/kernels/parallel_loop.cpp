#include "runtime/kernels/parallel_loop.h"

#include <algorithm>

#include "runtime/kernels/thread_pool.h"

namespace refjit::kernels {

int64_t parallel_task_count(int64_t n, int64_t min_per_task) {
  const int64_t by_size = n / std::max<int64_t>(1, min_per_task);
  const int64_t by_threads = 4 * static_cast<int64_t>(thread_count());
  return thread_count() == 1 ? 1 : std::max<int64_t>(1, std::min(by_size, by_threads));
}

}  // namespace refjit::kernels

namespace {

constexpr int64_t kLongLoopTasks = 64;

REFJIT_CALLS_JIT_CODE void run_range(void (*body)(void*, int64_t, int64_t), void* ctx, int64_t lo,
                                     int64_t hi) {
  body(ctx, lo, hi);
}

}  // namespace

extern "C" void refjit_parallel_for(void (*body)(void*, int64_t, int64_t), void* ctx, int64_t n,
                                    int64_t min_per_task) {
  const int64_t tasks = refjit::kernels::parallel_task_count(n, min_per_task);
  if (tasks <= 1) return run_range(body, ctx, 0, n);
  // Each minimal task is tens of microseconds of work (backend/lowering.cpp), so 64 of them
  // are milliseconds.
  const bool long_job = n / std::max<int64_t>(1, min_per_task) >= kLongLoopTasks;
  refjit::kernels::parallel_for(
      tasks, [&](int64_t t) { run_range(body, ctx, n * t / tasks, n * (t + 1) / tasks); },
      long_job ? refjit::kernels::JobLength::milliseconds
               : refjit::kernels::JobLength::short_or_unknown);
}
