// Keeping the pool's threads (thread_pool.h) on different CPUs. On a machine whose other work
// keeps one CPU busy, the scheduler tends to leave two of the pool's threads on one CPU and
// the other work alone on the next: it sees two busy CPUs either way, so it has no reason to
// move anything, and the pool runs at one CPU's speed. A worker that finds itself on the same
// CPU as another of the pool's threads moves to a CPU none of them is on: the pool then has
// one CPU to itself and shares the other, and splitting its jobs into more tasks than threads
// (PoolSchedule::tasks_per_thread) lets the thread that has a CPU to itself do more of them.
// Measured on two CPUs with one other process spinning: a 1024 x 1024 product went from
// 22-24 ms (a thread's speed) to 16.5-19.6 ms (docs/backend.md).
#pragma once

#include <sched.h>

#include <optional>
#include <span>

namespace refjit::kernels {

// The CPUs of `allowed` that a thread running on `own_cpu` should move to, when it shares that
// CPU with one of `others` (the CPUs the pool's other threads were last seen on; -1 for one
// not seen yet): the allowed CPUs none of them is on. Nothing when it shares no CPU, or when
// every allowed CPU holds one of them.
std::optional<cpu_set_t> cpus_to_move_to(const cpu_set_t& allowed, int own_cpu,
                                         std::span<const int> others);

// Moves the calling thread onto one of `cpus`, then lets it run anywhere in `allowed` again
// (it stays where it was moved until the scheduler has a reason to move it). Returns whether
// the system allowed it.
bool move_calling_thread(const cpu_set_t& cpus, const cpu_set_t& allowed);

}  // namespace refjit::kernels
