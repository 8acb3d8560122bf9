// Whether other work keeps every CPU of the machine busy. Then a worker woken for a short job
// shares a CPU with that work: it runs its tasks late, and the caller waits for it. Short jobs
// run serially while the machine is full (pool_schedule.h); jobs of milliseconds still gain
// from a share of a second CPU (a 512 x 512 product with two other processes spinning on two
// CPUs: 1.4 ms against one thread's 2.6). With two spinning processes, the Newton iteration
// of the peer benchmark went from 4.0-8.2 ms median a call to 4.0-4.5 (docs/backend.md).
#pragma once

#include <atomic>
#include <optional>
#include <string_view>

namespace refjit::kernels {

// The number of threads the machine can run or is running now, from the text of
// /proc/loadavg ("0.52 0.58 0.59 3/1034 4321": the 3). Nothing when the text is not of that
// form.
std::optional<int> runnable_threads_in_loadavg(std::string_view loadavg);

// Samples the machine's runnable threads (/proc/loadavg). Nothing when the file cannot be
// read, or when this process may not run on every online CPU (taskset, a cpuset, an MPI
// binding): the count is the whole machine's, and threads running on CPUs the process cannot
// use do not take its CPUs.
std::optional<int> runnable_threads_on_machine();

// The number of CPUs online.
int online_cpus();

// Whether other work keeps every CPU busy, from samples of the threads it runs: it does when
// each of the last kSamples samples counted at least one such thread per CPU. One sample
// does not tell: beside one spinning process on two CPUs, kernel threads made a third
// runnable thread at one sample in five. Safe to call from several threads.
class FullMachine {
 public:
  static constexpr int kSamples = 4;
  // `others`: the runnable threads the sample counted, less the caller's own.
  bool record(int others, int cpus);

 private:
  std::atomic<int> full_samples_{0};  // in a row
};

}  // namespace refjit::kernels
