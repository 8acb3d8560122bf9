#include "runtime/kernels/pool_schedule.h"

#include <algorithm>

namespace refjit::kernels {

using std::chrono::microseconds;

PoolSchedule::Mode PoolSchedule::next(bool long_job, Clock::time_point now, bool machine_full) {
  if (machine_full && !long_job) return Mode::serial;
  if (straggling_.load(std::memory_order_relaxed) < kStraggling) return Mode::parallel;
  if (long_job) return Mode::long_in_serial;
  if (now.time_since_epoch().count() < serial_until_.load(std::memory_order_relaxed))
    return Mode::serial;
  const uint64_t job = serial_jobs_.fetch_add(1, std::memory_order_relaxed);
  return job >= next_probe_.load(std::memory_order_relaxed) ? Mode::probe : Mode::serial;
}

// A job counts as straggling when its caller waited for the workers longer than half its own
// share, plus 50 us (a slow wake-up is not a busy machine; a descheduled worker costs a time
// slice, milliseconds), or when the caller ran every task of a job long enough for a polling
// worker to join (the workers' cores are taken, and their polling only takes the caller's
// time). Other jobs of 100 us or more count as keeping up, more strongly: one good probe is
// evidence.
void PoolSchedule::record(const Outcome& o) {
  // A short job tells nothing: it is over before a worker could join. Nor does a probe the
  // caller ran alone: the workers were asleep (as they are after serial jobs). Nor does a job
  // run before every worker thread has started (a thread's first start took milliseconds in a
  // VM). A probe that tells nothing is followed by another at once, a few times: a program's
  // calls repeat the same jobs, and probes every kProbeEvery-th job kept landing on the same
  // short one (the pool then stayed serial on a quiet machine, and a 512 x 512 product ran at
  // half speed).
  const bool told_nothing = o.own_share + o.waited < microseconds(100) ||
                            (o.caller_ran_all && o.probing) || !o.workers_started;
  if (o.probing) {
    const uint64_t now = serial_jobs_.load(std::memory_order_relaxed);
    const int in_a_row = told_nothing ? probes_told_nothing_ + 1 : 0;
    probes_told_nothing_ = in_a_row % kProbesInARow;
    // `now` counts this probe: the next job is number now, and a probe kProbeEvery jobs after
    // this one is number now - 1 + kProbeEvery.
    next_probe_.store(probes_told_nothing_ != 0 ? now : now - 1 + kProbeEvery,
                      std::memory_order_relaxed);
  }
  if (told_nothing) return;
  const bool straggled = o.waited > o.own_share / 2 + microseconds(50) ||
                         (o.caller_ran_all && o.own_share > microseconds(200));
  uneven_.store(straggled ? kUnevenJobs : std::max(uneven_.load(std::memory_order_relaxed) - 1, 0),
                std::memory_order_relaxed);
  // A long job says nothing of how the short ones, which run serially, would fare.
  if (o.long_in_serial) return;
  // A wait of a millisecond or more, longer than the caller's own share, is a worker that the
  // OS took off its CPU while it held a task: its CPU is shared with other work, and any job
  // may wait a time slice for it (1-4 ms here, against jobs of 100 us: a parallel loop of
  // the Newton iteration waited so in one job of 40 beside one spinning process, every 24 ms
  // on average). A second such wait within kDescheduledWindow makes jobs run serially at
  // once, without probes for kSerialAfterDescheduled, then until three probes keep up. A
  // lone one counts as straggling: in a VM whose host takes a CPU now and then (1-7 ms every
  // 0.3-1 s on this quiet machine), serial mode at each one kept a 256 x 256 product at one
  // thread's speed for whole runs (0.32 against 0.17 ms).
  const bool descheduled = o.waited >= kDescheduledWait && o.waited > o.own_share;
  const bool again = descheduled && o.ended - last_descheduled_ < kDescheduledWindow;
  if (descheduled) last_descheduled_ = o.ended;
  if (again)
    serial_until_.store((o.ended + kSerialAfterDescheduled).time_since_epoch().count(),
                        std::memory_order_relaxed);
  int s = straggling_.load(std::memory_order_relaxed);
  s = again                      ? kMaxStraggling
      : straggled || descheduled ? std::min(s + 2, kMaxStraggling)
                                 : std::max(s - 4, 0);
  straggling_.store(s, std::memory_order_relaxed);
}

int PoolSchedule::tasks_per_thread() const {
  return uneven_.load(std::memory_order_relaxed) > 0 ? kTasksPerThreadWhenUneven : 1;
}

}  // namespace refjit::kernels
