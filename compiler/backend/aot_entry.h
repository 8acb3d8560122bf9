// Internal to `refjit compile` (compiler/backend/aot*.cpp): the C view of an entry point, and
// the four steps of compile_to_object, one file each:
//   aot_entries.cpp  the entry points per mode (function, grad, jvp, vjp) and their jaxprs;
//   aot_header.cpp   the C header's text;
//   aot_wrapper.cpp  the C-callable wrapper around each lowered body, in LLVM IR;
//   aot.cpp          the driver: pipeline, lowering, linking, object emission.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "refjit/aot.h"
#include "refjit/ir/jaxpr.h"

namespace llvm {
class Module;
}  // namespace llvm

namespace refjit::aot {

// The body's internal entry point (backend::kEntryName), renamed SYMBOL__body per entry.
inline constexpr const char* kBodyEntry = "refjit_main";

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

// The C type of one element.
std::string c_type(DType d);
// "f32[3,4]: 12 elements, row-major", for header comments.
std::string describe(const ArrayType& t);

// Unique C identifiers for parameters, derived from binder names where there are any.
class Namer {
 public:
  std::string take(std::string want, const std::string& fallback);

 private:
  std::set<std::string> used_;
};

// Throws Error when `name` cannot name a C function.
void check_name(const std::string& name);

// The programs and C entry points one object holds.
struct EntryPlan {
  std::vector<Jaxpr> jaxprs;  // owned programs, one per entry
  std::vector<CEntry> entries;
  std::optional<ResidualStruct> residuals;
};

// The entry points `options.mode` asks for (aot_entries.cpp); entries point at `jaxprs`.
EntryPlan plan_entries(const Jaxpr& program, const AotOptions& options);

// The C header declaring `entries` (aot_header.cpp).
std::string make_header(const AotOptions& o, const std::vector<CEntry>& entries,
                        const ResidualStruct* rs);

// Adds `int SYMBOL(...)` around the lowered body in `m` (aot_wrapper.cpp): checks pointers,
// allocates the workspace, builds the memref descriptors and calls the body.
void add_wrapper(llvm::Module& m, const CEntry& e, const ResidualStruct* rs, bool has_workspace);

}  // namespace refjit::aot
