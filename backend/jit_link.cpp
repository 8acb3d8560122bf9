#include "backend/jit_link.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "backend/lowering.h"  // kEntryName
#include "backend/native.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/ExecutionEngine/JITEventListener.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h"
#include "llvm/ExecutionEngine/SectionMemoryManager.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "refjit/ir/error.h"
#include "runtime/collectives.h"
#include "runtime/host_callbacks.h"
#include "runtime/kernels/factorizations.h"
#include "runtime/kernels/float_builtins.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/lapack.h"

namespace refjit::backend {

namespace {

using Clock = std::chrono::steady_clock;

// The runtime kernels JIT code may call (LowerCtx::call_runtime), bound to this process's
// copies so that no symbol lookup in the process's dynamic tables is needed.
llvm::orc::SymbolMap runtime_symbols(llvm::orc::MangleAndInterner interner) {
  llvm::orc::SymbolMap symbols;
  auto add = [&](const char* name, auto* fn) {
    symbols[interner(name)] = {llvm::orc::ExecutorAddr::fromPtr(fn),
                               llvm::JITSymbolFlags::Exported};
  };
  add("refjit_gemm_f32", &refjit_gemm_f32);
  add("refjit_gemm_f64", &refjit_gemm_f64);
  add("refjit_gemm_f32_then", &refjit_gemm_f32_then);
  add("refjit_gemm_f64_then", &refjit_gemm_f64_then);
  add("refjit_im2col_gemm_f32", &refjit_im2col_gemm_f32);
  add("refjit_im2col_gemm_f64", &refjit_im2col_gemm_f64);
  add("refjit_im2col_gemm_f32_then", &refjit_im2col_gemm_f32_then);
  add("refjit_im2col_gemm_f64_then", &refjit_im2col_gemm_f64_then);
  add("refjit_im2col_tgemm_f32", &refjit_im2col_tgemm_f32);
  add("refjit_im2col_tgemm_f64", &refjit_im2col_tgemm_f64);
  add("refjit_parallel_for", &refjit_parallel_for);
  // The collectives, under one name per element type (collective_symbol).
  for (DType d : kAllDTypes) {
    add(typed_runtime_symbol("refjit_psum", d).c_str(), &refjit_psum);
    add(typed_runtime_symbol("refjit_psum_start", d).c_str(), &refjit_psum_start);
    add(typed_runtime_symbol("refjit_psum_wait", d).c_str(), &refjit_psum_wait);
    add(typed_runtime_symbol("refjit_all_gather", d).c_str(), &refjit_all_gather);
    add(typed_runtime_symbol("refjit_broadcast_from", d).c_str(), &refjit_broadcast_from);
  }
  add("refjit_axis_index", &refjit_axis_index);
  add("refjit_axis_index_checked", &refjit_axis_index_checked);
  add("refjit_host_call_begin", &refjit_host_call_begin);
  add("refjit_host_call_end", &refjit_host_call_end);
  for (DType d : kAllDTypes)
    add(typed_runtime_symbol("refjit_host_call_arg", d).c_str(), &refjit_host_call_arg);
  add("refjit_eigh", &refjit_eigh);
  add("refjit_svd", &refjit_svd);
  add("refjit_eig", &refjit_eig);
  add("refjit_cholesky", &refjit_cholesky);
  add("refjit_triangular_solve", &refjit_triangular_solve);
  add("refjit_lu", &refjit_lu);
  add("refjit_tridiagonal_solve", &refjit_tridiagonal_solve);
  add("refjit_qr", &refjit_qr);
#if defined(__x86_64__)
  add("__truncsfbf2", &refjit_truncsfbf2);
#endif
  return symbols;
}

// The name of the entry's packed form (add_packed_entry), the one symbol the JIT looks up.
constexpr const char* kPackedEntryName = "refjit_packed_entry";

// Adds `void refjit_packed_entry(void** args)` to `m`: args[i] points at the i-th argument of
// the C-interface wrapper `_mlir_ciface_refjit_main` (a memref descriptor pointer), so one
// function type calls every program.
void add_packed_entry(llvm::Module& m) {
  llvm::Function* ciface = m.getFunction(std::string("_mlir_ciface_") + kEntryName);
  if (!ciface) throw Error("native backend: internal error, the module has no C-interface entry");
  llvm::LLVMContext& c = m.getContext();
  llvm::PointerType* ptr = llvm::PointerType::getUnqual(c);
  llvm::Function* packed =
      llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(c), {ptr}, false),
                             llvm::GlobalValue::ExternalLinkage, kPackedEntryName, m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", packed));
  std::vector<llvm::Value*> args;
  for (llvm::Argument& a : ciface->args()) {
    llvm::Value* slot = b.CreateConstGEP1_64(ptr, packed->getArg(0), a.getArgNo());
    args.push_back(b.CreateLoad(a.getType(), b.CreateLoad(ptr, slot)));
  }
  b.CreateCall(ciface, args);
  b.CreateRetVoid();
}

// A JIT holding the object files of one program: the runtime kernels bound to this process's
// copies, libc and libm found in the process.
std::unique_ptr<llvm::orc::LLJIT> link_in_memory(const std::vector<std::string>& objects,
                                                 const llvm::DataLayout& layout) {
  // REFJIT_PERF_JIT=1: describe the JIT code to `perf` (a jit-PID.dump file for
  // `perf record -k 1` + `perf inject --jit`), so profiles name refjit_main.
  const char* perf_env = std::getenv("REFJIT_PERF_JIT");
  const bool perf = perf_env && std::string_view(perf_env) == "1";
  // JITLink (LLJIT's default linker) puts all of an object's sections in one block, so the
  // code's PC-relative loads of its constants always reach them. RuntimeDyld's
  // SectionMemoryManager maps code and constants separately; once a process has compiled many
  // programs they can land more than 2 GB apart, and a PC-relative load then reads the wrong
  // address (a crash after a few hundred compiles, whatever the program). RuntimeDyld is used
  // only for REFJIT_PERF_JIT, whose perf listener it supports.
  llvm::orc::LLJITBuilder builder;
  builder.setDataLayout(layout);
  if (perf)
    builder.setObjectLinkingLayerCreator(
        [](llvm::orc::ExecutionSession& session, const llvm::Triple&) {
          auto layer = std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
              session, [] { return std::make_unique<llvm::SectionMemoryManager>(); });
          if (llvm::JITEventListener* l = llvm::JITEventListener::createPerfJITEventListener())
            layer->registerJITEventListener(*l);
          return layer;
        });
  auto jit = builder.create();
  if (!jit) throw Error("native backend: JIT setup failed: " + llvm::toString(jit.takeError()));
  llvm::orc::JITDylib& main = (*jit)->getMainJITDylib();
  llvm::orc::MangleAndInterner mangle((*jit)->getExecutionSession(), layout);
  auto fail = [](llvm::Error e) {
    if (e) throw Error("native backend: JIT setup failed: " + llvm::toString(std::move(e)));
  };
  fail(main.define(llvm::orc::absoluteSymbols(runtime_symbols(mangle))));
  auto process =
      llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(layout.getGlobalPrefix());
  if (!process) fail(process.takeError());
  main.addGenerator(std::move(*process));
  for (const std::string& object : objects)
    fail((*jit)->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(object, "refjit-jit-object")));
  return std::move(*jit);
}

void (*packed_entry(llvm::orc::LLJIT& jit))(void**) {
  auto sym = jit.lookup(kPackedEntryName);
  if (!sym) throw Error("native backend: JIT lookup failed: " + llvm::toString(sym.takeError()));
  return sym->toPtr<void (*)(void**)>();
}

// ---- a large module compiled on several threads ------------------------------------------
// LLVM's optimisation and code generation take 100-300 ms for a gradient with a dozen parallel
// loops, all on one core. Such a module is split into pieces of about equal size, each
// optimised and compiled on its own thread into its own object file; the JIT links them
// together. An outlined loop body is called once per run of its loop (directly, or through
// refjit_parallel_for), so no inlining that matters is lost.

// Below this many LLVM instructions a module is compiled whole: a thread, a second target
// machine and a bitcode round trip cost a few milliseconds. (A module of 11 outlined loops,
// ~1,300 instructions, went from 263-268 ms to 166-191 ms split in two.)
constexpr unsigned kSplitInstructions = 500;

// One piece of a module: bitcode of its functions until its thread reads it into a context of
// its own (none for a module compiled whole), then the optimised module, its target machine
// and its object file.
struct Piece {
  llvm::SmallVector<char, 0> bitcode;
  std::unique_ptr<llvm::LLVMContext> ctx;
  std::unique_ptr<llvm::Module> module;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::string object;
};

// Runs `work` on every piece, the first on this thread and each other on a thread of its own.
// An exception from any piece is rethrown here once all are done.
void on_every_piece(std::vector<Piece>& pieces, const std::function<void(Piece&)>& work) {
  std::vector<std::exception_ptr> errors(pieces.size());
  auto run = [&](size_t i) {
    try {
      work(pieces[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < pieces.size(); ++i) threads.emplace_back(run, i);
  run(0);
  for (std::thread& t : threads) t.join();
  for (std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// `module` cut into at most `parts` pieces of about equal instruction count, as bitcode; empty
// when it is compiled whole (small, or one thread). The entry and its two wrappers stay
// together in the first piece; every other function goes, largest first, to the piece with
// the fewest instructions so far. Functions and mutable globals become external so the pieces
// link; constant globals are copied into every piece, so their loads still fold.
std::vector<Piece> split_module(llvm::Module& module, int parts) {
  if (parts < 2 || module.getInstructionCount() < kSplitInstructions) return {};
  const std::string entry_names[] = {kEntryName, std::string("_mlir_ciface_") + kEntryName,
                                     kPackedEntryName};
  std::vector<unsigned> load(static_cast<size_t>(parts), 0);
  std::vector<llvm::Function*> others;
  std::unordered_map<const llvm::Function*, int> piece_of;
  for (llvm::Function& f : module) {
    if (f.isDeclaration()) continue;
    if (std::find(std::begin(entry_names), std::end(entry_names), f.getName()) !=
        std::end(entry_names)) {
      piece_of[&f] = 0;
      load[0] += f.getInstructionCount();
    } else {
      others.push_back(&f);
    }
  }
  std::sort(others.begin(), others.end(), [](llvm::Function* a, llvm::Function* b) {
    const unsigned na = a->getInstructionCount(), nb = b->getInstructionCount();
    return na != nb ? na > nb : a->getName() < b->getName();  // the same split every time
  });
  for (llvm::Function* f : others) {
    const auto least = std::min_element(load.begin(), load.end());
    piece_of[f] = static_cast<int>(least - load.begin());
    *least += f->getInstructionCount();
  }
  // Pieces are filled in order, so the used ones are a prefix.
  const int used =
      static_cast<int>(std::count_if(load.begin(), load.end(), [](unsigned n) { return n > 0; }));
  if (used < 2) return {};

  for (llvm::Function& f : module)
    if (!f.isDeclaration() && f.hasLocalLinkage()) f.setLinkage(llvm::GlobalValue::ExternalLinkage);
  for (llvm::GlobalVariable& g : module.globals()) {
    if (!g.hasName()) g.setName("refjit_global");
    if (!g.isConstant() && g.hasLocalLinkage()) g.setLinkage(llvm::GlobalValue::ExternalLinkage);
  }
  std::vector<Piece> pieces(static_cast<size_t>(used));
  for (int p = 0; p < used; ++p) {
    llvm::ValueToValueMapTy map;
    std::unique_ptr<llvm::Module> piece =
        llvm::CloneModule(module, map, [&](const llvm::GlobalValue* gv) {
          if (const auto* f = llvm::dyn_cast<llvm::Function>(gv)) {
            auto it = piece_of.find(f);
            return it != piece_of.end() && it->second == p;
          }
          if (const auto* g = llvm::dyn_cast<llvm::GlobalVariable>(gv))
            return g->isConstant() || p == 0;
          return p == 0;
        });
    // What another piece defines may be loaded more than 2 GB away: reach it through the GOT
    // (a dso_local one would be reached by a 32-bit PC-relative offset).
    for (llvm::GlobalValue& gv : piece->global_values())
      if (gv.isDeclaration()) gv.setDSOLocal(false);
    llvm::raw_svector_ostream out(pieces[static_cast<size_t>(p)].bitcode);
    llvm::WriteBitcodeToFile(*piece, out);
  }
  return pieces;
}

}  // namespace

LinkedCode compile_and_link(
    std::unique_ptr<llvm::Module> module, int opt_level, int threads,
    const std::function<void(const std::function<std::string()>& text)>& optimised,
    std::vector<std::string>* objects_out) {
  add_packed_entry(*module);
  auto tm = make_target_machine("host", opt_level);
  const llvm::DataLayout layout = tm->createDataLayout();
  module->setDataLayout(layout);
  module->setTargetTriple(tm->getTargetTriple().str());
  std::vector<Piece> pieces = split_module(*module, threads);
  if (pieces.empty()) {  // one piece: the module itself, no copy
    pieces.emplace_back();
    pieces[0].module = std::move(module);
  }
  // Each piece has its own context (contexts are not thread-safe) and target machine.
  on_every_piece(pieces, [&](Piece& p) {
    if (!p.module) {
      p.ctx = std::make_unique<llvm::LLVMContext>();
      auto parsed = llvm::parseBitcodeFile(
          llvm::MemoryBufferRef(llvm::StringRef(p.bitcode.data(), p.bitcode.size()), "piece"),
          *p.ctx);
      if (!parsed)
        throw Error("native backend: internal error reading a module piece: " +
                    llvm::toString(parsed.takeError()));
      p.module = std::move(*parsed);
    }
    p.tm = &p == &pieces[0] ? std::move(tm) : make_target_machine("host", opt_level);
    optimize_llvm_module(*p.module, *p.tm, opt_level);
  });
  module.reset();
  optimised([&] {
    std::string text;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (pieces.size() > 1)
        text += fmt::format("; piece {} of {} (each on its own thread)\n", i + 1, pieces.size());
      text += module_text(*pieces[i].module);
    }
    return text;
  });

  // Machine code at the tier's level (the target machine carries it), then linked in memory.
  const auto t0 = Clock::now();
  on_every_piece(pieces, [&](Piece& p) {
    p.object = emit_machine_code(*p.module, *p.tm, /*object_file=*/true);
  });
  LinkedCode code;
  code.codegen_level = static_cast<int>(pieces[0].tm->getOptLevel());
  code.pieces = static_cast<int>(pieces.size());
  std::vector<std::string> objects;
  for (Piece& p : pieces) objects.push_back(std::move(p.object));
  pieces.clear();
  code.jit = link_in_memory(objects, layout);
  code.entry = packed_entry(*code.jit);
  code.codegen_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (objects_out) *objects_out = std::move(objects);
  return code;
}

LinkedCode link_objects(const std::vector<std::string>& objects, int codegen_level) {
  const auto t0 = Clock::now();
  LinkedCode code;
  code.codegen_level = codegen_level;
  code.pieces = static_cast<int>(objects.size());
  code.jit = link_in_memory(objects, make_target_machine("host", 0)->createDataLayout());
  code.entry = packed_entry(*code.jit);
  code.codegen_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return code;
}

}  // namespace refjit::backend
