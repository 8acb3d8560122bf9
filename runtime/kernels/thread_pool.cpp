#include "runtime/kernels/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/kernels/float_mode.h"

namespace refjit::kernels {

namespace {

int configured_threads() {
  if (const char* env = std::getenv("REFJIT_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n >= 1) return std::min(n, 256);
  }
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
template <class Ready>
bool poll(Ready ready) {
  const auto until = std::chrono::steady_clock::now() + poll_before_sleeping();
  do {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      pause_briefly();
    }
  } while (std::chrono::steady_clock::now() < until);
  return ready();
}

// A job is published by bumping `generation_`; workers poll for it, then sleep on `wake_`,
// take task indices from `next_` until none are left, and count themselves out in `active_`.
class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  // Never destroyed: worker threads may outlive static destruction order otherwise.
  ~Pool() = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t n, const std::function<void(int64_t)>& task) {
    std::unique_lock<std::mutex> submit(submit_, std::try_to_lock);
    if (!submit.owns_lock()) return serial(n, task);  // another thread's job is running
    bool anyone_asleep = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      float_mode_ = current_float_mode();  // the workers compute as the caller does
      count_ = n;
      next_.store(0);
      active_.store(static_cast<int>(workers_.size()));
      generation_.fetch_add(1, std::memory_order_release);
      anyone_asleep = sleeping_ > 0;
    }
    if (anyone_asleep) wake_.notify_all();
    drain();
    if (!poll([&] { return active_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [&] { return active_.load() == 0; });
    }
    task_ = nullptr;
  }

  static void serial(int64_t n, const std::function<void(int64_t)>& task) {
    for (int64_t i = 0; i < n; ++i) task(i);
  }

 private:
  void drain() {
    t_inside_task = true;
    for (int64_t i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1)) (*task_)(i);
    t_inside_task = false;
  }

  void work() {
    uint64_t seen = 0;
    while (true) {
      auto published = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!poll(published)) {
        std::unique_lock<std::mutex> lock(mutex_);
        ++sleeping_;
        wake_.wait(lock, published);
        --sleeping_;
      }
      uint32_t mode = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);  // the job's fields were written under it
        seen = generation_.load();
        mode = float_mode_;
      }
      {
        ScopedFloatMode as_caller(mode);
        drain();
      }
      if (active_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex submit_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  int sleeping_ = 0;  // workers waiting on wake_ (under mutex_)
  const std::function<void(int64_t)>* task_ = nullptr;
  uint32_t float_mode_ = 0;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int> active_{0};
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

void parallel_for(int64_t n, const std::function<void(int64_t)>& task) {
  if (n <= 1 || thread_count() == 1 || t_inside_task) return Pool::serial(n, task);
  pool().run(n, task);
}

}  // namespace refjit::kernels
