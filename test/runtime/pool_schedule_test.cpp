// When the worker pool runs jobs in parallel (runtime/kernels/pool_schedule.h), on made-up
// timings: straggling workers make it serial, a good probe makes it parallel again, and
// probes that tell nothing are repeated at once, so a program whose calls repeat a short job
// and a long one leaves serial mode on a machine that has become quiet.
#include "runtime/kernels/pool_schedule.h"

#include <gtest/gtest.h>

namespace refjit::kernels {
namespace {

using std::chrono::microseconds;
using Mode = PoolSchedule::Mode;

PoolSchedule::Outcome job(int own_us, int waited_us, bool caller_ran_all, bool probing) {
  return {microseconds(own_us), microseconds(waited_us), caller_ran_all, probing, true};
}

// Four jobs whose caller waited long for a worker: the schedule turns serial.
void make_serial(PoolSchedule& s) {
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(s.next(), Mode::parallel);
    s.record(job(500, 2000, false, false));
  }
}

TEST(PoolSchedule, StartsParallelAndTurnsSerialWhenWorkersStraggle) {
  PoolSchedule s;
  make_serial(s);
  EXPECT_NE(s.next(), Mode::parallel);
}

TEST(PoolSchedule, JobsThatKeepUpStayParallel) {
  PoolSchedule s;
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(s.next(), Mode::parallel);
    s.record(job(800, 30, false, false));
  }
}

TEST(PoolSchedule, ShortJobsAndJobsBeforeTheWorkersStartTellNothing) {
  PoolSchedule s;
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(s.next(), Mode::parallel);
    s.record(job(20, 60, true, false));  // 80 us in all: over before a worker could join
  }
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(s.next(), Mode::parallel);
    PoolSchedule::Outcome first = job(2000, 0, true, false);
    first.workers_started = false;  // a thread that had not begun yet
    s.record(first);
  }
}

TEST(PoolSchedule, SerialModeProbesEveryThirtySecondJobAndAGoodProbeEndsIt) {
  PoolSchedule s;
  make_serial(s);
  int serial_jobs = 0;
  Mode m = s.next();  // the first serial job is a probe
  ASSERT_EQ(m, Mode::probe);
  s.record(job(900, 2000, false, true));  // the workers still straggle
  while ((m = s.next()) == Mode::serial) ++serial_jobs;
  EXPECT_EQ(m, Mode::probe);
  EXPECT_EQ(serial_jobs, static_cast<int>(PoolSchedule::kProbeEvery) - 1);
  // One probe whose workers kept up brings back parallel jobs.
  s.record(job(900, 20, false, true));
  EXPECT_EQ(s.next(), Mode::parallel);
}

// Calls that each run a short job and a long one: the probes must not keep landing on the
// short one. (Probes every 32nd job did: 32 is even, so a probe was always the short job, and
// the pool stayed serial after one busy moment.)
TEST(PoolSchedule, ProbesThatTellNothingAreRepeatedSoARepeatingShortJobCannotHideTheLongOne) {
  PoolSchedule s;
  make_serial(s);
  bool parallel_again = false;
  for (int call = 0; call < 200 && !parallel_again; ++call) {
    // The short job.
    Mode m = s.next();
    if (m == Mode::parallel) parallel_again = true;
    if (m == Mode::probe) s.record(job(10, 0, true, true));
    // The long job, which the workers now keep up with.
    m = s.next();
    if (m == Mode::parallel) parallel_again = true;
    if (m == Mode::probe) s.record(job(800, 20, false, true));
  }
  EXPECT_TRUE(parallel_again);
}

// A probe the caller ran alone (the workers were asleep) tells nothing either; a run of such
// probes then waits kProbeEvery jobs again instead of probing every job.
TEST(PoolSchedule, AfterAFewProbesThatToldNothingTheScheduleWaitsAgain) {
  PoolSchedule s;
  make_serial(s);
  int probes_in_a_row = 0;
  while (s.next() == Mode::probe) {
    ++probes_in_a_row;
    s.record(job(900, 0, true, true));
  }
  EXPECT_EQ(probes_in_a_row, PoolSchedule::kProbesInARow);
  int serial_jobs = 1;  // the job that ended the loop
  while (s.next() == Mode::serial) ++serial_jobs;
  EXPECT_EQ(serial_jobs, static_cast<int>(PoolSchedule::kProbeEvery) - 1);
}

// Jobs that divide their work themselves make more parts per thread after a job whose workers
// straggled, for kUnevenJobs jobs that keep up, so that the threads that run at full speed
// take the parts of one that does not; short jobs tell nothing and change nothing.
TEST(PoolSchedule, AfterAStraggledJobJobsSplitFinerForAWhile) {
  PoolSchedule s;
  EXPECT_EQ(s.tasks_per_thread(), 1);
  s.record(job(800, 20, false, false));
  EXPECT_EQ(s.tasks_per_thread(), 1);
  s.record(job(500, 2000, false, false));
  EXPECT_EQ(s.tasks_per_thread(), PoolSchedule::kTasksPerThreadWhenUneven);
  EXPECT_GT(PoolSchedule::kTasksPerThreadWhenUneven, 1);
  for (int i = 0; i < 100; ++i) s.record(job(20, 60, false, false));  // too short to tell
  EXPECT_EQ(s.tasks_per_thread(), PoolSchedule::kTasksPerThreadWhenUneven);
  for (int i = 0; i + 1 < PoolSchedule::kUnevenJobs; ++i) s.record(job(800, 20, false, false));
  EXPECT_EQ(s.tasks_per_thread(), PoolSchedule::kTasksPerThreadWhenUneven);
  s.record(job(800, 20, false, false));
  EXPECT_EQ(s.tasks_per_thread(), 1);
}

}  // namespace
}  // namespace refjit::kernels
