// `refjit compile`: ahead-of-time object files with a C header (docs/aot.md).
// Also home of not_available(), the error every not-yet-built feature raises.
#include <fmt/format.h>

#include <filesystem>

#include "refjit/aot.h"
#include "tools/commands.h"
#include "tools/program.h"

namespace refjit::cli {

void not_available(std::string_view what, std::string_view needs) {
  throw NotAvailable(
      fmt::format("{} is not available yet: it needs {}, which this build of refjit does not have",
                  what, needs));
}

namespace {

// The default SYMBOL: FILE's stem (OUT.o's for standard input) made into a C identifier.
std::string default_symbol(const Options& o) {
  std::string stem = std::filesystem::path(o.file == "-" ? o.output : o.file).stem().string();
  std::string s;
  for (char ch : stem) s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
  if (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) s = "_" + s;
  return s;
}

AotAccum accum_of(const std::string& k) {
  if (k == "value") return AotAccum::value;
  if (k == "ref") return AotAccum::ref;
  return AotAccum::dont_want;
}

}  // namespace

int compile_command(const Options& o) {
  StageTimings timings;
  Source source = read_source(o.file);
  Jaxpr program = load_program(source, o, timings);

  AotOptions a;
  a.name = o.name.empty() ? default_symbol(o) : o.name;
  if (!is_c_identifier(a.name))
    throw Error(
        fmt::format("'{}' cannot name a C function (letters, digits and _, not starting "
                    "with a digit, not a C keyword); choose one with --name",
                    a.name));
  a.cpu = o.cpu;
  a.exact_math = o.exact_math;
  a.object_path = o.output;
  a.header_path = o.header;
  a.source_name = source.name;
  if (o.grad) {
    a.mode = AotMode::grad;
    if (o.wrt) a.wrt = *o.wrt;
  } else if (o.vjp) {
    a.mode = AotMode::vjp;
    for (const std::string& k : o.accum) a.accum.push_back(accum_of(k));
  } else if (o.jvp) {
    a.mode = AotMode::jvp;
  }
  compile_to_object(program, a);
  return 0;
}

}  // namespace refjit::cli
