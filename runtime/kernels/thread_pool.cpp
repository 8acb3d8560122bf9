#include "runtime/kernels/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/kernels/cpu_placement.h"
#include "runtime/kernels/float_mode.h"
#include "runtime/kernels/machine_load.h"
#include "runtime/kernels/pool_schedule.h"

namespace refjit::kernels {

namespace {

int configured_threads() {
  if (const char* env = std::getenv("REFJIT_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n >= 1) return std::min(n, 256);
  }
  // The CPUs this process may run on (taskset, a container's cpuset, an MPI launcher's
  // binding), not every CPU of the machine: ranks bound to one core each get no workers to
  // fight over it.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && CPU_COUNT(&allowed) > 0)
    return CPU_COUNT(&allowed);
  return std::max(1u, std::thread::hardware_concurrency());
}

thread_local bool t_inside_task = false;

// How long a worker (and a caller waiting for its job to finish) polls before it sleeps. The
// parallel loops of one call come in quick succession (a concatenate, a product, a reduction),
// and so do the calls of a training loop: a worker still polling starts the next one at once,
// where waking a sleeping thread costs a futex call on each side (and, in a VM, an interrupt
// to the other CPU, which the host may have descheduled). 1 ms, as OpenMP runtimes spin by
// default: the MLP's median call went from 2.1 ms (100 us) to 1.7 ms (docs/backend.md).
// REFJIT_POOL_SPIN_US sets it in microseconds (0: sleep at once, for a process that shares
// its cores with others).
std::chrono::microseconds poll_before_sleeping() {
  static const std::chrono::microseconds us = [] {
    if (const char* env = std::getenv("REFJIT_POOL_SPIN_US")) {
      char* end = nullptr;
      const long v = std::strtol(env, &end, 10);
      if (end != env && *end == '\0' && v >= 0)
        return std::chrono::microseconds(std::min(v, 1000000L));
    }
    return std::chrono::microseconds(1000);
  }();
  return us;
}

void pause_briefly() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls `ready` until it holds or poll_before_sleeping() has passed; returns whether it held.
// Between rounds of pauses, a thread that shares its CPU with the thread it waits for
// (`shares_cpu()`: a worker holding a task, or the caller about to publish a job) offers it
// the CPU. Without that, the Newton iteration of the peer benchmark took 11.5 ms with one
// other process busy, against 9.4 ms on one thread; with it, 9.3 ms (quiet: 5.0 ms either
// way). Only then: the scheduler (EEVDF, Linux 6.6 on) pushes a yielding thread's deadline
// back a whole time slice per yield, so a worker that yielded to an unrelated process while
// it polled for the next job ran late once the job came, at a quarter of a CPU beside one
// spinning process (docs/backend.md).
template <class Ready, class SharesCpu>
bool poll(Ready ready, SharesCpu shares_cpu) {
  const auto until = std::chrono::steady_clock::now() + poll_before_sleeping();
  do {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      pause_briefly();
    }
    if (shares_cpu()) std::this_thread::yield();
  } while (std::chrono::steady_clock::now() < until);
  return ready();
}

// A job is `count` tasks. The caller publishes it and runs tasks itself; workers join when
// they notice it. A task is claimed from `ticket_`, which holds the job's number in its high
// half and the next task index in its low half, by compare-and-swap: a worker that wakes late,
// after the job is done or another has begun, fails the swap and touches nothing. The caller
// waits for the tasks to be *done* (`done_`), never for the workers to check in: on a busy
// machine a worker the OS has not scheduled yet costs nothing, as the caller takes its share
// (it only waits for tasks a worker claimed and is running). Every task runs once, so the
// results are the same whoever runs which.
class Pool {
 public:
  explicit Pool(int threads) : cpus_(static_cast<size_t>(threads)) {
    for (std::atomic<int>& cpu : cpus_) cpu.store(-1, std::memory_order_relaxed);
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  // Never destroyed: worker threads may outlive static destruction order otherwise.
  ~Pool() = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // `mode`: parallel, probe or long_in_serial (mode()).
  void run(int64_t n, const std::function<void(int64_t)>& task, PoolSchedule::Mode mode) {
    std::unique_lock<std::mutex> submit(submit_, std::try_to_lock);
    if (!submit.owns_lock() || n >= kIndexLimit) return serial(n, task);
    const uint64_t job = (generation_.load(std::memory_order_relaxed) + 1) & kJobMask;
    // The ticket is closed to the previous job first (index past any count), so a worker
    // still trying to claim one of its tasks fails; the job's fields are written before the
    // ticket opens (release), and a worker reads them after its claim (acquire).
    ticket_.store(job << 32 | kJobMask, std::memory_order_release);
    task_.store(&task, std::memory_order_relaxed);
    count_.store(n, std::memory_order_relaxed);
    float_mode_.store(current_float_mode(), std::memory_order_relaxed);  // as the caller
    done_.store(0, std::memory_order_relaxed);
    cpus_[0].store(sched_getcpu(), std::memory_order_relaxed);
    ticket_.store(job << 32, std::memory_order_release);
    bool anyone_asleep = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      generation_.store(job, std::memory_order_release);
      anyone_asleep = sleeping_ > 0;
      unwoken_.store(0, std::memory_order_relaxed);  // those are woken now
    }
    if (anyone_asleep) wake_.notify_all();
    const auto start = std::chrono::steady_clock::now();
    t_inside_task = true;
    const int64_t own_tasks = run_tasks(job, /*as_caller=*/true);
    t_inside_task = false;
    const auto own_done = std::chrono::steady_clock::now();
    if (!poll([&] { return done_.load(std::memory_order_acquire) == n; },
              [&] { return on_a_workers_cpu(); })) {
      std::unique_lock<std::mutex> lock(mutex_);
      finished_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == n; });
    }
    const auto ended = std::chrono::steady_clock::now();
    schedule_.record({.own_share = own_done - start,
                      .waited = ended - own_done,
                      .caller_ran_all = own_tasks == n,
                      .probing = mode == PoolSchedule::Mode::probe,
                      .workers_started = started_.load(std::memory_order_acquire) == size() - 1,
                      .long_in_serial = mode == PoolSchedule::Mode::long_in_serial,
                      .ended = ended});
  }

  // Whether the next job runs in parallel, as a probe or serially (pool_schedule.h).
  PoolSchedule::Mode mode(bool long_job) {
    const auto now = std::chrono::steady_clock::now();
    return schedule_.next(long_job, now, machine_full(now));
  }
  int tasks_per_thread() const { return schedule_.tasks_per_thread(); }

  static void serial(int64_t n, const std::function<void(int64_t)>& task) {
    for (int64_t i = 0; i < n; ++i) task(i);
  }

 private:
  static constexpr uint64_t kJobMask = 0xffffffffu;
  static constexpr int64_t kIndexLimit = int64_t{1} << 31;
  static constexpr std::chrono::milliseconds kLoadSampleEvery{10};

  // Claims and runs tasks of `job` until none are left (or another job has begun); returns
  // how many it ran.
  int64_t run_tasks(uint64_t job, bool as_caller) {
    int64_t ran = 0;
    uint64_t t = ticket_.load(std::memory_order_acquire);
    while ((t >> 32) == job) {
      const int64_t i = static_cast<int64_t>(t & kJobMask);
      const int64_t n = count_.load(std::memory_order_relaxed);
      if (i >= n) return ran;
      if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel,
                                         std::memory_order_acquire))
        continue;  // t now holds the current ticket
      const std::function<void(int64_t)>& task = *task_.load(std::memory_order_relaxed);
      if (as_caller) {
        task(i);
      } else {
        ScopedFloatMode as_the_caller(float_mode_.load(std::memory_order_relaxed));
        task(i);
      }
      ++ran;
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
        std::lock_guard<std::mutex> lock(mutex_);  // the caller may be about to sleep
        finished_.notify_one();
        return ran;
      }
      t = ticket_.load(std::memory_order_acquire);
    }
    return ran;
  }

  // Whether threads other than the pool's keep every CPU busy (machine_load.h), from samples
  // taken at most every kLoadSampleEvery.
  bool machine_full(std::chrono::steady_clock::time_point now) {
    if (now.time_since_epoch().count() < next_load_sample_.load(std::memory_order_relaxed))
      return machine_full_.load(std::memory_order_relaxed);
    next_load_sample_.store((now + kLoadSampleEvery).time_since_epoch().count(),
                            std::memory_order_relaxed);
    bool full = false;
    if (const std::optional<int> runnable = runnable_threads_on_machine()) {
      // The pool's workers count as runnable unless asleep and not woken: they poll for a job,
      // run tasks, or wait for a CPU after a wake-up.
      const int ours = size() - unwoken_.load(std::memory_order_relaxed);
      full = full_machine_.record(*runnable - ours, online_cpus());
    }
    machine_full_.store(full, std::memory_order_relaxed);
    return full;
  }

  bool on_a_workers_cpu() const {
    const int cpu = sched_getcpu();
    for (size_t i = 1; i < cpus_.size(); ++i)
      if (cpus_[i].load(std::memory_order_relaxed) == cpu) return true;
    return false;
  }

  // Worker `index` (the caller is 0): if it shares a CPU with another of the pool's threads,
  // it moves to one none of them is on (cpu_placement.h), then notes where it runs.
  void keep_own_cpu(int index, const cpu_set_t& allowed, std::vector<int>& others) {
    others.clear();
    for (size_t i = 0; i < cpus_.size(); ++i)
      if (static_cast<int>(i) != index) others.push_back(cpus_[i].load(std::memory_order_relaxed));
    if (auto cpus = cpus_to_move_to(allowed, sched_getcpu(), others))
      move_calling_thread(*cpus, allowed);
    cpus_[index].store(sched_getcpu(), std::memory_order_relaxed);
  }

  void work(int index) {
    t_inside_task = true;
    started_.fetch_add(1, std::memory_order_release);
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    const bool may_move = sched_getaffinity(0, sizeof(allowed), &allowed) == 0;
    std::vector<int> others;
    others.reserve(cpus_.size());
    uint64_t seen = 0;
    while (true) {
      auto published = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!poll(published,
                [&] { return sched_getcpu() == cpus_[0].load(std::memory_order_relaxed); })) {
        std::unique_lock<std::mutex> lock(mutex_);
        ++sleeping_;
        if (!published()) {
          unwoken_.fetch_add(1, std::memory_order_relaxed);
          wake_.wait(lock, published);  // the job that ends this wait zeroed unwoken_
        }
        --sleeping_;
      }
      seen = generation_.load(std::memory_order_acquire);
      if (may_move) keep_own_cpu(index, allowed, others);
      (void)run_tasks(seen, /*as_caller=*/false);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex submit_;  // one job at a time
  std::mutex mutex_;   // for sleeping and waking only
  std::condition_variable wake_, finished_;
  std::atomic<uint64_t> generation_{0};  // the latest job's number
  int sleeping_ = 0;                     // workers waiting on wake_ (under mutex_)
  std::atomic<int> unwoken_{0};          // of them, those no job has woken (changed under mutex_)
  std::atomic<uint64_t> ticket_{0};      // job << 32 | next task index
  std::atomic<const std::function<void(int64_t)>*> task_{nullptr};
  std::atomic<int64_t> count_{0};
  std::atomic<uint32_t> float_mode_{0};
  std::atomic<int64_t> done_{0};  // tasks of the current job finished
  PoolSchedule schedule_;
  std::atomic<int> started_{0};  // worker threads that have begun work()
  std::atomic<std::chrono::steady_clock::rep> next_load_sample_{0};  // machine_full()
  std::atomic<bool> machine_full_{false};
  FullMachine full_machine_;
  // The CPU each thread was last seen on when a job began (the caller's first, -1 before).
  std::vector<std::atomic<int>> cpus_;
};

std::atomic<Pool*> g_pool{nullptr};
std::once_flag g_atfork_once;

Pool& pool() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p) return *p;
  // A forked child has none of the parent's workers: it starts a pool of its own.
  std::call_once(g_atfork_once,
                 [] { pthread_atfork(nullptr, nullptr, [] { g_pool.store(nullptr); }); });
  static std::mutex create;
  std::lock_guard<std::mutex> lock(create);
  p = g_pool.load();
  if (!p) {
    p = new Pool(configured_threads());  // lives for the process (see ~Pool)
    g_pool.store(p, std::memory_order_release);
  }
  return *p;
}

}  // namespace

int thread_count() {
  static const int n = configured_threads();
  return n;
}

namespace {
std::atomic<int> g_forced_tasks_per_thread{0};  // 0: none (ScopedTasksPerThread)
}  // namespace

int tasks_per_thread() {
  if (const int forced = g_forced_tasks_per_thread.load(std::memory_order_relaxed)) return forced;
  if (thread_count() == 1) return 1;
  return pool().tasks_per_thread();
}

ScopedTasksPerThread::ScopedTasksPerThread(int n)
    : previous_(g_forced_tasks_per_thread.exchange(std::max(n, 1))) {}
ScopedTasksPerThread::~ScopedTasksPerThread() { g_forced_tasks_per_thread.store(previous_); }

void parallel_for(int64_t n, const std::function<void(int64_t)>& task, JobLength length) {
  if (n <= 1 || thread_count() == 1 || t_inside_task) return Pool::serial(n, task);
  Pool& p = pool();
  const PoolSchedule::Mode mode = p.mode(length == JobLength::milliseconds);
  if (mode == PoolSchedule::Mode::serial) return Pool::serial(n, task);
  p.run(n, task, mode);
}

}  // namespace refjit::kernels
