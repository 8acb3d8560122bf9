// The IR: an SSA program of primitive applications with explicit ref effects.
//
//   { lambda <constvars>; <invars>. let <eqns> in (<outvars>) }
//
// A Jaxpr owns a table of variables; Var is an index into it. Sub-jaxprs (the bodies of
// jit, scan, cond, custom_vjp_call) are separate Jaxprs held by the eqn's params, each with
// its own variable table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "refjit/ir/literal.h"
#include "refjit/ir/params.h"
#include "refjit/ir/primitive.h"
#include "refjit/ir/type.h"

namespace refjit {

struct Var {
  uint32_t id = 0;
  bool operator==(const Var&) const = default;
  auto operator<=>(const Var&) const = default;
};

using Atom = std::variant<Var, Literal>;

inline bool is_var(const Atom& a) { return std::holds_alternative<Var>(a); }
inline Var as_var(const Atom& a) { return std::get<Var>(a); }

struct VarInfo {
  Type type;
  bool dropped = false;  // printed `_`: a binder nobody reads
  std::string name;      // the name it had in parsed text (for the CLI's `NAME = VALUE`)
};

struct Eqn {
  Prim prim;
  Params params;
  std::vector<Atom> ins;
  std::vector<Var> outs;
};

struct Jaxpr {
  std::vector<VarInfo> vars;
  std::vector<Var> constvars;
  std::vector<Var> invars;
  std::vector<Eqn> eqns;
  std::vector<Atom> outvars;

  Var new_var(Type type, bool dropped = false, std::string name = {});
  const VarInfo& info(Var v) const { return vars.at(v.id); }
  const Type& type_of(Var v) const { return vars.at(v.id).type; }
  Type type_of(const Atom& a) const;

  std::vector<Type> const_types() const;
  std::vector<Type> in_types() const;
  std::vector<Type> out_types() const;
};

// Per ref binder (constvars then invars, in order): how the jaxpr, including its
// sub-jaxprs, touches the ref. Computed, never stored, so passes can't let it go stale.
struct RefEffects {
  bool read = false;
  bool written = false;
  bool accumulated = false;
  bool any() const { return read || written || accumulated; }
};
// One entry per constvar then per invar (all-false for non-ref binders).
std::vector<RefEffects> compute_effects(const Jaxpr& jaxpr);

// Whether running `e` calls the host: `e` is a debug_callback, or one is inside a jaxpr its
// params hold, at any depth. Such an eqn is kept even when nothing reads its results.
bool has_host_effect(const Eqn& e);

// Whether running `e` checks the processes an axis spans (axis_index[axis_size=n], the mesh
// a shard_map was traced for), at any depth. Such an eqn is kept even when nothing reads its
// results: the check is what it is for.
bool checks_processes(const Eqn& e);

// The param marking a custom_vjp_call staged by linearize whose `call_jaxpr` (its linear map,
// run forward) is unknown because its bwd rule could not be transposed
// (passes/ad/jvp_rules_control.cpp, custom_lin_forward): transposing it runs bwd; running it
// forward (the interpreter, native code) is refused by refuse_unknown_forward_map.
inline constexpr const char* kForwardUnknown = "forward_unknown";
// Throws Error when `e` is a custom_vjp_call marked kForwardUnknown.
void refuse_unknown_forward_map(const Eqn& e);

// Whether a custom_vjp_call's bwd_jaxpr adds the cotangents into accumulators (it takes the
// residuals, the output cotangents, then one ref per operand, and returns nothing) rather
// than returning one cotangent per operand.
bool bwd_accumulates(const Jaxpr& bwd, size_t n_res, size_t n_outs, size_t n_operands);

}  // namespace refjit
