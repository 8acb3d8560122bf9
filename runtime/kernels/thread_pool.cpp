#include "runtime/kernels/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
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

// Workers sleep on `wake` until a job is published (generation changes), take task
// indices from `next` until none are left, and count themselves out in `active`.
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
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      float_mode_ = current_float_mode();  // the workers compute as the caller does
      count_ = n;
      next_.store(0);
      active_ = static_cast<int>(workers_.size());
      ++generation_;
    }
    wake_.notify_all();
    drain();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return active_ == 0; });
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
      uint32_t mode = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        mode = float_mode_;
      }
      {
        ScopedFloatMode as_caller(mode);
        drain();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (--active_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex submit_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  const std::function<void(int64_t)>* task_ = nullptr;
  uint32_t float_mode_ = 0;
  int64_t count_ = 0;
  std::atomic<int64_t> next_{0};
  int active_ = 0;
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
