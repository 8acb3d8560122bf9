// Internal to `refjit compile`: what the driver decides before the backend emits the object
// (backend/aot_entry.h holds the C view of an entry both share):
//   aot_entries.cpp  the entry points per mode (function, grad, jvp, vjp) and their jaxprs;
//   aot_header.cpp   the C header's text;
//   aot.cpp          compile_to_object: the checks, the pipeline per entry, the files.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/aot_entry.h"
#include "refjit/aot.h"
#include "refjit/ir/jaxpr.h"

namespace refjit::aot {

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

}  // namespace refjit::aot
