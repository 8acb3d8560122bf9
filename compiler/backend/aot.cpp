// Ahead-of-time object files with plain C entry points (docs/aot.md).
//
// Each entry point is one jaxpr lowered by the native pipeline to an internal function
// `refjit_main` (renamed SYMBOL__body) whose parameters are expanded memref descriptors.
// A generated wrapper `int SYMBOL(...)` takes plain pointers (or scalars by value), checks
// them for NULL, mallocs the scratch workspace, builds the descriptors (dense, row-major),
// calls the body and frees the workspace. For --vjp, residuals travel through a C struct
// whose layout (natural alignment, fields in order) is computed here and checked by the
// header at compile time. All entry modules are linked into one LLVM module, optimised and
// emitted for the chosen CPU.
#include "compiler/backend/aot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "compiler/backend/native.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "passes/jvp.h"
#include "passes/pipeline.h"
#include "passes/vjp.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

constexpr const char* kBodyEntry = "refjit_main";  // backend::kEntryName (lowering.h)

// ---- The C view of an entry point ------------------------------------------------------

enum class ParamKind {
  scalar_in,  // rank-0 non-ref input, passed by value
  array_in,   // const T*
  out,        // T*, written
  inout,      // T*, read and updated in place (refs, ref accumulators)
  residuals,  // SYMBOL_residuals* (fwd: written; bwd: const, read)
};

struct CParam {
  std::string name;
  ParamKind kind;
  ArrayType type;   // unused for `residuals`
  std::string doc;  // what it is, for the header comment
};

struct Field {
  std::string name;
  ArrayType type;
  int64_t offset = 0;
  std::string doc;
};

struct ResidualStruct {
  std::string name;  // SYMBOL_residuals
  std::vector<Field> fields;
  int64_t size = 0;
};

// Where the pointer of one memref argument of the body comes from.
struct Slot {
  bool from_field = false;
  int index = 0;  // a CParam index, or a Field index
};

struct CEntry {
  std::string symbol;
  std::string summary;  // the header comment's first paragraph
  const Jaxpr* jaxpr = nullptr;
  std::vector<CParam> params;
  std::vector<Slot> slots;  // one per constvar, invar and outvar of `jaxpr`
  bool residuals_const = false;
  int64_t workspace_bytes = 0;  // filled after lowering
};

constexpr std::string_view kCKeywords[] = {
    "auto",     "break",   "case",    "char",     "const",    "continue", "default",  "do",
    "double",   "else",    "enum",    "extern",   "float",    "for",      "goto",     "if",
    "inline",   "int",     "long",    "register", "restrict", "return",   "short",    "signed",
    "sizeof",   "static",  "struct",  "switch",   "typedef",  "union",    "unsigned", "void",
    "volatile", "while",   "bool",    "true",     "false",    "_Bool",    "_Complex", "_Imaginary",
    "int32_t",  "int64_t", "uint8_t", "size_t",   "NULL",     "asm",      "main"};

std::string c_type(DType d) {
  switch (d) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::i32: return "int32_t";
    case DType::i64: return "int64_t";
    case DType::bool_: return "bool";
    case DType::i8: return "int8_t";
    case DType::i16: return "int16_t";
    case DType::u8: return "uint8_t";
    case DType::u16: return "uint16_t";
    case DType::u32: return "uint32_t";
    case DType::u64: return "uint64_t";
  }
  return "?";
}

std::string describe(const ArrayType& t) {
  if (t.is_scalar()) return t.str() + ", a scalar";
  return fmt::format("{}: {} element{}, row-major", t.str(), t.num_elements(),
                     t.num_elements() == 1 ? "" : "s");
}

// Unique C identifiers for parameters, derived from binder names where there are any.
class Namer {
 public:
  std::string take(std::string want, const std::string& fallback) {
    std::string s;
    for (char ch : want)
      s += (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') ? ch : '_';
    if (s.empty() || s == "_" || !is_c_identifier(s) || s.starts_with("__")) s = fallback;
    std::string name = s;
    for (int k = 2; used_.count(name); ++k) name = fmt::format("{}_{}", s, k);
    used_.insert(name);
    return name;
  }

 private:
  std::set<std::string> used_;
};

std::string binder(const Jaxpr& j, Var v) { return j.info(v).name; }

// Parameters for the constvars and invars of `j` (named after `names_from`'s binders).
void add_input_params(CEntry& e, const Jaxpr& j, const Jaxpr& names_from, Namer& namer,
                      std::vector<int>* param_of_input = nullptr) {
  auto add = [&](Var v, Var named, const std::string& fallback, const std::string& what) {
    const Type& t = j.type_of(v);
    CParam p;
    p.name = namer.take(binder(names_from, named), fallback);
    p.type = t.array;
    if (t.is_ref) {
      p.kind = ParamKind::inout;
      p.doc = fmt::format("{}, a ref: read and updated in place", what);
    } else {
      p.kind = t.array.is_scalar() ? ParamKind::scalar_in : ParamKind::array_in;
      p.doc = what;
    }
    if (param_of_input) param_of_input->push_back(static_cast<int>(e.params.size()));
    e.slots.push_back({false, static_cast<int>(e.params.size())});
    e.params.push_back(std::move(p));
  };
  for (size_t i = 0; i < j.constvars.size(); ++i)
    add(j.constvars[i], names_from.constvars[i], fmt::format("const{}", i),
        fmt::format("constvar {}", i));
  for (size_t i = 0; i < j.invars.size(); ++i)
    add(j.invars[i], names_from.invars[i], fmt::format("arg{}", i), fmt::format("argument {}", i));
}

void add_output_param(CEntry& e, const ArrayType& t, std::string name, std::string doc) {
  e.slots.push_back({false, static_cast<int>(e.params.size())});
  e.params.push_back({std::move(name), ParamKind::out, t, std::move(doc)});
}

std::string out_name(const std::string& base, size_t i, size_t n) {
  return n == 1 ? base : fmt::format("{}{}", base, i);
}

void check_name(const std::string& name) {
  if (!is_c_identifier(name))
    throw Error(fmt::format(
        "aot: '{}' cannot name a C function: use letters, digits and _, not starting with a "
        "digit, and not a C keyword (choose one with --name)",
        name));
}

ResidualStruct layout_residuals(const std::string& name, const Jaxpr& fwd, size_t first,
                                size_t count) {
  ResidualStruct rs;
  rs.name = name;
  int64_t offset = 0, max_align = 1;
  for (size_t k = 0; k < count; ++k) {
    const Atom& a = fwd.outvars[first + k];
    ArrayType t = fwd.type_of(a).array;
    int64_t align = byte_size(t.dtype);
    max_align = std::max(max_align, align);
    offset = (offset + align - 1) / align * align;
    Field f;
    f.name = fmt::format("r{}", k);
    f.type = t;
    f.offset = offset;
    std::string src = is_var(a) ? fwd.info(as_var(a)).name : std::string();
    f.doc = src.empty() || src == "_" ? "saved by the forward pass"
                                      : fmt::format("the forward value `{}`", src);
    rs.fields.push_back(f);
    // C99 has no zero-length arrays: an empty residual still takes one element.
    offset += std::max<int64_t>(t.num_elements(), 1) * byte_size(t.dtype);
  }
  if (count == 0) offset = 1;  // `char unused_;`
  rs.size = (offset + max_align - 1) / max_align * max_align;
  return rs;
}

// ---- Header text ------------------------------------------------------------------------

std::string param_decl(const CParam& p, const ResidualStruct* rs, bool residuals_const) {
  switch (p.kind) {
    case ParamKind::scalar_in: return fmt::format("{} {}", c_type(p.type.dtype), p.name);
    case ParamKind::array_in: return fmt::format("const {}* {}", c_type(p.type.dtype), p.name);
    case ParamKind::out:
    case ParamKind::inout: return fmt::format("{}* {}", c_type(p.type.dtype), p.name);
    case ParamKind::residuals:
      return fmt::format("{}{}* {}", residuals_const ? "const " : "", rs ? rs->name : "void",
                         p.name);
  }
  return {};
}

std::string entry_header(const CEntry& e, const ResidualStruct* rs) {
  std::string s = "/* " + e.summary + "\n *\n * Parameters:\n";
  size_t width = 0;
  for (const CParam& p : e.params) width = std::max(width, p.name.size());
  for (const CParam& p : e.params) {
    std::string role, what;
    switch (p.kind) {
      case ParamKind::scalar_in:
        role = "in";
        what = fmt::format("{}, by value; {}", p.type.str(), p.doc);
        break;
      case ParamKind::array_in:
        role = "in";
        what = fmt::format("{}; {}", describe(p.type), p.doc);
        break;
      case ParamKind::out:
        role = "out";
        what = fmt::format("{}; {}", describe(p.type), p.doc);
        break;
      case ParamKind::inout:
        role = "in/out";
        what = fmt::format("{}; {}", describe(p.type), p.doc);
        break;
      case ParamKind::residuals:
        role = e.residuals_const ? "in" : "out";
        what = p.doc;
        break;
    }
    s += fmt::format(" *   {:<{}}  {:<6}  {}\n", p.name, width, role, what);
  }
  if (e.workspace_bytes > 0)
    s += fmt::format(
        " *\n * Scratch memory: {} bytes, malloc'ed and freed inside the call (no state is kept\n"
        " * between calls; concurrent calls are fine if they share no output or in/out array).\n",
        e.workspace_bytes);
  else
    s += " *\n * Uses no heap memory and keeps no state between calls.\n";
  s += " * Returns REFJIT_AOT_OK (0) on success, REFJIT_AOT_NULL_ARGUMENT if a pointer is NULL\n"
       " * (nothing is written), or REFJIT_AOT_OUT_OF_MEMORY if the scratch memory cannot be\n"
       " * allocated (nothing is written).\n */\n";
  std::string decl = "int " + e.symbol + "(";
  std::string indent(decl.size(), ' ');
  std::string line = decl;
  std::vector<std::string> parts;
  for (const CParam& p : e.params) parts.push_back(param_decl(p, rs, e.residuals_const));
  if (parts.empty()) parts.push_back("void");
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string piece = parts[i] + (i + 1 < parts.size() ? "," : ");");
    if (line.size() + piece.size() + 1 > 99 && line != decl) {
      s += line + "\n";
      line = indent + piece;
    } else {
      line += (line == decl ? "" : " ") + piece;
    }
  }
  s += line + "\n";
  return s;
}

std::string struct_header(const ResidualStruct& rs, const std::string& fwd,
                          const std::string& bwd) {
  std::string s = fmt::format(
      "/* The values {} saves for {}: fill one with a call to {},\n"
      " * then pass it to any number of {} calls (which only read it). Plain data:\n"
      " * copy it, keep it, free it like any struct. {} bytes.\n */\n"
      "typedef struct {} {{\n",
      fwd, bwd, fwd, bwd, rs.size, rs.name);
  if (rs.fields.empty()) s += "  char unused_; /* no residuals are needed */\n";
  for (const Field& f : rs.fields) {
    std::string decl = f.type.is_scalar()
                           ? fmt::format("  {} {};", c_type(f.type.dtype), f.name)
                           : fmt::format("  {} {}[{}];", c_type(f.type.dtype), f.name,
                                         std::max<int64_t>(f.type.num_elements(), 1));
    s += fmt::format("{:<28} /* {}; {} */\n", decl, describe(f.type), f.doc);
  }
  s += fmt::format("}} {};\n", rs.name);
  // C99 compile-time check that the C compiler lays the struct out as the object expects.
  s += fmt::format("typedef char {}_layout_check[(sizeof({}) == {}", rs.name, rs.name, rs.size);
  for (const Field& f : rs.fields)
    s += fmt::format(" &&\n    offsetof({}, {}) == {}", rs.name, f.name, f.offset);
  s += ") ? 1 : -1];\n";
  return s;
}

std::string guard_of(const std::string& name) {
  std::string g;
  for (char ch : name) g += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return "REFJIT_AOT_" + g + "_H_";
}

std::string make_header(const AotOptions& o, const std::vector<CEntry>& entries,
                        const ResidualStruct* rs) {
  std::string s = fmt::format(
      "/* {}: C interface of the object compiled by `refjit compile`{}.\n"
      " * Generated; do not edit.\n"
      " *\n"
      " * Conventions: arrays are dense, row-major and not aliased with each other; `const T*`\n"
      " * parameters are only read, `T*` outputs are overwritten, `T*` in/out parameters\n"
      " * (refs) are read and updated in place. Rank-0 inputs are passed by value. bool\n"
      " * elements are one byte, 0 or 1. Link with: cc ... OBJECT.o -lm\n */\n",
      o.header_path.empty() ? o.name + ".h"
                            : std::filesystem::path(o.header_path).filename().string(),
      o.source_name.empty() ? ""
                            : " from " + std::filesystem::path(o.source_name).filename().string());
  std::string guard = guard_of(o.name);
  s += fmt::format("#ifndef {}\n#define {}\n\n", guard, guard);
  s += "#include <stdbool.h>\n#include <stddef.h>\n#include <stdint.h>\n\n";
  s += "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  s += "#ifndef REFJIT_AOT_STATUS_CODES\n#define REFJIT_AOT_STATUS_CODES\n"
       "#define REFJIT_AOT_OK 0\n#define REFJIT_AOT_OUT_OF_MEMORY 1\n"
       "#define REFJIT_AOT_NULL_ARGUMENT 2\n#endif\n\n";
  if (rs) s += struct_header(*rs, entries.at(0).symbol, entries.at(1).symbol) + "\n";
  for (const CEntry& e : entries) s += entry_header(e, rs) + "\n";
  s += "#ifdef __cplusplus\n}  /* extern \"C\" */\n#endif\n\n";
  s += fmt::format("#endif /* {} */\n", guard);
  return s;
}

// ---- The wrapper in LLVM IR ----------------------------------------------------------------

llvm::Type* scalar_llvm_type(llvm::LLVMContext& c, DType d) {
  if (d == DType::f32) return llvm::Type::getFloatTy(c);
  if (d == DType::f64) return llvm::Type::getDoubleTy(c);
  return llvm::Type::getIntNTy(c, static_cast<unsigned>(bit_width(d)));
}

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

// ---- Entry points per mode ---------------------------------------------------------------

struct Plan {
  std::vector<Jaxpr> jaxprs;  // owned programs, one per entry
  std::vector<CEntry> entries;
  std::optional<ResidualStruct> residuals;
};

std::string program_label(const AotOptions& o) {
  return o.source_name.empty()
             ? "the program"
             : "the program in " + std::filesystem::path(o.source_name).filename().string();
}

std::vector<int> default_wrt(const Jaxpr& f) {
  std::vector<int> w;
  for (size_t i = 0; i < f.invars.size(); ++i) {
    const Type& t = f.type_of(f.invars[i]);
    if (!t.is_ref && is_float(t.dtype())) w.push_back(static_cast<int>(i));
  }
  if (w.empty()) throw Error("aot: the program has no float, non-ref invar to differentiate");
  return w;
}

void plan_function(Plan& plan, const Jaxpr& f, const AotOptions& o) {
  plan.jaxprs.push_back(f);
  CEntry e;
  e.symbol = o.name;
  e.summary = fmt::format("{}: computes {}.", o.name, program_label(o));
  Namer namer;
  add_input_params(e, f, f, namer);
  for (size_t i = 0; i < f.outvars.size(); ++i)
    add_output_param(e, f.type_of(f.outvars[i]).array,
                     namer.take(out_name("out", i, f.outvars.size()), "out"),
                     fmt::format("output {}", i));
  plan.entries.push_back(std::move(e));
}

void plan_grad(Plan& plan, const Jaxpr& f, const AotOptions& o) {
  std::vector<int> wrt = o.wrt.empty() ? default_wrt(f) : o.wrt;
  plan.jaxprs.push_back(grad_jaxpr(f, wrt));
  CEntry e;
  e.symbol = o.name;
  e.summary = fmt::format(
      "{}: computes the scalar output of {} and its gradient with respect to the\n"
      " * arguments listed below as `grad_*`.",
      o.name, program_label(o));
  Namer namer;
  add_input_params(e, f, f, namer);
  add_output_param(e, f.type_of(f.outvars[0]).array, namer.take("out", "out"),
                   "the program's output");
  for (int w : wrt) {
    Var v = f.invars[w];
    std::string label =
        binder(f, v).empty() ? fmt::format("argument {}", w) : fmt::format("`{}`", binder(f, v));
    add_output_param(e, f.type_of(v).array,
                     namer.take("grad_" + binder(f, v), fmt::format("grad_arg{}", w)),
                     fmt::format("d out / d {}", label));
  }
  plan.entries.push_back(std::move(e));
}

void plan_jvp(Plan& plan, const Jaxpr& f, const AotOptions& o) {
  std::vector<bool> nonzero;
  for (Var v : f.invars) nonzero.push_back(is_float(f.type_of(v).dtype()));
  Jaxpr j = jvp_jaxpr(f, nonzero);
  CEntry e;
  e.symbol = o.name;
  e.summary = fmt::format(
      "{}: forward mode of {}: the outputs and their tangents (directional\n"
      " * derivatives) along the given input tangents `tangent_*`.",
      o.name, program_label(o));
  Namer namer;
  // Primals: j's constvars and its first |invars| invars; named after f's binders.
  auto add_in = [&](size_t pos_in_j, const std::string& name, const std::string& fallback,
                    const std::string& doc) {
    const Type& t =
        j.type_of(pos_in_j < j.constvars.size() ? j.constvars[pos_in_j]
                                                : j.invars[pos_in_j - j.constvars.size()]);
    CParam p;
    p.name = namer.take(name, fallback);
    p.type = t.array;
    p.kind = t.is_ref ? ParamKind::inout
                      : (t.array.is_scalar() ? ParamKind::scalar_in : ParamKind::array_in);
    p.doc = t.is_ref ? doc + ", a ref: read and updated in place" : doc;
    e.slots.push_back({false, static_cast<int>(e.params.size())});
    e.params.push_back(std::move(p));
  };
  size_t nc = f.constvars.size();
  for (size_t i = 0; i < nc; ++i)
    add_in(i, binder(f, f.constvars[i]), fmt::format("const{}", i), fmt::format("constvar {}", i));
  for (size_t i = 0; i < f.invars.size(); ++i)
    add_in(nc + i, binder(f, f.invars[i]), fmt::format("arg{}", i), fmt::format("argument {}", i));
  size_t k = 0;
  for (size_t i = 0; i < f.invars.size(); ++i) {
    if (!nonzero[i]) continue;
    std::string b = binder(f, f.invars[i]);
    add_in(nc + f.invars.size() + k++, "tangent_" + b, fmt::format("tangent_arg{}", i),
           fmt::format("tangent of {}", b.empty() ? fmt::format("argument {}", i) : "`" + b + "`"));
  }
  size_t n = f.outvars.size();
  for (size_t i = 0; i < n; ++i)
    add_output_param(e, j.type_of(j.outvars[i]).array, namer.take(out_name("out", i, n), "out"),
                     fmt::format("output {}", i));
  for (size_t i = 0; i < n; ++i)
    add_output_param(e, j.type_of(j.outvars[n + i]).array,
                     namer.take(out_name("tangent_out", i, n), "tangent_out"),
                     fmt::format("tangent of output {}", i));
  plan.jaxprs.push_back(std::move(j));
  plan.entries.push_back(std::move(e));
}

void plan_vjp(Plan& plan, const Jaxpr& f, const AotOptions& o) {
  std::vector<AotAccum> accum = o.accum;
  if (accum.empty())
    for (Var v : f.invars) {
      const Type& t = f.type_of(v);
      accum.push_back(!t.is_ref && is_float(t.dtype()) ? AotAccum::value : AotAccum::dont_want);
    }
  if (accum.size() != f.invars.size())
    throw Error(
        fmt::format("aot: --accum gives {} accumulator(s) but the program has {} "
                    "invar(s); give one of value, ref, dontwant per invar",
                    accum.size(), f.invars.size()));
  std::vector<bool> diff;
  std::vector<AccumKind> kinds;
  for (size_t i = 0; i < accum.size(); ++i) {
    const Type& t = f.type_of(f.invars[i]);
    bool d = accum[i] != AotAccum::dont_want;
    if (d && !is_float(t.dtype()))
      throw Error(
          fmt::format("aot: --accum: argument {} ({}) has type {}, which is not a "
                      "float; its accumulator must be dontwant",
                      i, binder(f, f.invars[i]), t.str()));
    if (accum[i] == AotAccum::value && t.is_ref)
      throw RefError("E5", fmt::format("aot: --accum: argument {} ({}) is a ref ({}); the "
                                       "gradient of a ref is accumulated into a ref: use ref "
                                       "(or dontwant)",
                                       i, binder(f, f.invars[i]), t.str()));
    diff.push_back(d);
    if (d) kinds.push_back(accum[i] == AotAccum::value ? AccumKind::value : AccumKind::ref);
  }
  if (kinds.empty()) throw Error("aot: --vjp with every accumulator dontwant computes no gradient");
  VjpJaxprs v = vjp_jaxpr(f, diff, kinds);
  if (!v.backward.constvars.empty() || v.forward.constvars.size() != f.constvars.size() ||
      v.forward.invars.size() != f.invars.size())
    throw Error("aot: internal error, unexpected constvars in the vjp programs");
  plan.jaxprs.push_back(std::move(v.forward));
  plan.jaxprs.push_back(std::move(v.backward));
  const Jaxpr& fwd = plan.jaxprs[0];
  const Jaxpr& bwd = plan.jaxprs[1];
  size_t nout = f.outvars.size();
  std::string fwd_name = o.name + "_fwd", bwd_name = o.name + "_bwd";
  plan.residuals = layout_residuals(o.name + "_residuals", fwd, nout, v.num_residuals);
  const ResidualStruct& rs = *plan.residuals;

  // fwd(consts..., args..., outs..., residuals*)
  CEntry e;
  e.symbol = fwd_name;
  e.summary = fmt::format(
      "{}: computes {} like a plain call\n"
      " * and fills `res` with what {} needs.",
      fwd_name, program_label(o), bwd_name);
  Namer namer;
  std::vector<int> input_param;  // constvars then invars -> param index
  add_input_params(e, fwd, f, namer, &input_param);
  for (size_t i = 0; i < nout; ++i)
    add_output_param(e, fwd.type_of(fwd.outvars[i]).array,
                     namer.take(out_name("out", i, nout), "out"), fmt::format("output {}", i));
  for (int r = 0; r < v.num_residuals; ++r) e.slots.push_back({true, r});
  e.params.push_back({namer.take("res", "res"),
                      ParamKind::residuals,
                      {},
                      fmt::format("{}*: receives the residuals", rs.name)});
  std::vector<CParam> fwd_inputs;
  for (int p : input_param) fwd_inputs.push_back(e.params[p]);
  plan.entries.push_back(std::move(e));

  // bwd(const residuals*, ref residuals..., cotangents..., gradients in invar order)
  CEntry be;
  be.symbol = bwd_name;
  be.residuals_const = true;
  be.summary = fmt::format(
      "{}: the gradients of {}\n"
      " * for the output cotangents `ct_*`, from residuals filled by {}.\n"
      " * Does not modify `res`: call it any number of times. value accumulators\n"
      " * (`grad_*` outputs) are overwritten; ref accumulators (`grad_*` in/out) have\n"
      " * the gradient added into them (+=).",
      bwd_name, program_label(o), fwd_name);
  Namer bnamer;
  be.params.push_back({bnamer.take("res", "res"),
                       ParamKind::residuals,
                       {},
                       fmt::format("const {}*: residuals from {}", rs.name, fwd_name)});
  for (int r = 0; r < v.num_residuals; ++r) be.slots.push_back({true, r});
  size_t pos = static_cast<size_t>(v.num_residuals);
  for (int r : v.ref_residuals) {
    CParam p = fwd_inputs.at(r);
    p.name = bnamer.take(p.name, fmt::format("ref{}", r));
    p.doc =
        fmt::format("the same ref that was passed to {} as `{}`", fwd_name, fwd_inputs.at(r).name);
    be.slots.push_back({false, static_cast<int>(be.params.size())});
    be.params.push_back(std::move(p));
    ++pos;
  }
  // Ref accumulators (bwd invars, input order) and cotangents come next in the jaxpr; the
  // gradient parameters go last in invar order, so record their slots first.
  std::vector<int> grad_param(f.invars.size(), -1);
  std::vector<size_t> ref_acc_slot;
  for (size_t i = 0; i < accum.size(); ++i)
    if (accum[i] == AotAccum::ref) {
      ref_acc_slot.push_back(be.slots.size());
      be.slots.push_back({false, -1});
      ++pos;
    }
  for (size_t i = 0; i < nout; ++i) {
    const Type& t = bwd.type_of(bwd.invars.at(pos + i));
    CParam p;
    p.name = bnamer.take(out_name("ct_out", i, nout), "ct_out");
    p.type = t.array;
    p.kind = t.array.is_scalar() ? ParamKind::scalar_in : ParamKind::array_in;
    p.doc = is_float(t.dtype())
                ? fmt::format("cotangent of output {}{}", i,
                              t.array.is_scalar() ? " (1 for the gradient of a scalar loss)" : "")
                : fmt::format("cotangent of output {} (not differentiable: ignored)", i);
    be.slots.push_back({false, static_cast<int>(be.params.size())});
    be.params.push_back(std::move(p));
  }
  size_t ref_k = 0, value_k = 0;
  std::vector<std::pair<size_t, int>> out_slots;  // (outvar index, param)
  for (size_t i = 0; i < accum.size(); ++i) {
    if (accum[i] == AotAccum::dont_want) continue;
    std::string b = binder(f, f.invars[i]);
    std::string label = b.empty() ? fmt::format("argument {}", i) : "`" + b + "`";
    CParam p;
    p.name = bnamer.take("grad_" + b, fmt::format("grad_arg{}", i));
    p.type = f.type_of(f.invars[i]).array;
    if (accum[i] == AotAccum::ref) {
      p.kind = ParamKind::inout;
      p.doc = fmt::format("gradient of {}, added into (+=)", label);
      be.slots[ref_acc_slot.at(ref_k++)].index = static_cast<int>(be.params.size());
    } else {
      p.kind = ParamKind::out;
      p.doc = fmt::format("gradient of {}, written", label);
      out_slots.push_back({value_k++, static_cast<int>(be.params.size())});
    }
    grad_param[i] = static_cast<int>(be.params.size());
    be.params.push_back(std::move(p));
  }
  if (pos + nout != bwd.invars.size() || value_k != bwd.outvars.size())
    throw Error("aot: internal error, the backward program's signature is not as expected");
  for (auto [k, param] : out_slots) be.slots.push_back({false, param});
  plan.entries.push_back(std::move(be));
}

}  // namespace

bool is_c_identifier(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') return false;
  for (std::string_view k : kCKeywords)
    if (k == name) return false;
  return true;
}

AotArtifact compile_to_object(const Jaxpr& jaxpr, const AotOptions& options) {
  check_name(options.name);
  if (options.opt_level < 0 || options.opt_level > 3)
    throw Error(fmt::format("aot: opt_level must be 0..3, not {}", options.opt_level));
  Plan plan;
  switch (options.mode) {
    case AotMode::function: plan_function(plan, jaxpr, options); break;
    case AotMode::grad: plan_grad(plan, jaxpr, options); break;
    case AotMode::jvp: plan_jvp(plan, jaxpr, options); break;
    case AotMode::vjp: plan_vjp(plan, jaxpr, options); break;
  }
  for (size_t i = 0; i < plan.entries.size(); ++i) plan.entries[i].jaxpr = &plan.jaxprs[i];

  auto tm = backend::make_target_machine(options.cpu, options.opt_level);
  llvm::LLVMContext lctx;
  CompileOptions co;
  co.opt_level = options.opt_level;
  co.fast_math_approx = options.fast_math_approx;
  std::unique_ptr<llvm::Module> linked;
  const ResidualStruct* rs = plan.residuals ? &*plan.residuals : nullptr;
  for (CEntry& e : plan.entries) {
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
  out.header = make_header(options, plan.entries, rs);
  for (const CEntry& e : plan.entries) out.symbols.push_back(e.symbol);
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
