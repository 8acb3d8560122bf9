#include "backend/parallel_loops.h"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

#include "backend/mlir_pch.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/RegionUtils.h"

namespace refjit::backend {

namespace {

using mlir::Value;
namespace arith = mlir::arith;
namespace LLVM = mlir::LLVM;

constexpr const char* kRuntimeEntry = "refjit_parallel_for";

// How many 64-bit words of the context carry a value of type `t`; 0 if it cannot be carried.
// A ranked memref is its aligned base pointer, offset, sizes and strides (the body rebuilds
// its descriptor); a scalar is one word.
int64_t words_for(mlir::Type t) {
  if (auto m = mlir::dyn_cast<mlir::MemRefType>(t))
    return m.getLayout().isIdentity() || mlir::isa<mlir::StridedLayoutAttr>(m.getLayout())
               ? 2 + 2 * m.getRank()
               : 0;
  if (t.isIndex()) return 1;
  if (t.isIntOrFloat()) return t.getIntOrFloatBitWidth() <= 64 ? 1 : 0;
  return 0;
}

bool is_constant(Value v) {
  mlir::Operation* def = v.getDefiningOp();
  return def && def->getNumResults() == 1 && def->hasTrait<mlir::OpTrait::ConstantLike>();
}

// An op that only describes other memory (a view, a subview, a reshape).
bool is_view(mlir::Operation* op) {
  namespace memref = mlir::memref;
  return mlir::isa<memref::ViewOp, memref::SubViewOp, memref::ReinterpretCastOp, memref::CastOp,
                   memref::CollapseShapeOp, memref::ExpandShapeOp, memref::TransposeOp>(op);
}

// What a loop body needs from outside, sorted by how the body gets it: constants and views
// are made again inside (views from their own live-ins, in definition order), everything else
// is packed. Views are remade rather than packed because the metadata MLIR extracts from a
// memref.view into a byte buffer leaves out the view's byte shift.
struct LiveIns {
  std::vector<Value> constants, packed;
  std::vector<mlir::Operation*> views;

  void add(Value v) {
    if (!seen_.insert(v).second) return;
    mlir::Operation* def = v.getDefiningOp();
    if (def && is_view(def)) {
      for (Value operand : def->getOperands()) add(operand);
      views.push_back(def);
      return;
    }
    (is_constant(v) ? constants : packed).push_back(v);
  }

 private:
  llvm::DenseSet<Value> seen_;
};

// Scalars to and from a context word.
Value to_word(mlir::OpBuilder& b, mlir::Location loc, Value v) {
  mlir::Type i64 = b.getI64Type();
  mlir::Type t = v.getType();
  if (t.isIndex()) return b.create<arith::IndexCastOp>(loc, i64, v);
  if (mlir::isa<mlir::FloatType>(t))
    v = b.create<arith::BitcastOp>(loc, b.getIntegerType(t.getIntOrFloatBitWidth()), v);
  if (v.getType().getIntOrFloatBitWidth() < 64) v = b.create<arith::ExtUIOp>(loc, i64, v);
  return v;
}

Value from_word(mlir::OpBuilder& b, mlir::Location loc, Value w, mlir::Type t) {
  if (t.isIndex()) return b.create<arith::IndexCastOp>(loc, t, w);
  const unsigned bits = t.getIntOrFloatBitWidth();
  if (bits < 64) w = b.create<arith::TruncIOp>(loc, b.getIntegerType(bits), w);
  if (mlir::isa<mlir::FloatType>(t)) w = b.create<arith::BitcastOp>(loc, t, w);
  return w;
}

// Reads and writes consecutive words of a context.
class Words {
 public:
  Words(mlir::OpBuilder& b, mlir::Location loc, Value ctx) : b_(b), loc_(loc), ctx_(ctx) {}

  void store(Value word) { b_.create<LLVM::StoreOp>(loc_, word, next()); }
  Value load() { return b_.create<LLVM::LoadOp>(loc_, b_.getI64Type(), next()); }

 private:
  Value next() {
    auto ptr = LLVM::LLVMPointerType::get(b_.getContext());
    return b_.create<LLVM::GEPOp>(loc_, ptr, b_.getI64Type(), ctx_,
                                  llvm::ArrayRef<LLVM::GEPArg>{LLVM::GEPArg(index_++)});
  }
  mlir::OpBuilder& b_;
  mlir::Location loc_;
  Value ctx_;
  int32_t index_ = 0;
};

void pack(mlir::OpBuilder& b, mlir::Location loc, Words& words, Value v) {
  if (!mlir::isa<mlir::MemRefType>(v.getType())) return words.store(to_word(b, loc, v));
  auto md = b.create<mlir::memref::ExtractStridedMetadataOp>(loc, v);
  Value base = b.create<mlir::memref::ExtractAlignedPointerAsIndexOp>(loc, md.getBaseBuffer());
  words.store(to_word(b, loc, base));
  words.store(to_word(b, loc, md.getOffset()));
  for (Value s : md.getSizes()) words.store(to_word(b, loc, s));
  for (Value s : md.getStrides()) words.store(to_word(b, loc, s));
}

// The memref `packed` described, as a descriptor built in the LLVM dialect and cast to its
// memref type (the casts cancel once the memref is lowered to the same descriptor).
Value unpack(mlir::OpBuilder& b, mlir::Location loc, Words& words, mlir::Type t) {
  auto m = mlir::dyn_cast<mlir::MemRefType>(t);
  if (!m) return from_word(b, loc, words.load(), t);
  mlir::MLIRContext* ctx = b.getContext();
  auto ptr_t = LLVM::LLVMPointerType::get(ctx);
  mlir::Type i64 = b.getI64Type();
  const int64_t rank = m.getRank();
  std::vector<mlir::Type> fields{ptr_t, ptr_t, i64};
  if (rank > 0) {
    fields.push_back(LLVM::LLVMArrayType::get(i64, static_cast<unsigned>(rank)));
    fields.push_back(LLVM::LLVMArrayType::get(i64, static_cast<unsigned>(rank)));
  }
  auto desc_t = LLVM::LLVMStructType::getLiteral(ctx, fields);
  Value base = b.create<LLVM::IntToPtrOp>(loc, ptr_t, words.load());
  Value d = b.create<LLVM::UndefOp>(loc, desc_t);
  d = b.create<LLVM::InsertValueOp>(loc, d, base, llvm::ArrayRef<int64_t>{0});
  d = b.create<LLVM::InsertValueOp>(loc, d, base, llvm::ArrayRef<int64_t>{1});
  d = b.create<LLVM::InsertValueOp>(loc, d, words.load(), llvm::ArrayRef<int64_t>{2});
  for (int64_t field : {3, 4})
    for (int64_t i = 0; i < rank; ++i)
      d = b.create<LLVM::InsertValueOp>(loc, d, words.load(), llvm::ArrayRef<int64_t>{field, i});
  return b.create<mlir::UnrealizedConversionCastOp>(loc, t, d).getResult(0);
}

mlir::FunctionType body_type(mlir::OpBuilder& b) {
  mlir::Type i64 = b.getI64Type();
  return b.getFunctionType({LLVM::LLVMPointerType::get(b.getContext()), i64, i64}, {});
}

// Function `name` of `module` (private, of `type`), declared at its start on first use.
mlir::func::FuncOp declare(mlir::OpBuilder& b, mlir::ModuleOp module, const std::string& name,
                           mlir::FunctionType type) {
  if (auto fn = module.lookupSymbol<mlir::func::FuncOp>(name)) return fn;
  mlir::OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  auto fn = b.create<mlir::func::FuncOp>(module.getLoc(), name, type);
  fn.setPrivate();
  return fn;
}

void declare_runtime_entry(mlir::OpBuilder& b, mlir::ModuleOp module) {
  mlir::Type i64 = b.getI64Type();
  declare(
      b, module, kRuntimeEntry,
      b.getFunctionType({body_type(b), LLVM::LLVMPointerType::get(b.getContext()), i64, i64}, {}));
}

// How an outlined loop is called: over the runtime's threads, once, directly, or by the matrix
// kernel called right after it (an epilogue).
enum class CallBy { runtime, direct, kernel };

// The `_then` variant of kernel entry `call`'s callee, taking an epilogue function and its
// context after the callee's own arguments, declared on first use.
mlir::func::FuncOp epilogue_entry(mlir::OpBuilder& b, mlir::ModuleOp module,
                                  mlir::func::CallOp call) {
  std::vector<mlir::Type> ins(call.getOperandTypes().begin(), call.getOperandTypes().end());
  ins.push_back(body_type(b));
  ins.push_back(LLVM::LLVMPointerType::get(b.getContext()));
  return declare(b, module, (call.getCallee() + "_then").str(), b.getFunctionType(ins, {}));
}

// Replaces `loop` (0..n step 1, no results) by a call of a new function `NAME(ctx, lo, hi)`
// over [0, n): through the runtime (a parallel loop), directly, or (an epilogue) by
// `kernel_call`, which is replaced by its `_then` entry.
bool outline(mlir::OpBuilder& b, mlir::ModuleOp module, mlir::scf::ForOp loop,
             const std::string& name, CallBy call_by, mlir::func::CallOp kernel_call = {}) {
  std::optional<int64_t> lower = mlir::getConstantIntValue(loop.getLowerBound());
  std::optional<int64_t> upper = mlir::getConstantIntValue(loop.getUpperBound());
  std::optional<int64_t> step = mlir::getConstantIntValue(loop.getStep());
  if (!lower || *lower != 0 || !upper || !step || *step != 1 || loop.getNumResults() != 0)
    return false;
  llvm::SetVector<Value> live_ins;
  mlir::getUsedValuesDefinedAbove(loop.getRegion(), live_ins);
  LiveIns in_body;
  for (Value v : live_ins) in_body.add(v);
  int64_t word_count = 0;
  for (Value v : in_body.packed) {
    const int64_t w = words_for(v.getType());
    if (w == 0) return false;
    word_count += w;
  }
  const mlir::Location loc = loop.getLoc();
  mlir::MLIRContext* ctx = b.getContext();
  auto ptr_t = LLVM::LLVMPointerType::get(ctx);
  mlir::Type i64 = b.getI64Type();

  // The body function: unpack the live-ins, then the loop over [lo, hi).
  mlir::OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  auto body = b.create<mlir::func::FuncOp>(loc, name, body_type(b));
  body.setPrivate();
  mlir::Block* entry = body.addEntryBlock();
  b.setInsertionPointToStart(entry);
  mlir::IRMapping map;
  for (Value c : in_body.constants) map.map(c, b.clone(*c.getDefiningOp())->getResult(0));
  Words in(b, loc, entry->getArgument(0));
  for (Value v : in_body.packed) map.map(v, unpack(b, loc, in, v.getType()));
  for (mlir::Operation* view : in_body.views) b.clone(*view, map);
  auto as_index = [&](Value w) {
    return b.create<arith::IndexCastOp>(loc, b.getIndexType(), w).getResult();
  };
  auto range = b.create<mlir::scf::ForOp>(loc, as_index(entry->getArgument(1)),
                                          as_index(entry->getArgument(2)),
                                          b.create<arith::ConstantIndexOp>(loc, 1));
  map.map(loop.getInductionVar(), range.getInductionVar());
  b.setInsertionPoint(range.getBody()->getTerminator());
  for (mlir::Operation& op : loop.getBody()->without_terminator()) b.clone(op, map);
  b.setInsertionPointToEnd(entry);
  b.create<mlir::func::ReturnOp>(loc);
  body.walk([](mlir::Operation* op) {
    op->removeAttr(kParallelAttr);
    op->removeAttr(kEpilogueAttr);
  });

  // The caller: a context on the stack (allocated once, in the function's entry block, as the
  // loop may sit in another loop), filled where the loop was, then the call.
  auto caller = loop->getParentOfType<mlir::func::FuncOp>();
  b.setInsertionPointToStart(&caller.getBody().front());
  Value size =
      b.create<LLVM::ConstantOp>(loc, i64, b.getI64IntegerAttr(std::max<int64_t>(1, word_count)));
  Value context = b.create<LLVM::AllocaOp>(loc, ptr_t, i64, size, /*alignment=*/8);
  b.setInsertionPoint(loop);
  Words out(b, loc, context);
  for (Value v : in_body.packed) pack(b, loc, out, v);
  if (call_by == CallBy::kernel) {
    Value fn = b.create<mlir::func::ConstantOp>(
        loc, body_type(b), mlir::FlatSymbolRefAttr::get(body.getSymNameAttr()));
    std::vector<Value> args(kernel_call.getOperands().begin(), kernel_call.getOperands().end());
    args.push_back(fn);
    args.push_back(context);
    b.setInsertionPoint(kernel_call);
    b.create<mlir::func::CallOp>(loc, epilogue_entry(b, module, kernel_call), args);
    kernel_call.erase();
    loop.erase();
    return true;
  }
  Value n = b.create<arith::ConstantIntOp>(loc, *upper, 64);
  if (call_by == CallBy::runtime) {
    Value fn = b.create<mlir::func::ConstantOp>(
        loc, body_type(b), mlir::FlatSymbolRefAttr::get(body.getSymNameAttr()));
    const auto min_per_task = loop->getAttrOfType<mlir::IntegerAttr>(kParallelAttr).getInt();
    Value grain = b.create<arith::ConstantIntOp>(loc, min_per_task, 64);
    b.create<mlir::func::CallOp>(loc, kRuntimeEntry, mlir::TypeRange{},
                                 mlir::ValueRange{fn, context, n, grain});
  } else {
    Value zero = b.create<arith::ConstantIntOp>(loc, 0, 64);
    b.create<mlir::func::CallOp>(loc, body, mlir::ValueRange{context, zero, n});
  }
  loop.erase();
  return true;
}

}  // namespace

void outline_parallel_loops(mlir::ModuleOp module) {
  std::vector<mlir::scf::ForOp> loops;
  module.walk([&](mlir::scf::ForOp loop) {
    if (!loop->hasAttr(kParallelAttr)) return;
    for (mlir::Operation* p = loop->getParentOp(); p; p = p->getParentOp())
      if (p->hasAttr(kParallelAttr)) return;
    loops.push_back(loop);
  });
  if (loops.empty()) return;
  mlir::OpBuilder b(module.getContext());
  int number = 0;
  for (mlir::scf::ForOp loop : loops) {
    if (outline(b, module, loop, fmt::format("refjit_parallel_body_{}", number), CallBy::runtime)) {
      ++number;
      continue;
    }
    loop->removeAttr(kParallelAttr);
  }
  if (number > 0) declare_runtime_entry(b, module);
}

void outline_epilogues(mlir::ModuleOp module) {
  std::vector<mlir::scf::ForOp> loops;
  module.walk([&](mlir::scf::ForOp loop) {
    if (loop->hasAttr(kEpilogueAttr)) loops.push_back(loop);
  });
  mlir::OpBuilder b(module.getContext());
  int number = 0;
  for (mlir::scf::ForOp loop : loops) {
    auto call = mlir::dyn_cast_or_null<mlir::func::CallOp>(loop->getNextNode());
    if (!call || !(call.getCallee().starts_with("refjit_gemm_") ||
                   call.getCallee().starts_with("refjit_im2col_gemm_")))
      throw std::logic_error("an epilogue loop is not followed by its matrix kernel call");
    if (outline(b, module, loop, fmt::format("refjit_epilogue_{}", number), CallBy::kernel, call)) {
      ++number;
      continue;
    }
    loop->removeAttr(kEpilogueAttr);
    loop->moveAfter(call);
  }
}

void outline_large_loops(mlir::ModuleOp module) {
  std::vector<mlir::scf::ForOp> loops;
  module.walk([&](mlir::func::FuncOp f) {
    for (mlir::Operation& op : f.getBody().getOps()) {
      auto loop = mlir::dyn_cast<mlir::scf::ForOp>(op);
      if (!loop) continue;
      int64_t ops = 0;
      loop->walk([&](mlir::Operation*) { ++ops; });
      if (ops >= kOutlineMinOps) loops.push_back(loop);
    }
  });
  mlir::OpBuilder b(module.getContext());
  int number = 0;
  for (mlir::scf::ForOp loop : loops)
    if (outline(b, module, loop, fmt::format("refjit_loop_body_{}", number), CallBy::direct))
      ++number;
}

}  // namespace refjit::backend
