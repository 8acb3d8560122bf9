// The C-callable wrapper around each lowered body of an AOT object, in LLVM IR.
#include <fmt/format.h>

#include "backend/aot_entry.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "refjit/ir/error.h"

namespace refjit::aot {

namespace {

llvm::Type* scalar_llvm_type(llvm::LLVMContext& c, DType d) {
  if (d == DType::f32) return llvm::Type::getFloatTy(c);
  if (d == DType::f64) return llvm::Type::getDoubleTy(c);
  return llvm::Type::getIntNTy(c, static_cast<unsigned>(bit_width(d)));
}

}  // namespace

void add_wrapper(llvm::Module& m, const CEntry& e, const ResidualStruct* rs, bool has_workspace) {
  llvm::LLVMContext& c = m.getContext();
  llvm::Function* body = m.getFunction(kBodyEntry);
  if (!body) throw Error("aot: internal error, the lowered module has no refjit_main");
  body->setName(e.symbol + "__body");
  body->setLinkage(llvm::GlobalValue::InternalLinkage);
  // Everything else the module defines is private to the object as well.
  for (llvm::Function& f : m.functions())
    if (!f.isDeclaration()) f.setLinkage(llvm::GlobalValue::InternalLinkage);
  for (llvm::GlobalVariable& g : m.globals())
    if (!g.isDeclaration()) g.setLinkage(llvm::GlobalValue::InternalLinkage);
  if (llvm::Function* ciface = m.getFunction(std::string("_mlir_ciface_") + kBodyEntry))
    if (ciface->use_empty()) ciface->eraseFromParent();

  auto* ptr = llvm::PointerType::getUnqual(c);
  auto* i64 = llvm::Type::getInt64Ty(c);
  auto* i32 = llvm::Type::getInt32Ty(c);
  auto* i8 = llvm::Type::getInt8Ty(c);
  std::vector<llvm::Type*> param_types;
  for (const CParam& p : e.params)
    param_types.push_back(p.kind == ParamKind::scalar_in ? scalar_llvm_type(c, p.type.dtype)
                                                         : static_cast<llvm::Type*>(ptr));
  auto* fty = llvm::FunctionType::get(i32, param_types, false);
  if (m.getFunction(e.symbol))
    throw Error(
        fmt::format("aot: the symbol '{}' clashes with a function the program uses; "
                    "choose another --name",
                    e.symbol));
  auto* fn = llvm::Function::Create(fty, llvm::GlobalValue::ExternalLinkage, e.symbol, m);
  for (size_t i = 0; i < e.params.size(); ++i) {
    fn->getArg(i)->setName(e.params[i].name);
    if (e.params[i].kind == ParamKind::scalar_in && e.params[i].type.dtype == DType::bool_)
      fn->addParamAttr(i, llvm::Attribute::ZExt);
  }
  fn->addFnAttr(llvm::Attribute::NoUnwind);

  auto* entry = llvm::BasicBlock::Create(c, "entry", fn);
  auto* null_bb = llvm::BasicBlock::Create(c, "null_argument", fn);
  auto* run_bb = llvm::BasicBlock::Create(c, "run", fn);
  llvm::IRBuilder<> b(entry);
  llvm::IRBuilder<> rb(null_bb);
  rb.CreateRet(llvm::ConstantInt::get(i32, 2));

  // NULL checks (a zero-element array may be NULL: nothing is read or written there).
  llvm::Value* any_null = b.getFalse();
  for (size_t i = 0; i < e.params.size(); ++i) {
    const CParam& p = e.params[i];
    if (p.kind == ParamKind::scalar_in) continue;
    if (p.kind != ParamKind::residuals && p.type.num_elements() == 0) continue;
    any_null =
        b.CreateOr(any_null, b.CreateICmpEQ(fn->getArg(i), llvm::ConstantPointerNull::get(ptr)));
  }
  b.CreateCondBr(any_null, null_bb, run_bb);
  b.SetInsertPoint(run_bb);

  // Scalars by value live in stack slots so the body can take their address.
  std::vector<llvm::Value*> base(e.params.size());
  for (size_t i = 0; i < e.params.size(); ++i) {
    const CParam& p = e.params[i];
    if (p.kind != ParamKind::scalar_in) {
      base[i] = fn->getArg(i);
      continue;
    }
    llvm::Value* v = fn->getArg(i);
    if (p.type.dtype == DType::bool_) v = b.CreateZExt(v, i8);
    llvm::AllocaInst* slot = b.CreateAlloca(v->getType());
    b.CreateStore(v, slot);
    base[i] = slot;
  }
  int residual_param = -1;
  for (size_t i = 0; i < e.params.size(); ++i)
    if (e.params[i].kind == ParamKind::residuals) residual_param = static_cast<int>(i);

  std::vector<llvm::Value*> args;
  auto push_desc = [&](llvm::Value* p, const Shape& shape) {
    args.push_back(p);
    args.push_back(p);
    args.push_back(llvm::ConstantInt::get(i64, 0));
    for (int64_t d : shape) args.push_back(llvm::ConstantInt::get(i64, d));
    int64_t stride = 1;
    std::vector<int64_t> strides(shape.size());
    for (size_t k = shape.size(); k-- > 0;) {
      strides[k] = stride;
      stride *= shape[k];
    }
    for (int64_t s : strides) args.push_back(llvm::ConstantInt::get(i64, s));
  };
  const Jaxpr& j = *e.jaxpr;
  std::vector<ArrayType> slot_types;
  for (Var v : j.constvars) slot_types.push_back(j.type_of(v).array);
  for (Var v : j.invars) slot_types.push_back(j.type_of(v).array);
  for (const Atom& a : j.outvars) slot_types.push_back(j.type_of(a).array);
  if (slot_types.size() != e.slots.size())
    throw Error("aot: internal error, slot count does not match the jaxpr");
  for (size_t k = 0; k < e.slots.size(); ++k) {
    const Slot& s = e.slots[k];
    llvm::Value* p;
    if (s.from_field) {
      if (residual_param < 0 || !rs) throw Error("aot: internal error, no residual parameter");
      p = b.CreateConstInBoundsGEP1_64(i8, fn->getArg(residual_param),
                                       static_cast<uint64_t>(rs->fields.at(s.index).offset));
    } else {
      p = base.at(s.index);
    }
    push_desc(p, slot_types[k].shape);
  }

  llvm::Value* raw = nullptr;
  if (has_workspace) {
    llvm::Value* aligned;
    if (e.workspace_bytes > 0) {
      llvm::FunctionCallee malloc_fn = m.getOrInsertFunction("malloc", ptr, i64);
      raw = b.CreateCall(malloc_fn, {llvm::ConstantInt::get(i64, e.workspace_bytes + 64)});
      auto* oom_bb = llvm::BasicBlock::Create(c, "out_of_memory", fn);
      auto* ok_bb = llvm::BasicBlock::Create(c, "allocated", fn);
      b.CreateCondBr(b.CreateICmpEQ(raw, llvm::ConstantPointerNull::get(ptr)), oom_bb, ok_bb);
      llvm::IRBuilder<> ob(oom_bb);
      ob.CreateRet(llvm::ConstantInt::get(i32, 1));
      b.SetInsertPoint(ok_bb);
      // Round up to 64 bytes, as the lowering's static workspace offsets assume.
      llvm::Value* addr = b.CreatePtrToInt(raw, i64);
      llvm::Value* pad = b.CreateAnd(b.CreateSub(llvm::ConstantInt::get(i64, 0), addr),
                                     llvm::ConstantInt::get(i64, 63));
      aligned = b.CreateInBoundsGEP(i8, raw, pad);
    } else {
      auto* a = b.CreateAlloca(llvm::ArrayType::get(i8, 64));
      a->setAlignment(llvm::Align(64));
      aligned = a;
    }
    args.push_back(raw ? raw : aligned);
    args.push_back(aligned);
    args.push_back(llvm::ConstantInt::get(i64, 0));
    args.push_back(llvm::ConstantInt::get(i64, e.workspace_bytes));
    args.push_back(llvm::ConstantInt::get(i64, 1));
  }
  if (args.size() != body->arg_size())
    throw Error(fmt::format(
        "aot: internal error, the lowered entry takes {} arguments but the wrapper built {}",
        body->arg_size(), args.size()));
  for (size_t k = 0; k < args.size(); ++k)
    if (args[k]->getType() != body->getArg(k)->getType())
      throw Error(
          fmt::format("aot: internal error, argument {} of the lowered entry has an "
                      "unexpected type",
                      k));
  b.CreateCall(body, args);
  if (raw) {
    llvm::FunctionCallee free_fn = m.getOrInsertFunction("free", llvm::Type::getVoidTy(c), ptr);
    b.CreateCall(free_fn, {raw});
  }
  b.CreateRet(llvm::ConstantInt::get(i32, 0));
}

}  // namespace refjit::aot
