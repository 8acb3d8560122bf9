// The object file of `refjit compile`: each entry's planned program lowered to an internal
// function `refjit_main` (renamed SYMBOL__body) whose parameters are expanded memref
// descriptors, a C-callable wrapper around it (aot_wrapper.cpp), and all entry modules linked
// into one LLVM module, optimised and emitted for the chosen CPU. The driver
// (driver/aot.cpp) plans the entries and runs the pipeline before this.
#include <fmt/format.h>

#include "backend/aot_entry.h"
#include "backend/native.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "refjit/ir/error.h"

namespace refjit::aot {

std::string emit_object(std::vector<CEntry>& entries, std::span<const EntryCode> code,
                        const ResidualStruct* rs, const CompileOptions& compile,
                        const AotOptions& options) {
  if (code.size() != entries.size())
    throw Error("aot: internal error, one planned program is needed per entry point");
  if (compile.runtime_kernels)
    throw Error("aot: internal error, an object file cannot call the runtime's kernels");
  auto tm = backend::make_target_machine(options.cpu, compile.opt_level);
  llvm::LLVMContext lctx;
  CompileOptions co = compile;
  std::unique_ptr<llvm::Module> linked;
  for (size_t i = 0; i < entries.size(); ++i) {
    CEntry& e = entries[i];
    co.plan = code[i].plan;
    co.after_pass = code[i].after_pass;
    CompileTimings timings;
    backend::LlvmLowered l = backend::lower_to_llvm_ir(*code[i].jaxpr, co, lctx, timings);
    e.workspace_bytes = l.has_workspace ? l.workspace_bytes : 0;
    add_wrapper(*l.module, e, rs, l.has_workspace);
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
  backend::optimize_llvm_module(*linked, *tm, compile.opt_level);
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
  return backend::emit_machine_code(*linked, *tm, /*object_file=*/true);
}

}  // namespace refjit::aot
