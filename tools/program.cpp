#include "tools/program.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

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

Jaxpr load_program(const Source& source, StageTimings& timings) {
  return timings.time("parse", [&] { return parse_jaxpr(source.text, source.name); });
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
