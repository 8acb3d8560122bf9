// `refjit bench --background-load=N`: N child processes that each keep a core busy while the
// calls are timed, so the figure for a machine shared with other work is reproducible.
#pragma once

#include <sys/types.h>

#include <vector>

namespace refjit::cli {

class BackgroundLoad {
 public:
  // Starts `processes` spinning children (none for 0). They run at the caller's priority.
  explicit BackgroundLoad(int processes);
  // Stops and reaps them.
  ~BackgroundLoad();
  BackgroundLoad(const BackgroundLoad&) = delete;
  BackgroundLoad& operator=(const BackgroundLoad&) = delete;

 private:
  void stop();
  std::vector<pid_t> children_;
};

}  // namespace refjit::cli
