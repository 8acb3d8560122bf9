// The native backend's driver: MLIR pass pipeline to the LLVM dialect, host target machine,
// the JIT (jit_link.h), textual emission, and the call ABI. The
// stages in namespace backend (declared in native.h) are shared with aot.cpp.
//
// Calling convention: the entry `refjit_main` takes one memref per constvar, invar and
// outvar, in that order; its C-interface wrapper `_mlir_ciface_refjit_main` takes one
// pointer to a strided memref descriptor {T* allocated; T* aligned; int64 offset;
// int64 sizes[r]; int64 strides[r]} per memref. Outputs are written into caller-allocated
// arrays; ref arguments point at the RefBuffer's storage, so updates land in place.
#include "backend/native.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <string_view>

#include "backend/code_cache.h"
#include "backend/disjoint_or_as_add.h"
#include "backend/jit_link.h"
#include "backend/lowering.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "refjit/ir/verifier.h"
#include "runtime/collectives.h"
#include "runtime/host_callbacks.h"
// Conversion headers need mlir::Pass complete first (toolchain.md P5).
#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ComplexToLLVM/ComplexToLLVM.h"
#include "mlir/Conversion/ComplexToStandard/ComplexToStandard.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "runtime/kernels/float_mode.h"
#include "runtime/kernels/thread_pool.h"

namespace refjit {

using backend::kEntryName;

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void init_llvm_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

llvm::CodeGenOptLevel codegen_level(int opt_level) {
  if (opt_level <= 0) return llvm::CodeGenOptLevel::None;
  if (opt_level == 1) return llvm::CodeGenOptLevel::Less;
  if (opt_level == 2) return llvm::CodeGenOptLevel::Default;
  return llvm::CodeGenOptLevel::Aggressive;
}

void report(const CompileOptions& options, std::string_view pass, double ms,
            const std::function<std::string()>& text) {
  if (options.after_pass) options.after_pass(PassReport{pass, ms, text});
}

std::string module_text(mlir::ModuleOp module) {
  std::string s;
  llvm::raw_string_ostream os(s);
  module.print(os);
  return s;
}

using backend::module_text;

// Collects MLIR diagnostics so a failure can be reported in the thrown Error.
struct DiagnosticCollector {
  explicit DiagnosticCollector(mlir::MLIRContext& ctx)
      : handler(&ctx, [this](mlir::Diagnostic& d) {
          text += d.str() + "\n";
          return mlir::success();
        }) {}
  std::string text;
  mlir::ScopedDiagnosticHandler handler;
};

struct Lowered {
  std::unique_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  bool has_workspace = false;
  int64_t workspace_bytes = 0;
  std::vector<int> output_donor;  // per output: the argument it is computed in place of, or -1
};

// Per output of `jaxpr`: the argument position (constvars then invars) of the donated input
// array the plan returns in place as that output (its home), or -1.
std::vector<int> output_donors(const Jaxpr& jaxpr, const BufferPlan& plan) {
  std::vector<int> donor(jaxpr.outvars.size(), -1);
  if (!plan.assignment || plan.naive || plan.assignment->jaxprs.empty()) return donor;
  for (const Buffer& b : plan.assignment->jaxprs.front().buffers)
    if (b.origin == BufferOrigin::input && b.home >= 0 &&
        static_cast<size_t>(b.home) < donor.size() &&
        static_cast<size_t>(b.index) < jaxpr.invars.size() &&
        !jaxpr.type_of(jaxpr.invars[b.index]).is_ref)
      donor[b.home] = static_cast<int>(jaxpr.constvars.size()) + b.index;
  return donor;
}

Lowered build(const Jaxpr& jaxpr, const CompileOptions& options, CompileTimings& timings) {
  auto t0 = Clock::now();
  // Type-correct input is what keeps the MLIR builders from tripping over mismatched
  // types, so check it first (throws TypeError/RefError naming the eqn).
  refjit::verify(jaxpr);
  const BufferPlan plan = options.plan.empty() ? default_buffer_plan(jaxpr) : options.plan;
  timings.passes_ms = ms_since(t0);
  t0 = Clock::now();
  Lowered l;
  mlir::DialectRegistry registry;
  registry.insert<mlir::LLVM::LLVMDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  // What convert-to-llvm gathers its patterns from (lower_to_llvm_dialect).
  mlir::arith::registerConvertArithToLLVMInterface(registry);
  mlir::registerConvertComplexToLLVMInterface(registry);
  mlir::cf::registerConvertControlFlowToLLVMInterface(registry);
  mlir::registerConvertFuncToLLVMInterface(registry);
  mlir::registerConvertMathToLLVMInterface(registry);
  mlir::registerConvertMemRefToLLVMInterface(registry);
  l.ctx = std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  l.ctx->loadDialect<mlir::LLVM::LLVMDialect>();
  l.module = backend::build_module(*l.ctx, jaxpr, plan, l.workspace_bytes,
                                   {.runtime_kernels = options.runtime_kernels,
                                    .parallel_loops = options.parallel_loops,
                                    .chain_fission = options.chain_fission && options.opt_level > 0,
                                    .approximate_math = !options.exact_math});
  l.has_workspace = plan.use_workspace;
  l.output_donor = output_donors(jaxpr, plan);
  DiagnosticCollector diags(*l.ctx);
  if (mlir::failed(mlir::verify(*l.module)))
    throw Error("native backend: internal error, the generated MLIR does not verify:\n" +
                diags.text);
  timings.lower_ms = ms_since(t0);
  report(options, "mlir", timings.lower_ms, [&] { return module_text(*l.module); });
  return l;
}

// Which 16-bit float types the module's values (or their memrefs' elements) use.
struct HalfFloatUse {
  bool f16 = false, bf16 = false;
};
HalfFloatUse half_float_use(mlir::ModuleOp module) {
  HalfFloatUse use;
  auto note = [&](mlir::Type t) {
    if (auto m = mlir::dyn_cast<mlir::MemRefType>(t)) t = m.getElementType();
    use.f16 = use.f16 || t.isF16();
    use.bf16 = use.bf16 || t.isBF16();
  };
  module.walk([&](mlir::Operation* op) {
    for (mlir::Type t : op->getResultTypes()) note(t);
    for (mlir::Type t : op->getOperandTypes()) note(t);
  });
  return use;
}

// Whether the module computes with complex numbers (c64, c128).
bool uses_complex(mlir::ModuleOp module) {
  bool found = false;
  module.walk([&](mlir::Operation* op) {
    if (found) return;
    found = op->getDialect() && op->getDialect()->getNamespace() == "complex";
  });
  return found;
}

// The elementwise rules already compute the 16-bit floats in f32; these passes do the same for
// the arithmetic other rules emit on them (reductions, matmul loops, scatter combiners), and
// turn bf16 conversions into integer operations (x86 has no instruction for them everywhere).
void add_half_float_passes(mlir::PassManager& pm, mlir::ModuleOp module) {
  HalfFloatUse use = half_float_use(module);
  if (!use.f16 && !use.bf16) return;
  pm.addPass(mlir::math::createMathLegalizeToF32());
  std::vector<std::string> sources{"f16", "bf16"};
  pm.addPass(mlir::arith::createArithEmulateUnsupportedFloats(
      {.sourceTypeStrs = sources, .targetTypeStr = "f32"}));
  if (use.bf16) pm.addPass(mlir::arith::createArithExpandOpsPass({.includeBf16 = true}));
}

// memref-level module -> LLVM dialect (toolchain.md §4, memref part).
void lower_to_llvm_dialect(Lowered& l, const CompileOptions& options, CompileTimings& timings) {
  auto t0 = Clock::now();
  DiagnosticCollector diags(*l.ctx);
  if (!options.exact_math) {
    mlir::RewritePatternSet patterns(l.ctx.get());
    mlir::populateMathPolynomialApproximationPatterns(patterns);
    if (mlir::failed(mlir::applyPatternsAndFoldGreedily(*l.module, std::move(patterns))))
      throw Error("native backend: math approximation failed:\n" + diags.text);
  }
  if (uses_complex(*l.module)) {
    // Complex ops become arith and math on their parts (convert-to-llvm keeps the loads,
    // stores and moves of complex values); then the math ops with a libm function become
    // calls of it, since convert-to-llvm has no lowering for some of those the expansions
    // use (atan2, tan). Only modules with complex numbers pay for the calls.
    mlir::PassManager cx(l.ctx.get());
    cx.addPass(mlir::createConvertComplexToStandardPass());
    if (mlir::failed(cx.run(*l.module)))
      throw Error("native backend: internal error expanding complex numbers:\n" + diags.text);
    mlir::RewritePatternSet libm(l.ctx.get());
    mlir::populateMathToLibmConversionPatterns(libm);
    if (mlir::failed(mlir::applyPatternsAndFoldGreedily(*l.module, std::move(libm))))
      throw Error("native backend: internal error calling libm:\n" + diags.text);
  }
  mlir::PassManager pm(l.ctx.get());
  add_half_float_passes(pm, *l.module);
  pm.addPass(mlir::memref::createExpandStridedMetadataPass());
  pm.addPass(mlir::createLowerAffinePass());
  pm.addPass(mlir::createConvertSCFToCFPass());
  // One conversion with the math, arith, memref, func and cf patterns together (each dialect's
  // ConvertToLLVMPatternInterface, registered in build): one walk of the module instead of
  // five passes.
  pm.addPass(mlir::createConvertToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  if (mlir::failed(pm.run(*l.module)))
    throw Error("native backend: internal error in the MLIR pipeline:\n" + diags.text);
  // Conversion passes are partial (toolchain.md P6): anything left would fail translation.
  std::string leftover;
  l.module->walk([&](mlir::Operation* op) {
    llvm::StringRef ns = op->getDialect() ? op->getDialect()->getNamespace() : "";
    if (ns != "llvm" && !mlir::isa<mlir::ModuleOp>(op) && leftover.empty())
      leftover = op->getName().getStringRef().str();
  });
  if (!leftover.empty())
    throw Error("native backend: internal error, `" + leftover +
                "` survived the lowering to the LLVM dialect");
  timings.mlir_passes_ms = ms_since(t0);
  report(options, "llvm-dialect", timings.mlir_passes_ms, [&] { return module_text(*l.module); });
}

// The vector width for module `m`'s functions: 512 bits where the CPU has them (LLVM prefers 256
// on AVX-512 CPUs), but 256 when one part in eight or more of its float arithmetic is divisions
// and square roots, which 512-bit vectors do not speed up (slower on Zen 4: docs/backend.md). One
// width per module: a loop outlined for the threads and the same loop run serially must
// vectorise alike to give the same bits.
const char* preferred_vector_width(const llvm::Module& m) {
  int arithmetic = 0, dividing = 0;
  for (const llvm::Function& f : m)
    for (const llvm::BasicBlock& block : f)
      for (const llvm::Instruction& i : block) {
        if (!i.getType()->isFPOrFPVectorTy()) continue;
        const auto* intrinsic = llvm::dyn_cast<llvm::IntrinsicInst>(&i);
        const bool divides = i.getOpcode() == llvm::Instruction::FDiv ||
                             (intrinsic && intrinsic->getIntrinsicID() == llvm::Intrinsic::sqrt);
        arithmetic += divides || intrinsic || llvm::isa<llvm::BinaryOperator>(i);
        dividing += divides;
      }
  return dividing > 0 && 8 * dividing >= arithmetic ? "256" : "512";
}

}  // namespace

namespace backend {

std::string module_text(const llvm::Module& module) {
  std::string s;
  llvm::raw_string_ostream os(s);
  module.print(os, nullptr);
  return s;
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(const std::string& cpu, int opt_level) {
  init_llvm_once();
  std::string triple = llvm::sys::getDefaultTargetTriple();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target) throw Error("native backend: no LLVM target for the host: " + err);
  std::string cpu_name = cpu;
  llvm::SubtargetFeatures features;
  if (cpu == "host") {
    cpu_name = llvm::sys::getHostCPUName().str();
    for (auto& kv : llvm::sys::getHostCPUFeatures())
      features.AddFeature(kv.getKey(), kv.getValue());
  } else {
    // Checked first: LLVM only warns on stderr about an unknown CPU and carries on.
    std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(triple, "", ""));
    if (!sti || !sti->isCPUStringValid(cpu_name))
      throw Error(fmt::format(
          "unknown CPU '{}' for target {}; use host, generic, or an LLVM CPU name such as "
          "x86-64-v3 or skylake (`llc-19 -mcpu=help` lists them)",
          cpu, triple));
  }
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple, cpu_name, features.getString(), llvm::TargetOptions(),
                                  llvm::Reloc::PIC_, std::nullopt, codegen_level(opt_level)));
  if (!tm) throw Error("native backend: cannot create a target machine for " + triple);
  return tm;
}

void optimize_llvm_module(llvm::Module& module, llvm::TargetMachine& tm, int opt_level) {
  module.setDataLayout(tm.createDataLayout());
  module.setTargetTriple(tm.getTargetTriple().str());
  if (opt_level <= 0) return;
  // REFJIT_VECTOR_WIDTH=128, 256 or 512 sets the width whatever the code; another value is
  // reported once and ignored.
  const char* width = preferred_vector_width(module);
  if (const char* forced = std::getenv("REFJIT_VECTOR_WIDTH")) {
    static std::once_flag reported;
    if (std::string_view w = forced; w == "128" || w == "256" || w == "512")
      width = forced;
    else
      std::call_once(reported, [&] {
        fmt::print(stderr, "refjit: REFJIT_VECTOR_WIDTH={} is not 128, 256 or 512; ignored\n",
                   forced);
      });
  }
  for (llvm::Function& f : module) f.addFnAttr("prefer-vector-width", width);
  // LLVM's default pipeline, without its loop unrolling: loops nests with small constant
  // trip counts around vectorised bodies were unrolled whole (a tanh over f32[16,128]
  // became 64 copies of its polynomial), and the machine scheduler is quadratic in such
  // blocks: 700 ms of the 900 ms a 16-row RNN's gradient took to compile. The vectoriser
  // still interleaves (docs/backend.md "Measured compile latency").
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = false;
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerPeepholeEPCallback([](llvm::FunctionPassManager& fpm, llvm::OptimizationLevel) {
    fpm.addPass(DisjointOrAsAdd());
  });
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  const llvm::OptimizationLevel level = opt_level == 1   ? llvm::OptimizationLevel::O1
                                        : opt_level == 2 ? llvm::OptimizationLevel::O2
                                                         : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(level);
  mpm.run(module, mam);
}

std::string emit_machine_code(llvm::Module& module, llvm::TargetMachine& tm, bool object_file) {
  llvm::SmallString<0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager cg;
  if (tm.addPassesToEmitFile(
          cg, os, nullptr,
          object_file ? llvm::CodeGenFileType::ObjectFile : llvm::CodeGenFileType::AssemblyFile))
    throw Error(std::string("native backend: the target cannot emit ") +
                (object_file ? "object files" : "assembly"));
  cg.run(module);
  return std::string(buf.str());
}

LlvmLowered lower_to_llvm_ir(const Jaxpr& jaxpr, const CompileOptions& options,
                             llvm::LLVMContext& lctx, CompileTimings& timings) {
  Lowered l = build(jaxpr, options, timings);
  lower_to_llvm_dialect(l, options, timings);
  LlvmLowered out;
  out.module = mlir::translateModuleToLLVMIR(*l.module, lctx, "refjit");
  if (!out.module) throw Error("native backend: internal error translating to LLVM IR");
  out.has_workspace = l.has_workspace;
  out.workspace_bytes = l.workspace_bytes;
  return out;
}

}  // namespace backend

namespace {

// The storage of an output the code writes in full: not zero-filled (a 16 MB gradient would
// cost a second pass over memory). With REFJIT_POISON_OUTPUTS=1 (the test suites set it) it is
// filled with 0xff bytes instead (NaN, or -1), so code that read an output before writing it
// would show.
bool poison_fresh_memory() {
  static const bool poison = [] {
    const char* env = std::getenv("REFJIT_POISON_OUTPUTS");
    return env && std::string_view(env) != "0" && std::string_view(env) != "";
  }();
  return poison;
}

Array output_storage(const ArrayType& t) {
  const bool poison = poison_fresh_memory();
  Array a = Array::uninitialized(t);
  if (poison && a.byte_size() > 0)
    std::memset(a.mutable_data(), 0xff, static_cast<size_t>(a.byte_size()));
  return a;
}

std::vector<int64_t> descriptor(const void* data, const Shape& shape) {
  // {allocated, aligned, offset, sizes..., strides...}, row-major.
  std::vector<int64_t> d(3 + 2 * shape.size());
  d[0] = d[1] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(data));
  d[2] = 0;
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    d[3 + i] = shape[i];
    d[3 + shape.size() + i] = stride;
    stride *= shape[i];
  }
  return d;
}

}  // namespace

// 64-byte aligned scratch memory for one call's intermediates.
struct Workspace {
  struct Free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::unique_ptr<std::byte[], Free> data;
};

// JIT modules alive in this process; see native_live_module_count().
std::atomic<int> g_live_modules{0};

struct CompiledFunction::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;  // counted in g_live_modules while set
  ~Impl() {
    if (jit) g_live_modules.fetch_sub(1);
  }
  void (*entry)(void**) = nullptr;
  std::vector<Type> in_types;  // constvars then invars
  std::vector<ArrayType> out_types;
  CompileTimings timings;
  bool has_workspace = false;
  int64_t workspace_bytes = 0;
  std::vector<int> output_donor;  // Lowered::output_donor
  bool flush_subnormals = true;   // CompileOptions::flush_subnormals
  // Idle workspaces; a call takes one (or makes one) and gives it back, so sequential
  // calls reuse the same, already faulted-in, pages.
  mutable std::mutex pool_mu;
  mutable std::vector<Workspace> pool;
  mutable int workspaces_allocated = 0;

  Workspace take_workspace() const {
    {
      std::lock_guard<std::mutex> lock(pool_mu);
      if (!pool.empty()) {
        Workspace w = std::move(pool.back());
        pool.pop_back();
        return w;
      }
      ++workspaces_allocated;
    }
    size_t n = static_cast<size_t>(std::max<int64_t>(workspace_bytes, 64));
    Workspace w{std::unique_ptr<std::byte[], Workspace::Free>(
        static_cast<std::byte*>(::operator new[](n, std::align_val_t(64))))};
    // Under REFJIT_POISON_OUTPUTS the scratch memory starts as 0xff bytes too, so code that
    // read an intermediate before writing it fails the same way whatever the heap held.
    if (poison_fresh_memory()) std::memset(w.data.get(), 0xff, n);
    return w;
  }
  void give_back(Workspace w) const {
    std::lock_guard<std::mutex> lock(pool_mu);
    pool.push_back(std::move(w));
  }
};

CompiledFunction::CompiledFunction(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledFunction::CompiledFunction(CompiledFunction&&) noexcept = default;
CompiledFunction& CompiledFunction::operator=(CompiledFunction&&) noexcept = default;
CompiledFunction::~CompiledFunction() = default;

int native_live_module_count() { return g_live_modules.load(); }

const CompileTimings& CompiledFunction::timings() const { return impl_->timings; }
int64_t CompiledFunction::workspace_bytes() const { return impl_->workspace_bytes; }
int CompiledFunction::workspaces_allocated() const {
  std::lock_guard<std::mutex> lock(impl_->pool_mu);
  return impl_->workspaces_allocated;
}

std::vector<RtValue> CompiledFunction::operator()(const std::vector<RtValue>& args) const {
  std::vector<RtValue> mine = args;  // shares the arrays' storage: nothing is taken over
  return call(mine, false);
}

std::vector<RtValue> CompiledFunction::operator()(std::vector<RtValue>&& args) const {
  return call(args, true);
}

void CompiledFunction::call_into(const std::vector<RtValue>& args, void* const* outputs) const {
  std::vector<RtValue> mine = args;
  (void)call(mine, false, outputs);
}

std::vector<RtValue> CompiledFunction::call(std::vector<RtValue>& args, bool take,
                                            void* const* into) const {
  const Impl& f = *impl_;
  if (args.size() != f.in_types.size())
    throw Error(
        fmt::format("native function: expected {} values (constvars then invars) but "
                    "got {}",
                    f.in_types.size(), args.size()));
  std::vector<std::vector<int64_t>> descs;
  descs.reserve(args.size() + f.out_types.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Type& want = f.in_types[i];
    if (want.is_ref) {
      const RefBufferPtr* r = std::get_if<RefBufferPtr>(&args[i]);
      if (!r || !*r)
        throw Error(fmt::format("native function: argument {} must be a ref {}", i, want.str()));
      if ((*r)->type() != want.array)
        throw Error(fmt::format("native function: argument {} is a ref of {} but {} is expected", i,
                                (*r)->type().str(), want.str()));
      if ((*r)->frozen())
        throw RefError("E12", fmt::format("native function: argument {} is a ref that was "
                                          "already frozen; a ref may not be used after `freeze`",
                                          i));
      // The compiled code updates ref buffers in place assuming they do not overlap.
      for (size_t k = 0; k < i; ++k)
        if (const RefBufferPtr* other = std::get_if<RefBufferPtr>(&args[k]); other && *other == *r)
          throw RefError("E7", fmt::format("native function: the same ref is passed as "
                                           "argument {} and as argument {}; pass it once",
                                           k, i));
      descs.push_back(descriptor((*r)->value().mutable_data(), want.shape()));
    } else {
      const Array* a = std::get_if<Array>(&args[i]);
      if (!a) {
        const RefBufferPtr& r = std::get<RefBufferPtr>(args[i]);
        throw Error(
            fmt::format("native function: argument {} must be an array {}, not a ref "
                        "(got {})",
                        i, want.str(), r ? Type::ref(r->type()).str() : "a null ref"));
      }
      if (a->type() != want.array)
        throw Error(fmt::format("native function: argument {} has type {} but {} is expected", i,
                                a->type().str(), want.str()));
      descs.push_back(descriptor(a->data(), want.shape()));
    }
  }
  std::vector<RtValue> outs;
  outs.reserve(f.out_types.size());
  for (size_t j = 0; j < f.out_types.size(); ++j) {
    const ArrayType& t = f.out_types[j];
    if (into) {
      descs.push_back(descriptor(into[j], t.shape));
      continue;
    }
    // A donated input the plan returns in place, held by nobody else: the output takes its
    // storage, and the code's entry copy into the output sees one pointer and skips itself.
    const int d = j < f.output_donor.size() ? f.output_donor[j] : -1;
    Array* donor = take && d >= 0 ? std::get_if<Array>(&args[static_cast<size_t>(d)]) : nullptr;
    Array a =
        donor && donor->type() == t && donor->unique() ? std::move(*donor) : output_storage(t);
    descs.push_back(descriptor(a.mutable_data(), t.shape));
    outs.emplace_back(std::move(a));
  }
  Workspace ws;
  if (f.has_workspace) {
    ws = f.take_workspace();
    descs.push_back(descriptor(ws.data.get(), Shape{f.workspace_bytes}));
  }
  std::vector<void*> desc_ptrs(descs.size());
  std::vector<void*> packed(descs.size());
  for (size_t i = 0; i < descs.size(); ++i) {
    desc_ptrs[i] = descs[i].data();
    packed[i] = &desc_ptrs[i];
  }
  {
    const uint32_t mode = kernels::current_float_mode();
    kernels::ScopedFloatMode as_configured(f.flush_subnormals ? kernels::flushing_subnormals(mode)
                                                              : mode);
    backend::call_entry(f.entry, packed.data());
  }
  if (f.has_workspace) f.give_back(std::move(ws));
  throw_pending_collective_error();  // a collective that failed inside the code
  throw_pending_host_call_error();   // a host call that failed inside the code
  return outs;
}

bool exact_math_by_default() {
  const char* env = std::getenv("REFJIT_EXACT_MATH");
  return env && std::string_view(env) != "0" && std::string_view(env) != "";
}

namespace {

// REFJIT_LOG_COMPILES=1 (refjit.set_log_compiles in Python): one line on stderr per native
// compile, as JAX's jax_log_compiles, so a user can see what compiles and what it costs.
void log_compile(const Jaxpr& jaxpr, const CompileTimings& t) {
  const char* env = std::getenv("REFJIT_LOG_COMPILES");
  if (!env || std::string_view(env) == "0" || std::string_view(env).empty()) return;
  std::vector<std::string> ins, outs;
  for (Var v : jaxpr.invars) ins.push_back(jaxpr.type_of(v).str());
  for (const Atom& a : jaxpr.outvars) outs.push_back(jaxpr.type_of(a).str());
  fmt::print(stderr,
             "refjit: compiled ({}) -> ({}), {} eqns, at -O{} in {:.1f} ms ({}: lowering {:.1f} "
             "ms, LLVM {:.1f} ms, linking/codegen {:.1f} ms)\n",
             fmt::join(ins, ", "), fmt::join(outs, ", "), jaxpr.eqns.size(), t.opt_level,
             t.total_ms(), t.from_cache ? "machine code from the disk cache" : "LLVM ran",
             t.passes_ms + t.lower_ms + t.mlir_passes_ms, t.llvm_opt_ms, t.codegen_ms);
}

}  // namespace

CompiledFunction compile_native(const Jaxpr& jaxpr, const CompileOptions& options) {
  auto impl = std::make_unique<CompiledFunction::Impl>();
  for (Var v : jaxpr.constvars) impl->in_types.push_back(jaxpr.type_of(v));
  for (Var v : jaxpr.invars) impl->in_types.push_back(jaxpr.type_of(v));
  for (const Atom& a : jaxpr.outvars) impl->out_types.push_back(jaxpr.type_of(a).array);

  impl->timings.opt_level = options.opt_level;
  Lowered l = build(jaxpr, options, impl->timings);
  impl->has_workspace = l.has_workspace;
  impl->workspace_bytes = l.workspace_bytes;
  impl->output_donor = l.output_donor;
  impl->flush_subnormals = options.flush_subnormals;
  lower_to_llvm_dialect(l, options, impl->timings);

  // Machine code from the on-disk cache (backend/code_cache.h), else translation, then LLVM's
  // optimisation and code generation (backend/jit_link.h).
  auto t0 = Clock::now();
  const std::optional<std::string> key =
      backend::code_cache_key(module_text(*l.module), options.opt_level);
  std::optional<backend::CachedCode> cached;
  if (key) cached = backend::load_cached_code(*key);
  backend::LinkedCode code;
  if (cached) {
    code = backend::link_objects(cached->objects, cached->codegen_level);
    impl->timings.from_cache = true;
    report(options, "llvm", 0, [] { return std::string("(machine code from the cache)"); });
  } else {
    llvm::LLVMContext lctx;
    std::unique_ptr<llvm::Module> module = mlir::translateModuleToLLVMIR(*l.module, lctx, "refjit");
    if (!module) throw Error("native backend: internal error translating to LLVM IR");
    std::vector<std::string> objects;
    code = backend::compile_and_link(
        std::move(module), options.opt_level, kernels::thread_count(),
        [&](const std::function<std::string()>& text) {
          impl->timings.llvm_opt_ms = ms_since(t0);
          report(options, "llvm", impl->timings.llvm_opt_ms, text);
        },
        key ? &objects : nullptr);
    if (key) backend::store_cached_code(*key, {std::move(objects), code.codegen_level});
  }
  g_live_modules.fetch_add(1);
  impl->jit = std::move(code.jit);
  impl->entry = code.entry;
  impl->timings.codegen_ms = code.codegen_ms;
  impl->timings.codegen_level = code.codegen_level;
  impl->timings.pieces = code.pieces;
  report(options, "asm", impl->timings.codegen_ms, [] {
    return std::string("(machine code in memory; `refjit dump --emit=asm` prints it)");
  });
  log_compile(jaxpr, impl->timings);
  return CompiledFunction(std::move(impl));
}

std::string emit_mlir(const Jaxpr& jaxpr, const CompileOptions& options) {
  CompileTimings t;
  Lowered l = build(jaxpr, options, t);
  return module_text(*l.module);
}

std::string emit_llvm_dialect(const Jaxpr& jaxpr, const CompileOptions& options) {
  CompileTimings t;
  Lowered l = build(jaxpr, options, t);
  lower_to_llvm_dialect(l, options, t);
  return module_text(*l.module);
}

namespace {

// The optimised LLVM IR of `jaxpr`, reported as pass `llvm`.
std::unique_ptr<llvm::Module> optimized_llvm_ir(const Jaxpr& jaxpr, const CompileOptions& options,
                                                llvm::LLVMContext& lctx, llvm::TargetMachine& tm) {
  CompileTimings t;
  backend::LlvmLowered l = backend::lower_to_llvm_ir(jaxpr, options, lctx, t);
  auto t0 = Clock::now();
  backend::optimize_llvm_module(*l.module, tm, options.opt_level);
  report(options, "llvm", ms_since(t0), [&] { return module_text(*l.module); });
  return std::move(l.module);
}

}  // namespace

std::string emit_llvm_ir(const Jaxpr& jaxpr, const CompileOptions& options) {
  llvm::LLVMContext lctx;
  auto tm = backend::make_target_machine("host", options.opt_level);
  return module_text(*optimized_llvm_ir(jaxpr, options, lctx, *tm));
}

std::string emit_asm(const Jaxpr& jaxpr, const CompileOptions& options) {
  llvm::LLVMContext lctx;
  auto tm = backend::make_target_machine("host", options.opt_level);
  std::unique_ptr<llvm::Module> module = optimized_llvm_ir(jaxpr, options, lctx, *tm);
  auto t0 = Clock::now();
  std::string text = backend::emit_machine_code(*module, *tm, /*object_file=*/false);
  report(options, "asm", ms_since(t0), [&] { return text; });
  return text;
}

}  // namespace refjit
