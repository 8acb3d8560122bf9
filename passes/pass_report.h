// What a pass of the pipeline (driver/pipeline.h) reports when it is done.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace refjit {

// A pass's name, its wall time, and its printed form: made only when asked for, since
// printing MLIR or assembly is not free.
struct PassReport {
  std::string_view pass;
  double ms = 0;
  const std::function<std::string()>& text;
};

using PassObserver = std::function<void(const PassReport&)>;

}  // namespace refjit
