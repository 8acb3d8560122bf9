// Tracing: turning a C++ function into a Jaxpr, and running or staging a Jaxpr.
//
// This header is the layer every function transformation is built on (jit, make_jaxpr, and
// later grad/vjp/jvp/linearize, scan, cond, foreach, custom_vjp):
//
//  * trace_function(f, in_types) runs f on fresh traced arguments inside a new trace (a
//    JaxprBuilder on a thread-local stack) and returns the Jaxpr plus the outer Values/Refs
//    the function closed over. Those captured operands are the Jaxpr's constvars, in order;
//    each is concrete, or traced by an enclosing trace (nested tracing). Concrete scalars
//    are inlined as literals instead of captured, as JAX does.
//  * bind_jaxpr(name, fn, args) calls a traced function: outside any trace it evaluates now
//    (execute(): the interpreter today, a compiled backend later); inside a trace it appends
//    one `jit[name=... jaxpr=...]` eqn whose operands are the captured operands then args
//    (the sub-jaxpr's constvars become its leading invars).
//  * bind_prim(prim, ins, params) applies any primitive the same way (eager or staged).
//    Structured primitives (scan, cond, custom_vjp_call) are built with trace_function +
//    consts_to_invars + bind_prim.
//
// Building a transformation T(f) (grad, vjp, scan, ...) on this layer:
//
//   TracedFunction fn = trace_function(body, types_of(flat_args), "f");
//   Jaxpr out = my_pass(*fn.jaxpr);          // constvars stay constvars, in order
//   TracedFunction t{std::make_shared<const Jaxpr>(std::move(out)), fn.consts};
//   std::vector<Operand> results = bind_jaxpr("f", t, flat_args);
//
// A pass may add constvars (e.g. residuals held as values): append the matching Operands
// to `consts`. Because bind_jaxpr works the same inside and outside a trace, the result
// nests: vjp inside make_jaxpr stages eqns, vjp at top level runs now. Values and Refs
// created during tracing are valid only while their trace is live.
//
// Errors: a Ref returned from a traced function (E9), the same ref passed twice (E7), a ref
// both closed over and passed (E8), a ref used after freeze (E12), a traced value used after
// its trace ended ("escaped tracer").
#pragma once

#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "refjit/ir/jaxpr.h"
#include "refjit/ref.h"
#include "refjit/value.h"

namespace refjit {

// What flows in and out of traced functions and primitives: an array value or a ref.
using Operand = std::variant<Value, Ref>;

// The static type of an operand: an array type, or Type::ref(inner) for a ref.
Type type_of(const Operand& x);
std::vector<Type> types_of(std::span<const Operand> xs);

struct TracedFunction {
  JaxprPtr jaxpr;               // constvars: one per entry of `consts`; invars: in_types
  std::vector<Operand> consts;  // captured outer operands, bound to the constvars
};

using TraceBody = std::function<std::vector<Operand>(const std::vector<Operand>& args)>;

// The name a function goes by in jaxprs and messages: its name() if it has one (a jit, grad
// or custom_vjp function), else "f".
template <class F>
std::string function_name(const F& f) {
  if constexpr (requires { f.name(); })
    return std::string(f.name());
  else
    return "f";
}

// Traces `f` on one fresh traced argument per type of `in_types` (Ref types give Refs).
// `name` is used in error messages ("traced function `take`"). Throws RefError E9 if f
// returns a Ref.
TracedFunction trace_function(const TraceBody& f, std::span<const Type> in_types,
                              std::string_view name = "function");

// The same jaxpr with its constvars turned into leading invars (what a jit/scan/cond
// sub-jaxpr needs: those take no constvars).
Jaxpr consts_to_invars(const Jaxpr& jaxpr);

// Calls a traced function on `args` (one per invar): evaluates now outside a trace, or
// emits a `jit[name=...]` eqn inside one. Checks ref aliasing first (E7, E8).
std::vector<Operand> bind_jaxpr(std::string_view name, const TracedFunction& fn,
                                std::span<const Operand> args);

// Applies one primitive: evaluates now outside a trace, or appends the eqn to the innermost
// trace (operands from outer traces and concrete operands are captured as constvars).
// `drop_outputs` marks the outputs `_` (e.g. a swap used as a set).
std::vector<Operand> bind_prim(Prim prim, std::span<const Operand> ins, Params params = {},
                               bool drop_outputs = false);
Value bind_prim1(Prim prim, std::span<const Operand> ins, Params params = {});

// True while tracing (some trace is on this thread's stack).
bool is_tracing();

// Throws RefError E7 if the same ref appears twice in `args` (positions named), E8 if a ref
// of `captured` is also in `args`. `what` names the callee in the message.
void check_ref_aliasing(std::span<const Operand> args, std::span<const Operand> captured,
                        std::string_view what);

// A traced function closed over its constants: what make_jaxpr returns.
struct ClosedJaxpr {
  JaxprPtr jaxpr;
  std::vector<Operand> consts;

  // print_jaxpr(*jaxpr): the text jax.make_jaxpr prints.
  std::string str() const;
  // Evaluates (or stages) the jaxpr on args, binding its constvars to consts.
  std::vector<Operand> call(std::span<const Operand> args) const;
};
std::ostream& operator<<(std::ostream& os, const ClosedJaxpr& j);

}  // namespace refjit
