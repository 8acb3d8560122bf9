#include "runtime/kernels/cpu_placement.h"

#include <algorithm>

namespace refjit::kernels {

std::optional<cpu_set_t> cpus_to_move_to(const cpu_set_t& allowed, int own_cpu,
                                         std::span<const int> others) {
  if (own_cpu < 0 || std::find(others.begin(), others.end(), own_cpu) == others.end())
    return std::nullopt;
  cpu_set_t unused = allowed;
  CPU_CLR(own_cpu, &unused);
  for (int cpu : others)
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_CLR(cpu, &unused);
  if (CPU_COUNT(&unused) == 0) return std::nullopt;
  return unused;
}

bool move_calling_thread(const cpu_set_t& cpus, const cpu_set_t& allowed) {
  // Setting the mask migrates the thread before the call returns; widening it again does not
  // move it back.
  if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0) return false;
  sched_setaffinity(0, sizeof(allowed), &allowed);
  return true;
}

}  // namespace refjit::kernels
