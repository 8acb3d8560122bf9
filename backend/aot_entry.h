// Internal to `refjit compile`: the C view of an entry point, shared by the driver, which
// plans the entries and writes the header (driver/aot_plan.h), and the backend, which emits
// the object:
//   aot_wrapper.cpp  the C-callable wrapper around each lowered body, in LLVM IR;
//   aot_object.cpp   lowering, linking and object emission of the planned programs.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/buffer_plan.h"
#include "backend/native.h"
#include "passes/pass_report.h"
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

// Adds `int SYMBOL(...)` around the lowered body in `m` (aot_wrapper.cpp): checks pointers,
// allocates the workspace, builds the memref descriptors and calls the body.
void add_wrapper(llvm::Module& m, const CEntry& e, const ResidualStruct* rs, bool has_workspace);

// One entry's program after the pipeline's passes, as the backend lowers it.
struct EntryCode {
  const Jaxpr* jaxpr = nullptr;
  BufferPlan plan;
  PassObserver after_pass;  // told of the lowering's passes
};

// The object file holding every entry of `entries` (aot_object.cpp), compiled from `code`
// (one per entry, in order) with `compile` (its plan and after_pass are each entry's; code
// that stands alone needs runtime_kernels off) for `options.cpu`; fills each entry's
// workspace_bytes.
std::string emit_object(std::vector<CEntry>& entries, std::span<const EntryCode> code,
                        const ResidualStruct* rs, const CompileOptions& compile,
                        const AotOptions& options);

}  // namespace refjit::aot
