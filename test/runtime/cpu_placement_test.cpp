// Keeping the pool's threads on different CPUs (runtime/kernels/cpu_placement.h): which CPUs a
// thread that shares one should move to, and that moving a thread puts it there and leaves it
// free to run anywhere it was allowed to before.
#include "runtime/kernels/cpu_placement.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <thread>
#include <vector>

namespace refjit::kernels {
namespace {

cpu_set_t cpus(std::initializer_list<int> list) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : list) CPU_SET(cpu, &set);
  return set;
}

std::vector<int> members(const cpu_set_t& set) {
  std::vector<int> out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) out.push_back(cpu);
  return out;
}

TEST(CpuPlacement, AThreadAloneOnItsCpuStays) {
  const std::vector<int> others = {1, 2};
  EXPECT_FALSE(cpus_to_move_to(cpus({0, 1, 2, 3}), 0, others).has_value());
}

TEST(CpuPlacement, AThreadOnAnotherThreadsCpuMovesToTheCpusNoneIsOn) {
  // Two CPUs, the caller and the worker both on CPU 0 (the other busy with other work).
  const std::vector<int> caller = {0};
  const auto two = cpus_to_move_to(cpus({0, 1}), 0, caller);
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(members(*two), std::vector<int>{1});
  // Four CPUs: threads seen on 0, 2 and (this one, sharing) 2; not seen yet (-1).
  const std::vector<int> seen = {0, 2, -1};
  const auto four = cpus_to_move_to(cpus({0, 1, 2, 3}), 2, seen);
  ASSERT_TRUE(four.has_value());
  EXPECT_EQ(members(*four), (std::vector<int>{1, 3}));
}

TEST(CpuPlacement, NoMoveWhenEveryAllowedCpuHoldsAThreadOrTheCpuIsUnknown) {
  const std::vector<int> others = {0, 1};
  EXPECT_FALSE(cpus_to_move_to(cpus({0, 1}), 1, others).has_value());
  EXPECT_FALSE(cpus_to_move_to(cpus({0, 1}), -1, std::vector<int>{-1}).has_value());
}

TEST(CpuPlacement, AMovedThreadRunsThereAndKeepsItsMask) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  const std::vector<int> usable = members(allowed);
  if (usable.size() < 2) GTEST_SKIP() << "needs two CPUs";
  // In a thread of its own, so that this one's mask is not touched.
  int ran_on = -1;
  cpu_set_t mask_after;
  std::thread([&] {
    ASSERT_TRUE(move_calling_thread(cpus({usable.back()}), allowed));
    ran_on = sched_getcpu();
    sched_getaffinity(0, sizeof(mask_after), &mask_after);
  }).join();
  EXPECT_EQ(ran_on, usable.back());
  EXPECT_TRUE(CPU_EQUAL(&mask_after, &allowed));
}

}  // namespace
}  // namespace refjit::kernels
