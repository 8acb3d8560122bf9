// Ahead-of-time object files with plain C entry points (docs/aot.md): the driver.
//
// Each entry point is one jaxpr run through the compilation pipeline (passes/pipeline.h) and
// lowered to an internal function `refjit_main` (renamed SYMBOL__body) whose parameters are
// expanded memref descriptors. A generated wrapper `int SYMBOL(...)` takes plain pointers (or
// scalars by value), checks them for NULL, mallocs the scratch workspace, builds the
// descriptors (dense, row-major), calls the body and frees the workspace. For --vjp,
// residuals travel through a C struct whose layout (natural alignment, fields in order) is
// computed here and checked by the header at compile time. All entry modules are linked into
// one LLVM module, optimised and emitted for the chosen CPU. The steps live in aot_entries.cpp,
// aot_header.cpp and aot_wrapper.cpp (aot_entry.h).
#include "compiler/backend/aot.h"

#include <fmt/format.h>

#include <cctype>
#include <fstream>

#include "compiler/backend/aot_entry.h"
#include "compiler/backend/native.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "passes/pipeline.h"
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

  auto tm = backend::make_target_machine(options.cpu, options.opt_level);
  llvm::LLVMContext lctx;
  CompileOptions co;
  co.opt_level = options.opt_level;
  co.exact_math = options.exact_math || exact_math_by_default();
  co.runtime_kernels = false;  // the object needs only libc and libm
  std::unique_ptr<llvm::Module> linked;
  const aot::ResidualStruct* rs = plan.residuals ? &*plan.residuals : nullptr;
  for (aot::CEntry& e : plan.entries) {
    // The same passes as jit and `refjit run` (nothing is known of constvars here, and the
    // entry's derivative is already built, so the signature in the header stays).
    PipelineOptions pipeline;
    pipeline.opt_level = options.opt_level;
    const PlannedProgram planned = plan_program(*e.jaxpr, pipeline);
    co.plan = planned.plan;
    co.after_pass = pass_reporter(pipeline);
    CompileTimings timings;
    backend::LlvmLowered l = backend::lower_to_llvm_ir(planned.jaxpr, co, lctx, timings);
    e.workspace_bytes = l.has_workspace ? l.workspace_bytes : 0;
    aot::add_wrapper(*l.module, e, rs, l.has_workspace);
    l.module->setDataLayout(tm->createDataLayout());
    l.module->setTargetTriple(tm->getTargetTriple().str());
    if (!linked) {
      linked = std::move(l.module);
      linked->setModuleIdentifier(options.name);
    } else if (llvm::Linker::linkModules(*linked, std::move(l.module))) {
      throw Error("aot: internal error linking the entry points into one module");
    }
  }
  std::string verify_msg;
  llvm::raw_string_ostream vos(verify_msg);
  if (llvm::verifyModule(*linked, &vos))
    throw Error("aot: internal error, the generated LLVM IR does not verify:\n" + verify_msg);
  backend::optimize_llvm_module(*linked, *tm, options.opt_level);
  // The object must stand alone: calls into MLIR's runtime support libraries (e.g.
  // memrefCopy for a strided memref.copy) would leave it needing more than libc/libm.
  for (const llvm::Function& fn : linked->functions()) {
    llvm::StringRef n = fn.getName();
    if (fn.isDeclaration() && !fn.isIntrinsic() && !fn.use_empty() &&
        (n.starts_with("_mlir") || n.starts_with("mlir") || n.starts_with("memref") ||
         n.starts_with("printMemref")))
      throw Error(fmt::format(
          "aot: internal error, the generated code calls `{}` from MLIR's runtime library, "
          "which an object file cannot depend on",
          n.str()));
  }

  AotArtifact out;
  out.object = backend::emit_machine_code(*linked, *tm, /*object_file=*/true);
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
