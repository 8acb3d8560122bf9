#include "runtime/kernels/machine_load.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

namespace refjit::kernels {

std::optional<int> runnable_threads_in_loadavg(std::string_view loadavg) {
  // Three load averages, then "runnable/total".
  size_t field = 0;
  for (int i = 0; i < 3; ++i) {
    field = loadavg.find(' ', field);
    if (field == std::string_view::npos) return std::nullopt;
    field = loadavg.find_first_not_of(' ', field);
    if (field == std::string_view::npos) return std::nullopt;
  }
  int runnable = 0;
  const char* begin = loadavg.data() + field;
  const char* end = loadavg.data() + loadavg.size();
  const auto [past, error] = std::from_chars(begin, end, runnable);
  if (error != std::errc() || past == begin || past == end || *past != '/') return std::nullopt;
  return runnable;
}

int online_cpus() {
  static const int n = [] {
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 0 ? static_cast<int>(cpus) : 1;
  }();
  return n;
}

std::optional<int> runnable_threads_on_machine() {
  // Opened once and read from its start each time: a read of /proc/loadavg takes about a
  // microsecond.
  static const int fd = [] {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) < online_cpus())
      return -1;
    return open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  }();
  if (fd < 0) return std::nullopt;
  char text[128];
  const ssize_t length = pread(fd, text, sizeof(text), 0);
  if (length <= 0) return std::nullopt;
  return runnable_threads_in_loadavg(std::string_view(text, static_cast<size_t>(length)));
}

bool FullMachine::record(int others, int cpus) {
  if (others < cpus) {
    full_samples_.store(0, std::memory_order_relaxed);
    return false;
  }
  const int in_a_row = full_samples_.load(std::memory_order_relaxed) + 1;
  full_samples_.store(std::min(in_a_row, kSamples), std::memory_order_relaxed);
  return in_a_row >= kSamples;
}

}  // namespace refjit::kernels
