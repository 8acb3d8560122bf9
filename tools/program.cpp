#include "tools/program.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "passes/jaxpr_util.h"
#include "refjit/ir/text.h"

namespace refjit::cli {

Source read_source(const std::string& file) {
  if (file == "-") {
    std::ostringstream buffer;
    buffer << std::cin.rdbuf();
    if (std::cin.bad()) throw InputError("cannot read standard input");
    return Source{"<stdin>", buffer.str()};
  }
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec))
    throw InputError(fmt::format("cannot read '{}': it is a directory, not a jaxpr file", file));
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(fmt::format("cannot open '{}': {}", file, std::strerror(errno)));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw InputError(fmt::format("cannot read '{}'", file));
  return Source{file, std::move(text)};
}

Jaxpr load_program(const Source& source, const Options& options, StageTimings& timings) {
  Jaxpr program = timings.time("parse", [&] { return parse_jaxpr(source.text, source.name); });
  if (options.primal_derivatives) program = accept_primal_derivatives(program);
  if (differentiates(options))
    for (const std::string& name : functions_missing_jvp_rules(program))
      std::fprintf(stderr,
                   "%s: warning: the custom_jvp function `%s` is differentiated through its "
                   "primal: JAX's text names its jvp rule but leaves it out (the derivatives "
                   "agree except where the rule differs on purpose, such as relu's at 0; "
                   "refjit's Python package applies the rule itself)\n",
                   source.name.c_str(), name.c_str());
  return program;
}

std::string binder_name(const Jaxpr& jaxpr, Var v) {
  const std::string& name = jaxpr.info(v).name;
  if (!name.empty()) return name;
  for (size_t i = 0; i < jaxpr.constvars.size(); ++i)
    if (jaxpr.constvars[i] == v) return fmt::format("constvar {}", i);
  for (size_t i = 0; i < jaxpr.invars.size(); ++i)
    if (jaxpr.invars[i] == v) return fmt::format("invar {}", i);
  return fmt::format("var {}", v.id);
}

}  // namespace refjit::cli
