// Ahead-of-time object files with plain C entry points (docs/aot.md): the driver of
// `refjit compile` and refjit::compile_to_object (include/refjit/aot.h).
//
// Each entry point is one jaxpr run through the compilation pipeline (driver/pipeline.h),
// then handed to the backend (backend/aot_object.cpp), which lowers it to an
// internal function `refjit_main` (renamed SYMBOL__body) whose parameters are expanded memref
// descriptors, and adds a generated wrapper `int SYMBOL(...)` that takes plain pointers (or
// scalars by value), checks them for NULL, mallocs the scratch workspace, builds the
// descriptors (dense, row-major), calls the body and frees the workspace. For --vjp,
// residuals travel through a C struct whose layout (natural alignment, fields in order) is
// computed by aot_entries.cpp and checked by the header at compile time.
//
// The C ABI (docs/aot.md): parameters are the constvars, then the invars (by value for a
// rank-0 non-ref input, `const T*` for other inputs, `T*` for refs, updated in place), then
// one `T*` per output; every array is dense and row-major; the return value is a status code
// (REFJIT_AOT_OK = 0). Scratch memory is malloc'ed and freed inside each call.
#include <fmt/format.h>

#include <cctype>
#include <fstream>

#include "driver/aot_plan.h"
#include "driver/pipeline.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace aot {

namespace {

constexpr std::string_view kCKeywords[] = {
    "auto",     "break",   "case",    "char",     "const",    "continue", "default",  "do",
    "double",   "else",    "enum",    "extern",   "float",    "for",      "goto",     "if",
    "inline",   "int",     "long",    "register", "restrict", "return",   "short",    "signed",
    "sizeof",   "static",  "struct",  "switch",   "typedef",  "union",    "unsigned", "void",
    "volatile", "while",   "bool",    "true",     "false",    "_Bool",    "_Complex", "_Imaginary",
    "int32_t",  "int64_t", "uint8_t", "size_t",   "NULL",     "asm",      "main"};

}  // namespace

void check_name(const std::string& name) {
  if (!is_c_identifier(name))
    throw Error(fmt::format(
        "aot: '{}' cannot name a C function: use letters, digits and _, not starting with a "
        "digit, and not a C keyword (choose one with --name)",
        name));
}

}  // namespace aot

bool is_c_identifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') return false;
  for (std::string_view k : aot::kCKeywords)
    if (k == name) return false;
  return true;
}

AotArtifact compile_to_object(const Jaxpr& jaxpr, const AotOptions& options) {
  aot::check_name(options.name);
  if (options.opt_level < 0 || options.opt_level > 3)
    throw Error(fmt::format("aot: opt_level must be 0..3, not {}", options.opt_level));
  for (const Eqn& e : jaxpr.eqns)
    if (has_host_effect(e))
      throw Error(
          "aot: the program calls a host function (a debug_callback, from jax.debug.print or "
          "jax.debug.callback), which needs the process that traced it; `refjit compile` "
          "objects link only libc and libm: remove the call, or run the program with jit");
  aot::EntryPlan plan = aot::plan_entries(jaxpr, options);
  // C has no complex type a C++ caller can use too: refuse rather than write a header that
  // does not compile.
  for (const aot::CEntry& e : plan.entries)
    for (const aot::CParam& p : e.params)
      if (p.kind != aot::ParamKind::residuals && is_complex(p.type.dtype))
        throw Error(fmt::format(
            "aot: {} of {} has type {}; `refjit compile` entry points take real arrays only "
            "(pass the real and imaginary parts as two arrays, or use jit)",
            p.name, e.symbol, p.type.str()));
  if (plan.residuals)
    for (const aot::Field& f : plan.residuals->fields)
      if (is_complex(f.type.dtype))
        throw Error(
            fmt::format("aot: the residual {} has type {}; `refjit compile` keeps real "
                        "residuals only (use jit for complex programs)",
                        f.name, f.type.str()));

  const aot::ResidualStruct* rs = plan.residuals ? &*plan.residuals : nullptr;
  // The same passes as jit and `refjit run` (nothing is known of constvars here, and the
  // entry's derivative is already built, so the signature in the header stays).
  PipelineOptions pipeline;
  pipeline.compile.opt_level = options.opt_level;
  pipeline.compile.exact_math = pipeline.compile.exact_math || options.exact_math;
  pipeline.compile.runtime_kernels = false;  // the object needs only libc and libm
  std::vector<PlannedProgram> planned;
  std::vector<aot::EntryCode> code;
  planned.reserve(plan.entries.size());
  for (const aot::CEntry& e : plan.entries) planned.push_back(plan_program(*e.jaxpr, pipeline));
  for (const PlannedProgram& p : planned)
    code.push_back({&p.jaxpr, p.plan, pass_reporter(pipeline)});

  AotArtifact out;
  out.object = aot::emit_object(plan.entries, code, rs, pipeline.compile, options);
  out.header = aot::make_header(options, plan.entries, rs);
  for (const aot::CEntry& e : plan.entries) out.symbols.push_back(e.symbol);
  if (rs) out.residual_bytes = rs->size;

  auto write = [](const std::string& path, const std::string& bytes, const char* what) {
    if (path.empty()) return;
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    if (!f) throw Error(fmt::format("cannot write the {} to '{}'", what, path));
  };
  write(options.object_path, out.object, "object file");
  write(options.header_path, out.header, "header");
  return out;
}

}  // namespace refjit
