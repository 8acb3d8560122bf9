// `refjit compile`: ahead-of-time object files. Not implemented yet (docs/cli.md).
// Also home of not_available(), the error every not-yet-built feature raises.
#include <fmt/format.h>

#include "tools/commands.h"

namespace refjit::cli {

void not_available(std::string_view what, std::string_view needs) {
  throw NotAvailable(
      fmt::format("{} is not available yet: it needs {}, which this build of refjit does not have",
                  what, needs));
}

int compile_command(const Options&) {
  throw NotAvailable(
      "`refjit compile` is not implemented yet; use `refjit run` to execute a program");
}

}  // namespace refjit::cli
