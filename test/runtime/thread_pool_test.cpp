// The worker pool (runtime/kernels/thread_pool.h): every task of every job runs exactly once,
// whoever runs it, also while other threads compete for the cores, while a second thread
// submits jobs of its own, and when workers wake long after a job was published.
#include "runtime/kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace refjit::kernels {
namespace {

// Runs `jobs` jobs of varied sizes and checks each index of each ran once.
void run_jobs(int jobs, int salt, JobLength length = JobLength::short_or_unknown) {
  for (int j = 0; j < jobs; ++j) {
    const int64_t n = 1 + (j * 7 + salt) % 37;
    std::vector<std::atomic<int>> ran(static_cast<size_t>(n));
    parallel_for(
        n, [&](int64_t i) { ran[static_cast<size_t>(i)].fetch_add(1); }, length);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(ran[static_cast<size_t>(i)].load(), 1) << "job " << j << " task " << i;
  }
}

TEST(ThreadPool, EveryTaskRunsOnceInManyQuickJobs) { run_jobs(20000, 0); }

TEST(ThreadPool, EveryTaskRunsOnceWhileOtherThreadsKeepTheCoresBusy) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int k = 0; k < 2; ++k)
    busy.emplace_back([&] {
      volatile uint64_t x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
  // Said to be long: short jobs would run serially while the spinning threads fill the CPUs.
  run_jobs(5000, 3, JobLength::milliseconds);
  stop = true;
  for (auto& t : busy) t.join();
}

TEST(ThreadPool, TwoSubmittingThreadsEachGetTheirTasksRun) {
  std::thread other([] { run_jobs(5000, 5); });
  run_jobs(5000, 11);
  other.join();
}

TEST(ThreadPool, SlowTasksAndNestedCallsRunOnce) {
  // Tasks long enough for every worker to take part; a nested parallel_for runs serially.
  std::vector<std::atomic<int>> ran(64);
  parallel_for(8, [&](int64_t t) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    parallel_for(8, [&](int64_t i) { ran[static_cast<size_t>(t * 8 + i)].fetch_add(1); });
  });
  for (auto& r : ran) EXPECT_EQ(r.load(), 1);
}

}  // namespace
}  // namespace refjit::kernels
