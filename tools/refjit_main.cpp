// The `refjit` command-line tool (docs/cli.md): dispatches to one command and maps every
// outcome to an exit code. Nothing escapes main: 0 success, 1 program/value error,
// 2 usage error, 3 internal error.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "refjit/ir/error.h"
#include "tools/cli_options.h"
#include "tools/commands.h"
#include "tools/program.h"
#include "tools/timings.h"
#include "tools/values.h"

namespace {

using namespace refjit;
using namespace refjit::cli;

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInternal = 3;

int print_usage_error(const UsageError& e) {
  fmt::print(stderr, "refjit: error: {}\n", e.what());
  if (e.command())
    fmt::print(stderr, "Run `refjit {} --help` for usage.\n", command_name(*e.command()));
  else
    fmt::print(stderr, "Run `refjit --help` for usage.\n");
  return kExitUsage;
}

// Errors in the program or the values. A ParseError already reads "FILE:LINE:COL: error: ...";
// other errors in the program (types, refs, execution) are prefixed with its file; errors
// about the command line's values, the input file itself or a missing feature with "refjit".
int print_error(const Error& e, const std::string& source_name) {
  std::string_view what = e.what();
  bool located = dynamic_cast<const ParseError*>(&e) ||
                 (!source_name.empty() && what.starts_with(source_name + ":"));
  if (located) {
    fmt::print(stderr, "{}\n", what);
  } else if (dynamic_cast<const ValueError*>(&e) || dynamic_cast<const InputError*>(&e) ||
             dynamic_cast<const NotAvailable*>(&e) || source_name.empty()) {
    fmt::print(stderr, "refjit: error: {}\n", e.what());
  } else {
    fmt::print(stderr, "{}: error: {}\n", source_name, e.what());
  }
  return kExitError;
}

int dispatch(const Options& o, std::string& source_name) {
  source_name = o.file == "-" ? "<stdin>" : o.file;
  StageTimings timings;
  int rc = kExitOk;
  switch (o.command) {
    case Command::dump: rc = dump_command(o, timings); break;
    case Command::run: rc = run_command(o, timings); break;
    case Command::bench: rc = bench_command(o, timings); break;
    case Command::compile:
      source_name.clear();
      rc = compile_command(o);
      break;
  }
  if (o.timings) timings.print(stderr);
  return rc;
}

int main_impl(int argc, char** argv) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  std::string source_name;
  try {
    Invocation inv = parse_command_line(args);
    if (const auto* help = std::get_if<HelpRequest>(&inv)) {
      fmt::print("{}", help_text(help->command));
      return kExitOk;
    }
    if (std::holds_alternative<VersionRequest>(inv)) {
      fmt::print("refjit {}\n", REFJIT_VERSION_STRING);
      return kExitOk;
    }
    return dispatch(std::get<Options>(inv), source_name);
  } catch (const UsageError& e) {
    return print_usage_error(e);
  } catch (const Error& e) {
    return print_error(e, source_name);
  } catch (const std::exception& e) {
    fmt::print(stderr, "internal error: {}\n", e.what());
    return kExitInternal;
  } catch (...) {
    fmt::print(stderr, "internal error: unknown exception\n");
    return kExitInternal;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Even printing the error may throw (e.g. a closed stderr): never let anything escape.
  try {
    int rc = main_impl(argc, argv);
    if (std::fflush(stdout) != 0) return rc == kExitOk ? kExitError : rc;
    return rc;
  } catch (...) {
    return kExitInternal;
  }
}
