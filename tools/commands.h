// The `refjit` commands. Each takes the parsed options, writes its result to standard output
// and returns the exit code; errors are thrown and mapped to exit codes by main.
#pragma once

#include <string>
#include <string_view>

#include "refjit/ir/error.h"
#include "tools/cli_options.h"
#include "tools/timings.h"

namespace refjit::cli {

// An option or stage whose implementation is not part of this build yet. Exit code 1.
class NotAvailable : public Error {
 public:
  using Error::Error;
};

// Throws NotAvailable: "`what` is not available yet: it needs `needs`, which this build of
// refjit does not have".
[[noreturn]] void not_available(std::string_view what, std::string_view needs);

int dump_command(const Options& options, StageTimings& timings);
int run_command(const Options& options, StageTimings& timings);
int compile_command(const Options& options);
int bench_command(const Options& options, StageTimings& timings);

}  // namespace refjit::cli
