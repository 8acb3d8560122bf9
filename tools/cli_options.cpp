#include "tools/cli_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <string_view>

namespace refjit::cli {

namespace {

constexpr std::string_view kCommandNames[] = {"dump", "run", "compile"};

constexpr std::pair<std::string_view, EmitStage> kEmitStages[] = {
    {"jaxpr", EmitStage::jaxpr},         {"jvp", EmitStage::jvp},
    {"linearize", EmitStage::linearize}, {"vjp", EmitStage::vjp},
    {"buffers", EmitStage::buffers},     {"mlir", EmitStage::mlir},
    {"llvm", EmitStage::llvm},           {"asm", EmitStage::asm_},
};

std::optional<Command> command_from_name(std::string_view name) {
  for (size_t i = 0; i < std::size(kCommandNames); ++i)
    if (kCommandNames[i] == name) return static_cast<Command>(i);
  return std::nullopt;
}

// One option of the `dump`/`run` table in CLI.md. `apply` receives the text after '='
// (empty for a flag) and throws UsageError on a bad value.
struct OptionSpec {
  std::string_view name;  // without the leading "--"
  bool takes_value;
  std::string_view value_hint;  // "STAGE", "I,J,...": shown when the value is missing
  bool for_dump;
  bool for_run;
  void (*apply)(Options& o, std::string_view value);
};

[[noreturn]] void usage_error(Command c, const std::string& message) {
  throw UsageError(message, c);
}

EmitStage parse_emit(Command c, std::string_view text) {
  for (const auto& [name, stage] : kEmitStages)
    if (name == text) return stage;
  usage_error(c, fmt::format("unknown stage '{}' for --emit; the stages are jaxpr, jvp, "
                             "linearize, vjp, buffers, mlir, llvm, asm",
                             text));
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

const OptionSpec kOptions[] = {
    {"emit", true, "STAGE", true, false,
     [](Options& o, std::string_view v) { o.emit = parse_emit(o.command, v); }},
    {"grad", false, "", true, true, [](Options& o, std::string_view) { o.grad = true; }},
    {"wrt", true, "I,J,...", true, true,
     [](Options& o, std::string_view v) { o.wrt = parse_wrt(o.command, v); }},
    {"jvp", false, "", false, true, [](Options& o, std::string_view) { o.jvp = true; }},
    {"fail-on-copy", false, "", true, true,
     [](Options& o, std::string_view) { o.fail_on_copy = true; }},
    {"interpret", false, "", false, true, [](Options& o, std::string_view) { o.interpret = true; }},
    {"timings", false, "", true, true, [](Options& o, std::string_view) { o.timings = true; }},
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
  bool allowed = o.command == Command::dump ? spec->for_dump : spec->for_run;
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
}

bool is_help_flag(std::string_view a) { return a == "--help" || a == "-h"; }

}  // namespace

std::string_view command_name(Command c) { return kCommandNames[static_cast<int>(c)]; }

std::string_view emit_stage_name(EmitStage s) {
  for (const auto& [name, stage] : kEmitStages)
    if (stage == s) return name;
  return "?";
}

Invocation parse_command_line(std::span<const std::string> args) {
  if (args.empty())
    throw UsageError("no command given; the commands are dump, run and compile", std::nullopt);
  const std::string& first = args[0];
  if (is_help_flag(first)) return HelpRequest{};
  if (first == "--version") return VersionRequest{};
  std::optional<Command> command = command_from_name(first);
  if (!command) {
    std::string what = first.starts_with("-") ? "unknown option" : "unknown command";
    throw UsageError(fmt::format("{} '{}'; the commands are dump, run and compile", what, first),
                     std::nullopt);
  }

  Options o;
  o.command = *command;
  auto rest = args.subspan(1);

  if (o.command == Command::compile) {
    // `compile` is not implemented yet: only --help is recognised, the rest is kept verbatim.
    for (const auto& a : rest)
      if (is_help_flag(a)) return HelpRequest{o.command};
    o.rest.assign(rest.begin(), rest.end());
    return o;
  }

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
