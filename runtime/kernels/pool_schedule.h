// When the worker pool (thread_pool.h) runs a job in parallel, from how the workers kept up
// with the jobs before it. On a machine whose other work takes the workers' cores, a worker
// that has claimed a task runs it at a fraction of a core while the caller, done with its own
// share, waits for it, and a worker polling for jobs takes the caller's core: running jobs
// alone is faster then. So after several jobs whose workers straggled, jobs run serially,
// except probes, about every kProbeEvery-th job, that tell when the workers keep up again.
// Every task runs once either way: the results do not change.
//
// Kept apart from the pool's threads so that its decisions can be tested on made-up timings
// (test/runtime/pool_schedule_test.cpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace refjit::kernels {

class PoolSchedule {
 public:
  enum class Mode { parallel, probe, serial };

  // How a job that ran in parallel (or as a probe) went.
  struct Outcome {
    std::chrono::nanoseconds own_share;  // the caller running its own tasks
    std::chrono::nanoseconds waited;     // the caller waiting for tasks workers had claimed
    bool caller_ran_all = false;         // no worker claimed a task
    bool probing = false;                // the job was a probe
    bool workers_started = true;         // every worker thread had begun
  };

  static constexpr int kStraggling = 8, kMaxStraggling = 16;
  static constexpr uint64_t kProbeEvery = 32;
  // Probes in a row that may tell nothing (see record()) before they wait kProbeEvery again.
  static constexpr int kProbesInARow = 4;
  static constexpr int kUnevenJobs = 32, kTasksPerThreadWhenUneven = 2;

  // The next job's mode. Safe to call from several threads.
  Mode next();
  // How many tasks per thread a job that divides its work itself (a matrix product) should
  // make: 1 while the threads keep pace with each other, kTasksPerThreadWhenUneven for
  // kUnevenJobs jobs after one whose workers straggled. With one task per thread, a thread
  // that shares its core with other work sets the pace of the whole job; with more, the
  // others take its remaining tasks (each task repacks an operand, so not always).
  int tasks_per_thread() const;
  // Learns from a job next() ran in parallel or as a probe. Calls come one at a time (the
  // pool runs one parallel job at a time).
  void record(const Outcome& outcome);

 private:
  std::atomic<int> straggling_{0};        // high while workers fall behind
  std::atomic<uint64_t> serial_jobs_{0};  // jobs next() did not run in parallel
  std::atomic<uint64_t> next_probe_{0};   // the first of them that is a probe
  int probes_told_nothing_ = 0;           // in a row
  std::atomic<int> uneven_{0};            // jobs left to split finely (tasks_per_thread)
};

}  // namespace refjit::kernels
