// The primitive registry: every primitive is declared once, in primitives.def.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "refjit/ir/params.h"
#include "refjit/ir/type.h"

namespace refjit {

enum class Prim : uint16_t {
#define PRIM(id, name, ad, kind, effect) id,
#include "refjit/ir/primitives.def"
#undef PRIM
};

inline constexpr int kNumPrims = 0
#define PRIM(id, name, ad, kind, effect) +1
#include "refjit/ir/primitives.def"
#undef PRIM
    ;

// The printed name ("scatter-add", "not", ...).
std::string_view prim_name(Prim p);
// Looks a printed name up; also accepts JAX's older spellings (mutable_array, pjit).
std::optional<Prim> prim_from_name(std::string_view name);

// A primitive's type rule: output types from operand types and params. Throws TypeError
// naming the primitive, the operand and the expected vs actual type.
using TypeRule = std::vector<Type> (*)(std::span<const Type> in, const Params& params);

// How an eqn of this primitive touches refs; passes use it (dce keeps effectful eqns).
enum class RefEffect : uint8_t { none, read, write, accum, create, consume };

// Which derivative rules a primitive has (primitives.def explains each).
enum class AdRules : uint8_t { linear, jvp, no_ad };

// What kind of computation a primitive is (primitives.def's fourth column).
enum class PrimKind : uint8_t {
  other,
  elementwise,  // result[i] is computed from operands[i] (or scalar operands) alone
  structured,   // has sub-jaxprs (jit, scan, cond, ...)
  collective,   // communicates: every rank runs it, in the same order
  host_call,    // calls the host: kept, in place, even unused
};

struct PrimInfo {
  Prim prim;
  std::string_view name;
  TypeRule type_rule = nullptr;
  RefEffect effect = RefEffect::none;  // on operand 0 for get/swap/addupdate/freeze
  bool has_subjaxprs = false;          // jit, scan, cond, custom_vjp_call
  bool communicates = false;           // a collective: every rank runs it (psum, all_gather, ...)
  bool host_effect = false;  // calls the host (debug_callback): kept, in place, even unused
  bool elementwise = false;  // result[i] is computed from operands[i] (or scalar operands) alone
  AdRules ad_rules = AdRules::jvp;
};

const PrimInfo& prim_info(Prim p);

// Runs p's type rule. Throws TypeError on a mismatch.
std::vector<Type> infer_types(Prim p, std::span<const Type> in, const Params& params);

// A dense table indexed by primitive: the shape of every per-concern rule table.
template <class Rule>
class RuleTable {
 public:
  void set(Prim p, Rule r) { rules_[static_cast<int>(p)] = std::move(r); }
  const Rule* find(Prim p) const {
    const auto& r = rules_[static_cast<int>(p)];
    return r ? &r : nullptr;
  }

 private:
  std::array<Rule, kNumPrims> rules_{};
};

}  // namespace refjit
