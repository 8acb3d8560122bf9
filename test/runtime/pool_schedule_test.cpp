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

// The made-up time at which every job of these tests runs, except where a test moves it.
const PoolSchedule::Clock::time_point kNow =
    PoolSchedule::Clock::time_point{} + std::chrono::hours(1);

PoolSchedule::Outcome job(int own_us, int waited_us, bool caller_ran_all, bool probing) {
  return {
      microseconds(own_us), microseconds(waited_us), caller_ran_all, probing, true, false, kNow};
}

// The mode of the next job, a short one, at kNow.
Mode next(PoolSchedule& s) { return s.next(false, kNow); }

// Four jobs whose caller waited long for a worker: the schedule turns serial.
void make_serial(PoolSchedule& s) {
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(next(s), Mode::parallel);
    s.record(job(500, 900, false, false));
  }
}

TEST(PoolSchedule, StartsParallelAndTurnsSerialWhenWorkersStraggle) {
  PoolSchedule s;
  make_serial(s);
  EXPECT_NE(next(s), Mode::parallel);
}

TEST(PoolSchedule, JobsThatKeepUpStayParallel) {
  PoolSchedule s;
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(next(s), Mode::parallel);
    s.record(job(800, 30, false, false));
  }
}

TEST(PoolSchedule, ShortJobsAndJobsBeforeTheWorkersStartTellNothing) {
  PoolSchedule s;
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(next(s), Mode::parallel);
    s.record(job(20, 60, true, false));  // 80 us in all: over before a worker could join
  }
  for (int i = 0; i < 50; ++i) {
    ASSERT_EQ(next(s), Mode::parallel);
    PoolSchedule::Outcome first = job(2000, 0, true, false);
    first.workers_started = false;  // a thread that had not begun yet
    s.record(first);
  }
}

TEST(PoolSchedule, SerialModeProbesEveryThirtySecondJobAndAGoodProbeEndsIt) {
  PoolSchedule s;
  make_serial(s);
  int serial_jobs = 0;
  Mode m = next(s);  // the first serial job is a probe
  ASSERT_EQ(m, Mode::probe);
  s.record(job(900, 950, false, true));  // the workers still straggle
  while ((m = next(s)) == Mode::serial) ++serial_jobs;
  EXPECT_EQ(m, Mode::probe);
  EXPECT_EQ(serial_jobs, static_cast<int>(PoolSchedule::kProbeEvery) - 1);
  // One probe whose workers kept up brings back parallel jobs.
  s.record(job(900, 20, false, true));
  EXPECT_EQ(next(s), Mode::parallel);
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
    Mode m = next(s);
    if (m == Mode::parallel) parallel_again = true;
    if (m == Mode::probe) s.record(job(10, 0, true, true));
    // The long job, which the workers now keep up with.
    m = next(s);
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
  while (next(s) == Mode::probe) {
    ++probes_in_a_row;
    s.record(job(900, 0, true, true));
  }
  EXPECT_EQ(probes_in_a_row, PoolSchedule::kProbesInARow);
  int serial_jobs = 1;  // the job that ended the loop
  while (next(s) == Mode::serial) ++serial_jobs;
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
  s.record(job(500, 900, false, false));
  EXPECT_EQ(s.tasks_per_thread(), PoolSchedule::kTasksPerThreadWhenUneven);
  EXPECT_GT(PoolSchedule::kTasksPerThreadWhenUneven, 1);
  for (int i = 0; i < 100; ++i) s.record(job(20, 60, false, false));  // too short to tell
  EXPECT_EQ(s.tasks_per_thread(), PoolSchedule::kTasksPerThreadWhenUneven);
  for (int i = 0; i + 1 < PoolSchedule::kUnevenJobs; ++i) s.record(job(800, 20, false, false));
  EXPECT_EQ(s.tasks_per_thread(), PoolSchedule::kTasksPerThreadWhenUneven);
  s.record(job(800, 20, false, false));
  EXPECT_EQ(s.tasks_per_thread(), 1);
}

// A job that waited `waited_us` for a worker and ended at `ended`.
PoolSchedule::Outcome job_ending(int waited_us, PoolSchedule::Clock::time_point ended) {
  PoolSchedule::Outcome o = job(120, waited_us, false, false);
  o.ended = ended;
  return o;
}

// Two waits of milliseconds for a worker (the OS took it off its CPU while it held a task)
// within kDescheduledWindow make jobs serial at once, with no probe for
// kSerialAfterDescheduled.
TEST(PoolSchedule, AWorkerTakenOffItsCpuTwiceMakesJobsSerialForAWhile) {
  PoolSchedule s;
  ASSERT_EQ(next(s), Mode::parallel);
  s.record(job_ending(3000, kNow - PoolSchedule::kDescheduledWindow / 2));
  ASSERT_EQ(next(s), Mode::parallel);  // one alone does not
  s.record(job_ending(1500, kNow));
  for (int i = 0; i < 500; ++i) ASSERT_EQ(next(s), Mode::serial);
  const auto later = kNow + PoolSchedule::kSerialAfterDescheduled;
  EXPECT_EQ(s.next(false, later - microseconds(1)), Mode::serial);
  EXPECT_EQ(s.next(false, later), Mode::probe);
}

// Waits for a descheduled worker further apart than kDescheduledWindow (a VM's host taking
// a CPU now and then), between jobs that keep up, leave the jobs parallel.
TEST(PoolSchedule, LoneWaitsForADescheduledWorkerLeaveJobsParallel) {
  PoolSchedule s;
  auto t = kNow;
  for (int event = 0; event < 20; ++event) {
    s.record(job_ending(4000, t));
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ(next(s), Mode::parallel) << "event " << event << " job " << i;
      s.record(job(200, 30, false, false));
    }
    t += PoolSchedule::kDescheduledWindow * 3;
  }
}

// Long jobs stay parallel while short ones run serially; how they go does not end serial mode
// (it says nothing of the short jobs), but does set how finely products split.
TEST(PoolSchedule, LongJobsStayParallelWhileShortOnesRunSerially) {
  PoolSchedule s;
  make_serial(s);
  EXPECT_EQ(s.next(true, kNow), Mode::long_in_serial);
  PoolSchedule::Outcome kept_up = job(8000, 100, false, false);
  kept_up.long_in_serial = true;
  for (int i = 0; i < 100; ++i) s.record(kept_up);
  EXPECT_EQ(s.tasks_per_thread(), 1);
  EXPECT_NE(next(s), Mode::parallel);
  PoolSchedule::Outcome straggled = job(8000, 6000, false, false);
  straggled.long_in_serial = true;
  s.record(straggled);
  EXPECT_EQ(s.tasks_per_thread(), PoolSchedule::kTasksPerThreadWhenUneven);
}

// While other work fills every CPU, short jobs run serially from the first, and are no
// probes: the next job on a machine with a free CPU is parallel at once. Long jobs still run
// in parallel.
TEST(PoolSchedule, ShortJobsRunSeriallyWhileTheMachineIsFull) {
  PoolSchedule s;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(s.next(false, kNow, /*machine_full=*/true), Mode::serial);
  EXPECT_EQ(s.next(true, kNow, /*machine_full=*/true), Mode::parallel);
  EXPECT_EQ(s.next(false, kNow, /*machine_full=*/false), Mode::parallel);
  make_serial(s);  // and while the workers straggle too, long jobs keep their mode
  EXPECT_EQ(s.next(true, kNow, /*machine_full=*/true), Mode::long_in_serial);
  EXPECT_EQ(s.next(false, kNow, /*machine_full=*/true), Mode::serial);
}

}  // namespace
}  // namespace refjit::kernels
