// The runtime's worker threads: large matrix products (gemm.h) split their output over them.
// One pool per process, started on first use with one thread per CPU the process may run on
// (its affinity mask: taskset, cpusets, MPI bindings; REFJIT_NUM_THREADS
// overrides; 1 disables threading). The calling thread takes part in the work.
#pragma once

#include <cstdint>
#include <functional>

namespace refjit::kernels {

// How many threads a parallel_for uses at most (workers plus the caller).
int thread_count();

// How many tasks per thread a job that divides its work into equal parts should make: 1
// while the pool's threads keep pace with each other, more while some run slower than others
// (their CPUs are shared with other work), so that the faster threads take more of the parts.
int tasks_per_thread();

// For tests: while one lives, tasks_per_thread() returns `n`, so that a test can check that a
// product split finely gives the same bits as one split a part per thread.
class ScopedTasksPerThread {
 public:
  explicit ScopedTasksPerThread(int n);
  ~ScopedTasksPerThread();
  ScopedTasksPerThread(const ScopedTasksPerThread&) = delete;
  ScopedTasksPerThread& operator=(const ScopedTasksPerThread&) = delete;

 private:
  int previous_;
};

// How long a whole job runs, as far as its caller knows: jobs of milliseconds stay parallel
// while the pool runs shorter ones serially on a busy machine (pool_schedule.h).
enum class JobLength { short_or_unknown, milliseconds };

// Runs task(i) for every i in [0, n) and returns when all have finished. Tasks run on the
// pool's threads and the caller's; which thread runs which task is not fixed, so a task must
// only write memory no other task writes. Runs serially when n is 1, when the pool has one
// thread, when called from inside a task, while another thread's parallel_for runs, while
// the pool's workers fall behind, or (unless `length` says milliseconds) while other work keeps
// every CPU of the machine busy (pool_schedule.h).
void parallel_for(int64_t n, const std::function<void(int64_t)>& task,
                  JobLength length = JobLength::short_or_unknown);

}  // namespace refjit::kernels
