// When the worker pool (thread_pool.h) runs a job in parallel, from how the workers kept up
// with the jobs before it. On a machine whose other work takes the workers' cores, a worker
// that has claimed a task runs it at a fraction of a core while the caller, done with its own
// share, waits for it, and a worker polling for jobs takes the caller's core: running jobs
// alone is faster then. So after several jobs whose workers straggled, jobs run serially,
// except probes, about every kProbeEvery-th job, that tell when the workers keep up again.
// Two waits of a time slice for a worker the OS took off its CPU, close together, make jobs
// serial at once, for kSerialAfterDescheduled. Short jobs also run serially while other work
// fills every CPU of the machine (machine_load.h). Jobs of milliseconds stay parallel
// throughout. And while the threads run unevenly, products split into more parts
// (tasks_per_thread).
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
  // `long_in_serial`: a long job (see next()) run in parallel while other jobs run serially.
  enum class Mode { parallel, probe, serial, long_in_serial };
  using Clock = std::chrono::steady_clock;

  // How a job that ran in parallel (or as a probe) went.
  struct Outcome {
    std::chrono::nanoseconds own_share;  // the caller running its own tasks
    std::chrono::nanoseconds waited;     // the caller waiting for tasks workers had claimed
    bool caller_ran_all = false;         // no worker claimed a task
    bool probing = false;                // the job was a probe
    bool workers_started = true;         // every worker thread had begun
    bool long_in_serial = false;         // next() returned long_in_serial for it
    Clock::time_point ended{};           // when the caller saw the last task done
  };

  static constexpr int kStraggling = 8, kMaxStraggling = 16;
  static constexpr uint64_t kProbeEvery = 32;
  // Probes in a row that may tell nothing (see record()) before they wait kProbeEvery again.
  static constexpr int kProbesInARow = 4;
  // A wait for a worker this long (and longer than the caller's own share) means the OS took
  // the worker off its CPU while it held a task; then jobs run serially for at least
  // kSerialAfterDescheduled, without probes, ...
  static constexpr std::chrono::microseconds kDescheduledWait{1000};
  static constexpr std::chrono::milliseconds kSerialAfterDescheduled{200};
  // ... when the wait is the second within this time (a lone one counts as straggling).
  static constexpr std::chrono::milliseconds kDescheduledWindow{100};
  static constexpr int kUnevenJobs = 32, kTasksPerThreadWhenUneven = 2;

  // The next job's mode, at time `now`. A long job (a matrix product of at least 64M
  // multiply-adds, a loop of at least 64 minimal tasks: milliseconds of work) runs in parallel
  // even while others run serially: a worker that shares its CPU still does part of it, and a
  // time slice's wait for it costs less than that part saves. `machine_full`: other threads
  // keep every CPU busy; short jobs then run serially (and are not counted towards probes).
  // Safe to call from several threads.
  Mode next(bool long_job, Clock::time_point now, bool machine_full = false);
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
  std::atomic<int> straggling_{0};           // high while workers fall behind
  std::atomic<uint64_t> serial_jobs_{0};     // jobs next() did not run in parallel
  std::atomic<uint64_t> next_probe_{0};      // the first of them that is a probe
  int probes_told_nothing_ = 0;              // in a row
  std::atomic<int> uneven_{0};               // jobs left to split finely (tasks_per_thread)
  std::atomic<Clock::rep> serial_until_{0};  // no probes before (a time_since_epoch count)
  // When the last job that waited for a descheduled worker ended (record() only).
  Clock::time_point last_descheduled_{};
};

}  // namespace refjit::kernels
