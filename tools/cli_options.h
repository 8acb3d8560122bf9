// Command-line parsing for the `refjit` tool (docs/cli.md). Pure: no I/O, no program access,
// so every usage rule lives here and nowhere else.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace refjit::cli {

enum class Command { dump, run, compile, bench };

std::string_view command_name(Command c);

// The views `dump --emit=STAGE` prints besides the pipeline's passes (driver/pipeline.h):
// the program as read, and the derived programs of forward and reverse mode.
bool is_program_view(std::string_view stage);  // jvp, linearize, vjp, discharged

struct Options;
// Whether the command differentiates the program (--grad, --jvp, --vjp, or dump --emit of an
// autodiff view).
bool differentiates(const Options& o);

struct Options {
  Command command = Command::run;
  std::string emit = "jaxpr";  // a view (jaxpr, jvp, linearize, vjp) or a pipeline pass
  bool print_after_all = false;
  bool verify_each = false;
  bool grad = false;
  std::optional<std::vector<int>> wrt;  // 0-based invar positions; nullopt = the default
  bool jvp = false;
  // --primal-derivatives: a custom_vjp whose rules the text lacks is differentiated through
  // its primal instead of refused (passes/jaxpr_util.h, accept_primal_derivatives).
  bool primal_derivatives = false;
  bool fail_on_copy = false;
  bool interpret = false;
  bool timings = false;
  bool exact_math = false;          // --exact-math: libm for every transcendental function
  std::string file;                 // a path, or "-" for standard input
  std::vector<std::string> values;  // the positional VALUEs after FILE (run and bench)

  // bench only (docs/cli.md "refjit bench").
  int runs = 20;                   // --runs=N timed calls
  int64_t min_time_ms = 0;         // --min-time=MS: more calls until they took this long
  int background_load = 0;         // --background-load=N: N spinning processes while timing
  std::string tier = "optimized";  // --tier=fast|optimized: LLVM -O0 or -O3
  uint64_t seed = 0;               // --seed=S for the random VALUEs not given
  bool json = false;               // --json: one JSON object instead of the text lines

  // compile only (docs/aot.md).
  std::string output;              // -o OUT.o
  std::string header;              // --header OUT.h ("" = no header)
  std::string name;                // --name SYMBOL ("" = the file's stem)
  std::string cpu = "host";        // --cpu=host|generic|NAME
  bool vjp = false;                // --vjp: SYMBOL_fwd + SYMBOL_bwd
  std::vector<std::string> accum;  // --accum=K,K,...: value | ref | dontwant, one per invar
};

// `refjit --help` (command unset) or `refjit COMMAND --help`.
struct HelpRequest {
  std::optional<Command> command;
};
struct VersionRequest {};

using Invocation = std::variant<Options, HelpRequest, VersionRequest>;

// A command-line usage error (exit code 2). `command` selects the help the message points to.
class UsageError : public std::runtime_error {
 public:
  UsageError(const std::string& message, std::optional<Command> command)
      : std::runtime_error(message), command_(command) {}
  const std::optional<Command>& command() const { return command_; }

 private:
  std::optional<Command> command_;
};

// Parses the arguments after argv[0]. Throws UsageError.
Invocation parse_command_line(std::span<const std::string> args);

// The text `--help` prints: the tool overview, or one command's usage and options.
std::string help_text(std::optional<Command> command);

}  // namespace refjit::cli
