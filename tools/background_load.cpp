#include "tools/background_load.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "refjit/ir/error.h"

namespace refjit::cli {

BackgroundLoad::BackgroundLoad(int processes) {
  for (int k = 0; k < processes; ++k) {
    const pid_t pid = fork();
    if (pid < 0) {
      const int err = errno;
      stop();
      throw Error(fmt::format("--background-load: cannot start a process: {}", std::strerror(err)));
    }
    if (pid == 0) {
      // The child spins until the parent kills it; it dies with the parent too.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      volatile unsigned long spin = 0;
      for (;;) spin = spin + 1;
    }
    children_.push_back(pid);
  }
}

BackgroundLoad::~BackgroundLoad() { stop(); }

void BackgroundLoad::stop() {
  for (pid_t pid : children_) kill(pid, SIGKILL);
  for (pid_t pid : children_) waitpid(pid, nullptr, 0);
  children_.clear();
}

}  // namespace refjit::cli
