#include "tools/timings.h"

#include <fmt/format.h>

namespace refjit::cli {

void StageTimings::print(std::FILE* out) const {
  double total = 0;
  for (const auto& [stage, ms] : stages_) {
    fmt::print(out, "timing: {:<18} {:10.3f} ms\n", stage, ms);
    total += ms;
  }
  fmt::print(out, "timing: {:<18} {:10.3f} ms\n", "total", total);
}

}  // namespace refjit::cli
