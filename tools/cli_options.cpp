#include "tools/cli_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <string_view>

#include "driver/pipeline.h"

namespace refjit::cli {

namespace {

constexpr std::string_view kCommandNames[] = {"dump", "run", "compile", "bench"};

// What the usage errors list, in the order `refjit --help` shows the commands.
constexpr std::string_view kCommandList = "dump, run, bench and compile";

// The views of the program as read that are not pipeline passes (tools/autodiff.h).
constexpr std::string_view kProgramViews[] = {"jvp", "linearize", "vjp", "discharged"};

std::optional<Command> command_from_name(std::string_view name) {
  for (size_t i = 0; i < std::size(kCommandNames); ++i)
    if (kCommandNames[i] == name) return static_cast<Command>(i);
  return std::nullopt;
}

// Which commands accept an option (a bit per Command that shares the option table).
enum CommandMask : unsigned { kDump = 1, kRun = 2, kBench = 4 };

constexpr unsigned mask_of(Command c) {
  switch (c) {
    case Command::dump: return kDump;
    case Command::run: return kRun;
    case Command::bench: return kBench;
    case Command::compile: break;  // parsed separately (parse_compile)
  }
  return 0;
}

// One option of the `dump`/`run`/`bench` table in CLI.md. `apply` receives the text after
// '=' (empty for a flag) and throws UsageError on a bad value.
struct OptionSpec {
  std::string_view name;  // without the leading "--"
  bool takes_value;
  std::string_view value_hint;  // "STAGE", "I,J,...": shown when the value is missing
  unsigned commands;            // CommandMask bits
  void (*apply)(Options& o, std::string_view value);
};

[[noreturn]] void usage_error(Command c, const std::string& message) {
  throw UsageError(message, c);
}

std::string parse_emit(Command c, std::string_view text) {
  if (text == "jaxpr" || is_program_view(text) || is_pipeline_pass(text)) return std::string(text);
  std::string names = "jaxpr, jvp, linearize, vjp, discharged";
  for (const PassInfo& p : pipeline_passes()) names += fmt::format(", {}", p.name);
  usage_error(c, fmt::format("unknown stage '{}' for --emit; the stages are {}", text, names));
}

std::vector<int> parse_wrt(Command c, std::string_view text) {
  std::vector<int> positions;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string_view item = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    int value = -1;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || value < 0)
      usage_error(c, fmt::format("--wrt takes 0-based invar positions separated by commas, "
                                 "like --wrt=0,2; '{}' is not a position",
                                 item));
    if (std::find(positions.begin(), positions.end(), value) != positions.end())
      usage_error(c, fmt::format("--wrt names position {} twice", value));
    positions.push_back(value);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return positions;
}

// A whole number in [lo, hi] given to --NAME.
uint64_t parse_count(Command c, std::string_view name, std::string_view text, int64_t lo,
                     int64_t hi) {
  int64_t value = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < lo ||
      value > hi)
    usage_error(c, fmt::format("--{} takes a whole number from {} to {}; '{}' is not one", name, lo,
                               hi, text));
  return static_cast<uint64_t>(value);
}

const OptionSpec kOptions[] = {
    {"emit", true, "STAGE", kDump,
     [](Options& o, std::string_view v) { o.emit = parse_emit(o.command, v); }},
    {"print-after-all", false, "", kDump | kRun | kBench,
     [](Options& o, std::string_view) { o.print_after_all = true; }},
    {"verify-each", false, "", kDump | kRun | kBench,
     [](Options& o, std::string_view) { o.verify_each = true; }},
    {"grad", false, "", kDump | kRun | kBench, [](Options& o, std::string_view) { o.grad = true; }},
    {"wrt", true, "I,J,...", kDump | kRun | kBench,
     [](Options& o, std::string_view v) { o.wrt = parse_wrt(o.command, v); }},
    {"jvp", false, "", kRun | kBench, [](Options& o, std::string_view) { o.jvp = true; }},
    {"primal-derivatives", false, "", kDump | kRun | kBench,
     [](Options& o, std::string_view) { o.primal_derivatives = true; }},
    {"fail-on-copy", false, "", kDump | kRun | kBench,
     [](Options& o, std::string_view) { o.fail_on_copy = true; }},
    {"interpret", false, "", kRun | kBench,
     [](Options& o, std::string_view) { o.interpret = true; }},
    {"timings", false, "", kDump | kRun | kBench,
     [](Options& o, std::string_view) { o.timings = true; }},
    {"exact-math", false, "", kDump | kRun | kBench,
     [](Options& o, std::string_view) { o.exact_math = true; }},
    {"runs", true, "N", kBench,
     [](Options& o, std::string_view v) {
       o.runs = static_cast<int>(parse_count(o.command, "runs", v, 1, 1000000));
     }},
    {"min-time", true, "MS", kBench,
     [](Options& o, std::string_view v) {
       o.min_time_ms = parse_count(o.command, "min-time", v, 0, 3600000);
     }},
    {"background-load", true, "N", kBench,
     [](Options& o, std::string_view v) {
       o.background_load = static_cast<int>(parse_count(o.command, "background-load", v, 0, 256));
     }},
    {"tier", true, "fast|optimized", kBench,
     [](Options& o, std::string_view v) {
       if (v != "fast" && v != "optimized")
         usage_error(o.command,
                     fmt::format("--tier is fast (LLVM -O0) or optimized (-O3), not '{}'", v));
       o.tier = std::string(v);
     }},
    {"seed", true, "S", kBench,
     [](Options& o, std::string_view v) {
       o.seed = parse_count(o.command, "seed", v, 0, std::numeric_limits<int64_t>::max());
     }},
    {"json", false, "", kBench, [](Options& o, std::string_view) { o.json = true; }},
};

void apply_option(Options& o, std::string_view arg) {
  std::string_view body = arg.substr(2);
  size_t eq = body.find('=');
  std::string_view name = body.substr(0, eq);
  bool has_value = eq != std::string_view::npos;
  std::string_view value = has_value ? body.substr(eq + 1) : std::string_view{};
  std::string_view cmd = command_name(o.command);

  const OptionSpec* spec = nullptr;
  for (const auto& s : kOptions)
    if (s.name == name) spec = &s;
  if (!spec) usage_error(o.command, fmt::format("unknown option '{}' for `refjit {}`", arg, cmd));
  bool allowed = (spec->commands & mask_of(o.command)) != 0;
  if (!allowed) {
    std::string hint;
    if (name == "jvp") hint = " (to print the forward-mode program use `refjit dump --emit=jvp`)";
    if (name == "emit") hint = " (`refjit dump --emit=STAGE` prints a stage)";
    if (name == "interpret") hint = " (dump does not execute the program)";
    usage_error(o.command,
                fmt::format("option --{} is not accepted by `refjit {}`{}", name, cmd, hint));
  }
  if (spec->takes_value && !has_value)
    usage_error(o.command,
                fmt::format("option --{} needs a value: --{}={}", name, name, spec->value_hint));
  if (!spec->takes_value && has_value)
    usage_error(o.command, fmt::format("option --{} takes no value (got '{}')", name, arg));
  spec->apply(o, value);
}

void check_combinations(const Options& o) {
  if (o.wrt && !o.grad) usage_error(o.command, "--wrt chooses the arguments of --grad; add --grad");
  if (o.grad && o.jvp)
    usage_error(o.command, "--grad and --jvp cannot be combined; choose one mode");
  if (o.print_after_all && o.emit != "jaxpr")
    usage_error(o.command, "--print-after-all prints every stage; drop --emit=" + o.emit);
}

bool is_help_flag(std::string_view a) { return a == "--help" || a == "-h"; }

// `refjit compile`: options may come before or after FILE (compile takes no VALUEs), and
// -o/--header/--name take their value as the next argument or after '='.
Invocation parse_compile(Options o, std::span<const std::string> args) {
  const Command c = Command::compile;
  bool have_file = false;
  auto take_value = [&](size_t& i, std::string_view opt, std::string_view inline_value,
                        bool has_inline) -> std::string {
    if (has_inline) {
      if (inline_value.empty()) usage_error(c, fmt::format("option {} needs a value", opt));
      return std::string(inline_value);
    }
    if (i + 1 >= args.size()) usage_error(c, fmt::format("option {} needs a value", opt));
    return args[++i];
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (is_help_flag(a)) return HelpRequest{c};
    if (a == "--") {
      if (i + 1 == args.size()) usage_error(c, "missing FILE after --");
      if (have_file)
        usage_error(c, fmt::format("`refjit compile` takes one FILE (got '{}' and "
                                   "'{}')",
                                   o.file, args[i + 1]));
      o.file = args[++i];
      have_file = true;
      continue;
    }
    if (a == "-o" || (a.starts_with("-o") && !a.starts_with("--"))) {
      o.output = a == "-o" ? take_value(i, "-o", "", false) : a.substr(2);
      continue;
    }
    if (a.starts_with("--")) {
      std::string_view body = std::string_view(a).substr(2);
      size_t eq = body.find('=');
      std::string_view name = body.substr(0, eq);
      bool has_value = eq != std::string_view::npos;
      std::string_view value = has_value ? body.substr(eq + 1) : std::string_view{};
      auto flag = [&](bool& field) {
        if (has_value)
          usage_error(c, fmt::format("option --{} takes no value (got '{}')", name, a));
        field = true;
      };
      if (name == "header") {
        o.header = take_value(i, "--header", value, has_value);
      } else if (name == "name") {
        o.name = take_value(i, "--name", value, has_value);
      } else if (name == "output") {
        o.output = take_value(i, "--output", value, has_value);
      } else if (name == "cpu") {
        o.cpu = take_value(i, "--cpu", value, has_value);
      } else if (name == "grad") {
        flag(o.grad);
      } else if (name == "vjp") {
        flag(o.vjp);
      } else if (name == "exact-math") {
        flag(o.exact_math);
      } else if (name == "primal-derivatives") {
        flag(o.primal_derivatives);
      } else if (name == "jvp") {
        flag(o.jvp);
      } else if (name == "wrt") {
        o.wrt = parse_wrt(c, take_value(i, "--wrt", value, has_value));
      } else if (name == "accum") {
        std::string list = take_value(i, "--accum", value, has_value);
        o.accum.clear();
        size_t start = 0;
        while (true) {
          size_t comma = list.find(',', start);
          std::string item = list.substr(start, comma == std::string::npos ? comma : comma - start);
          if (item != "value" && item != "ref" && item != "dontwant")
            usage_error(c, fmt::format("--accum takes one of value, ref, dontwant per invar, "
                                       "separated by commas (like --accum=value,dontwant); "
                                       "'{}' is not one",
                                       item));
          o.accum.push_back(item);
          if (comma == std::string::npos) break;
          start = comma + 1;
        }
      } else {
        std::string hint;
        if (name == "emit") hint = " (`refjit dump --emit=STAGE` prints a stage)";
        if (name == "interpret") hint = " (compile writes native code only)";
        usage_error(c, fmt::format("unknown option '{}' for `refjit compile`{}", a, hint));
      }
      continue;
    }
    if (a.size() > 1 && a[0] == '-')
      usage_error(c, fmt::format("unknown option '{}' for `refjit compile` (a FILE named like "
                                 "this needs `--` before it)",
                                 a));
    if (have_file)
      usage_error(c, fmt::format("`refjit compile` takes one FILE (got '{}' and '{}')", o.file, a));
    o.file = a;
    have_file = true;
  }
  if (!have_file) usage_error(c, "missing FILE (a jaxpr text file, or - for standard input)");
  if (o.output.empty()) usage_error(c, "missing -o OUT.o (the object file to write)");
  int modes = int(o.grad) + int(o.vjp) + int(o.jvp);
  if (modes > 1) usage_error(c, "--grad, --vjp and --jvp cannot be combined; choose one mode");
  if (o.wrt && !o.grad) usage_error(c, "--wrt chooses the arguments of --grad; add --grad");
  if (!o.accum.empty() && !o.vjp)
    usage_error(c, "--accum gives the accumulators of --vjp; add --vjp");
  if (o.cpu.empty()) usage_error(c, "--cpu needs a value: host, generic or a CPU name");
  return o;
}

}  // namespace

std::string_view command_name(Command c) { return kCommandNames[static_cast<int>(c)]; }

bool differentiates(const Options& o) {
  return o.grad || o.jvp || o.vjp ||
         (o.command == Command::dump &&
          (o.emit == "jvp" || o.emit == "linearize" || o.emit == "vjp"));
}

bool is_program_view(std::string_view stage) {
  return std::find(std::begin(kProgramViews), std::end(kProgramViews), stage) !=
         std::end(kProgramViews);
}

Invocation parse_command_line(std::span<const std::string> args) {
  if (args.empty())
    throw UsageError(fmt::format("no command given; the commands are {}", kCommandList),
                     std::nullopt);
  const std::string& first = args[0];
  if (is_help_flag(first)) return HelpRequest{};
  if (first == "--version") return VersionRequest{};
  std::optional<Command> command = command_from_name(first);
  if (!command) {
    std::string what = first.starts_with("-") ? "unknown option" : "unknown command";
    throw UsageError(fmt::format("{} '{}'; the commands are {}", what, first, kCommandList),
                     std::nullopt);
  }

  Options o;
  o.command = *command;
  auto rest = args.subspan(1);

  if (o.command == Command::compile) return parse_compile(o, rest);

  size_t i = 0;
  bool have_file = false;
  for (; i < rest.size(); ++i) {
    const std::string& a = rest[i];
    if (is_help_flag(a)) return HelpRequest{o.command};
    if (a == "--") {  // the next argument is FILE, even if it starts with '-'
      if (i + 1 == rest.size()) break;
      o.file = rest[++i];
      have_file = true;
      ++i;
      break;
    }
    if (a.starts_with("--")) {
      apply_option(o, a);
    } else if (a.size() > 1 && a[0] == '-') {
      usage_error(o.command, fmt::format("unknown option '{}' for `refjit {}` (options are "
                                         "spelled --NAME; a FILE named like this needs `--` "
                                         "before it)",
                                         a, command_name(o.command)));
    } else {
      o.file = a;
      have_file = true;
      ++i;
      break;
    }
  }
  if (!have_file)
    usage_error(o.command, "missing FILE (a jaxpr text file, or - for standard input)");

  o.values.assign(rest.begin() + static_cast<std::ptrdiff_t>(i), rest.end());
  if (o.command == Command::dump && !o.values.empty())
    usage_error(o.command, fmt::format("`refjit dump` takes nothing after FILE (got '{}'); "
                                       "options go before FILE",
                                       o.values.front()));
  check_combinations(o);
  return o;
}

}  // namespace refjit::cli
