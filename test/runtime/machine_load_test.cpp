// Reading the machine's runnable threads (runtime/kernels/machine_load.h) from /proc/loadavg.
#include "runtime/kernels/machine_load.h"

#include <gtest/gtest.h>
#include <sched.h>

namespace refjit::kernels {
namespace {

TEST(MachineLoad, ReadsTheRunnableThreadsOfLoadavg) {
  EXPECT_EQ(runnable_threads_in_loadavg("0.52 0.58 0.59 3/1034 4321\n"), 3);
  EXPECT_EQ(runnable_threads_in_loadavg("12.00 8.10 4.25 117/2048 99"), 117);
  EXPECT_EQ(runnable_threads_in_loadavg("0.00  0.01 0.05 1/90 7"), 1);  // runs of spaces
}

TEST(MachineLoad, TextOfAnotherFormIsNotRead) {
  EXPECT_EQ(runnable_threads_in_loadavg(""), std::nullopt);
  EXPECT_EQ(runnable_threads_in_loadavg("0.52 0.58 0.59"), std::nullopt);
  EXPECT_EQ(runnable_threads_in_loadavg("0.52 0.58 0.59 3"), std::nullopt);
  EXPECT_EQ(runnable_threads_in_loadavg("0.52 0.58 0.59 x/10 4"), std::nullopt);
  EXPECT_EQ(runnable_threads_in_loadavg("0.52 0.58 0.59 /10 4"), std::nullopt);
}

// This process runs (it reads the file), so the machine has at least one runnable thread; a
// process kept to some of the CPUs gets no count (threads on the others do not take its CPUs).
TEST(MachineLoad, CountsThisProcessWhenItMayUseEveryCpu) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  const std::optional<int> runnable = runnable_threads_on_machine();
  if (CPU_COUNT(&allowed) < online_cpus()) {
    EXPECT_EQ(runnable, std::nullopt);
  } else {
    ASSERT_TRUE(runnable.has_value());
    EXPECT_GE(*runnable, 1);
  }
}

// The machine is full only after kSamples samples in a row count a thread per CPU; one
// sample with fewer starts the count again.
TEST(MachineLoad, AMachineIsFullAfterSeveralFullSamplesInARow) {
  FullMachine machine;
  for (int i = 1; i < FullMachine::kSamples; ++i) EXPECT_FALSE(machine.record(2, 2)) << i;
  EXPECT_TRUE(machine.record(3, 2));
  EXPECT_TRUE(machine.record(2, 2));
  EXPECT_FALSE(machine.record(1, 2));  // a CPU came free
  for (int i = 1; i < FullMachine::kSamples; ++i) EXPECT_FALSE(machine.record(5, 2)) << i;
  EXPECT_TRUE(machine.record(5, 2));
}

}  // namespace
}  // namespace refjit::kernels
