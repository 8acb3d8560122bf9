// Small helpers shared by the passes: copying a jaxpr's eqns into a builder, substitutions.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "refjit/ir/builder.h"

namespace refjit {

// Appends the eqns of `callee` to `b`, binding its constvars then invars to `args`; returns
// its outvars as atoms of `b`. Nested jit eqns are inlined too when `inline_jits` is set.
std::vector<Atom> inline_call(JaxprBuilder& b, const Jaxpr& callee, std::span<const Atom> args,
                              bool inline_jits = false);

// Which jits an inliner inlines (with every jit inside them).
using JitFilter = std::function<bool(const Eqn&)>;

// inline_call inlining the jits of `callee` that `which` accepts, and every jit inside those.
std::vector<Atom> inline_call_where(JaxprBuilder& b, const Jaxpr& callee,
                                    std::span<const Atom> args, const JitFilter& which);

// inline_call with every nested jit inlined, recording for each eqn appended to `b` the remat
// policy it runs under (passes/ad/remat.h): the `policy` param of the innermost checkpointed jit
// around it, or `policy` (the caller's) outside any.
std::vector<Atom> inline_call_with_policies(JaxprBuilder& b, const Jaxpr& callee,
                                            std::span<const Atom> args, const std::string& policy,
                                            std::vector<std::string>& eqn_policies);

// Removes every debug_callback from `jaxpr` and from the jaxprs its eqns hold, at any depth;
// returns how many it removed. For a computation that repeats what another already ran, so
// that a host call made there is not made twice.
int drop_host_calls(Jaxpr& jaxpr);

// Runs `rewrite` (which returns how many changes it made) on a copy of the body of a scan or
// jit eqn, or of each branch of a cond; when it changed something, `e` takes the rewritten
// bodies. Returns the count (0 for any other eqn): how a pass recurses into the bodies it
// rewrites.
int rewrite_body(Eqn& e, const std::function<int(Jaxpr&)>& rewrite);

// Runs `rewrite` (which returns how many changes it made) on a copy of `jaxpr`: the copy when it
// changed something, else `jaxpr`. `changes`, when given, receives the count: how a pass's
// entry point runs its rewriter.
Jaxpr rewritten_copy(const Jaxpr& jaxpr, const std::function<int(Jaxpr&)>& rewrite, int* changes);

// Vars replaced by other atoms: where a pass that drops or rewrites an eqn records what its
// results became, and reads every later operand through.
class Substitution {
 public:
  // `a`, or the atom that replaced it.
  Atom operator()(const Atom& a) const {
    if (!is_var(a)) return a;
    auto it = map_.find(as_var(a).id);
    return it == map_.end() ? a : it->second;
  }
  void set(Var v, Atom replacement) { map_[v.id] = std::move(replacement); }

 private:
  std::unordered_map<uint32_t, Atom> map_;
};

// A reshape in row-major order (no `dimensions` permutation): a view of the same buffer.
bool is_row_major_reshape(const Eqn& e);

// True when some operand or output of `eqn` has a Ref type (in `j`).
bool touches_refs(const Jaxpr& j, const Eqn& eqn);

// The sub-jaxpr of a jit eqn.
const Jaxpr& jit_body(const Eqn& eqn);

// A jit that stands for a custom-derivative call read from JAX's text, whose rules the text
// names but does not hold (`fwd=f bwd=g`, import/jax/rewrites.cpp), or a refjit derivative program
// staged by the Python package beyond its exact orders: refjit runs it but cannot
// differentiate it as JAX would. Throws an error naming `where` and the function when `eqn` is
// such a call; autodiff calls it before differentiating a jit.
inline constexpr const char* kCustomRuleMissing = "custom_rule_missing";
void refuse_missing_custom_rule(const Eqn& eqn, const std::string& where);

// Whether `eqn` is a jit carrying a custom JVP rule (its `jvp_jaxpr` param, from jax.custom_jvp):
// autodiff applies the rule instead of differentiating the body, so linearize keeps such a
// jit whole rather than inlining it.
bool has_custom_jvp_rule(const Eqn& eqn);

// The names of the custom_jvp functions in `jaxpr` (at any depth) whose rule JAX's printout
// left out, which autodiff differentiates through their primal instead (jvp_rule_missing).
std::vector<std::string> functions_missing_jvp_rules(const Jaxpr& jaxpr);

// `jaxpr` with every custom_vjp function whose rules JAX's printout left out marked as
// differentiable through its primal (the CLI's --primal-derivatives): the user accepts the
// primal's derivative in place of the rule's.
Jaxpr accept_primal_derivatives(const Jaxpr& jaxpr);

// A short description of an eqn for error messages: "eqn 3 (`swap`)".
std::string describe_eqn(const Eqn& eqn, size_t index);

}  // namespace refjit
