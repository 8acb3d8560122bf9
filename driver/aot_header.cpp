// The C header of an AOT object (docs/aot.md "The header").
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "driver/aot_plan.h"

namespace refjit::aot {

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
    // C has no portable 16-bit float type: the header passes the bits (IEEE binary16, or the
    // upper half of a float32 for bfloat16).
    case DType::f16: return "uint16_t";
    case DType::bf16: return "uint16_t";
    // compile_to_object refuses complex entry points before any header is written.
    case DType::c64:
    case DType::c128: break;
  }
  return "?";
}

std::string describe(const ArrayType& t) {
  if (t.is_scalar()) return t.str() + ", a scalar";
  return fmt::format("{}: {} element{}, row-major", t.str(), t.num_elements(),
                     t.num_elements() == 1 ? "" : "s");
}

namespace {

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

}  // namespace

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

}  // namespace refjit::aot
