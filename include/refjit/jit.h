// jit and make_jaxpr: JAX's two basic function transformations.
//
//   auto take = refjit::jit([](Value x, Value i) { return x[i]; }, "take");
//   Value y = take(x, 3);                                   // traced once per signature
//   std::cout << refjit::make_jaxpr(take)(x, 3) << "\n";    // { lambda ; a:f32[10] b:i32[]. ...
//
// Backends: a jit function called outside any trace runs on the native backend (MLIR ->
// LLVM -> machine code) by default, compiled once per jaxpr and input types (an in-memory
// cache keyed by the printed jaxpr, shared by all jit functions). Tiers: the first calls
// run code compiled at -O0 (fast to compile); after kHotCallThreshold calls of the same
// compiled jaxpr it is recompiled at -O3 (synchronously, on the calling thread).
// `jit(f, {.backend = Backend::interpreter})` or REFJIT_BACKEND=interpreter in the
// environment selects the reference interpreter instead. Eager ops outside jit always run
// on the interpreter: compiling each one would cost milliseconds per op.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "refjit/compilation_cache.h"  // the on-disk cache of compiled code
#include "refjit/trace.h"
#include "refjit/tree.h"

namespace refjit {

enum class Backend {
  automatic,    // native, unless REFJIT_BACKEND=interpreter is set in the environment
  native,       // compile through MLIR/LLVM (backend)
  interpreter,  // the reference interpreter
};

enum class Tier {
  adaptive,   // -O0 first, -O3 once the function is hot (kHotCallThreshold calls)
  fast,       // -O0 only
  optimized,  // -O3 from the first call
};

// Calls of one compiled jaxpr after which the adaptive tier recompiles it at -O3.
inline constexpr int kHotCallThreshold = 10;

struct JitOptions {
  Backend backend = Backend::automatic;
  Tier tier = Tier::adaptive;
  std::string name = "jit";
  // Positions of arguments the caller gives up (JAX's donate_argnums): their arrays may
  // become the storage of results, so a state updated and returned needs no copy. After a
  // top-level call a donated Value is unusable (every use throws, naming this function);
  // inside another trace donation is ignored. Only arrays can be donated, not refs.
  std::vector<int> donate_argnums = {};
};

// Wall time of each stage of the most recent compilation, in milliseconds.
struct CompileStageTimings {
  double trace_ms = 0;        // tracing the C++ function into a jaxpr
  double passes_ms = 0;       // refjit passes before lowering (verifier, buffer plan)
  double lower_ms = 0;        // jaxpr -> memref-level MLIR (incl. fusion grouping)
  double mlir_passes_ms = 0;  // MLIR -> llvm dialect
  double llvm_opt_ms = 0;     // translation to LLVM IR + LLVM optimisation
  double codegen_ms = 0;      // machine code + JIT linking
  int opt_level = -1;         // -1: nothing compiled yet
  double total_ms() const {
    return trace_ms + passes_ms + lower_ms + mlir_passes_ms + llvm_opt_ms + codegen_ms;
  }
};

// How many native compilations this process has done (every tier counts once).
int native_compile_count();

// Empties the native compile cache: forgets every compiled jaxpr, in the process-wide cache
// and in every live jit function, so the machine code is released as soon as no call is
// running it. Later calls compile again. (Destroying a jit function releases only its own
// references; the process-wide cache keeps code for other jit functions of the same jaxpr.)
void clear_compile_cache();
// How many jaxprs the process-wide compile cache holds.
int compile_cache_size();

namespace flat {

struct JitState;  // defined inside the library: traces per signature, compiled code, counters

// jit on flat operands: what Jitted<F> calls once it has flattened its arguments.
class Jit {
 public:
  explicit Jit(JitOptions options);

  // Calls the function `body` on `flat`: traces it once per signature (the dtypes, shapes and
  // ref-ness of the leaves) and runs the jaxpr natively or in the interpreter, or stages one
  // `jit` eqn inside another trace. `arg_leaves[i]` is the number of leaves of argument i
  // (donate_argnums counts arguments). `body` is called only to trace.
  std::vector<Operand> call(const TraceBody& body, std::span<const Operand> operands,
                            const std::vector<size_t>& arg_leaves) const;

  int trace_count() const;
  int compile_count() const;
  CompileStageTimings last_compile_timings() const;
  const JitOptions& options() const;

 private:
  std::shared_ptr<JitState> state_;
};

}  // namespace flat

// make_jaxpr(f)(args...): the jaxpr of f at the types of args.
template <class F>
class MakeJaxpr {
 public:
  explicit MakeJaxpr(F f, std::string name) : f_(std::move(f)), name_(std::move(name)) {}
  template <class... A>
  ClosedJaxpr operator()(const A&... args) const {
    std::vector<Operand> operands;
    (tree::flatten_arg(args, operands), ...);
    check_ref_aliasing(operands, {}, name_);
    std::vector<Type> types = types_of(operands);
    F f = f_;
    TracedFunction traced = trace_function(
        [&](const std::vector<Operand>& in) { return tree::call_flat(f, in, args...); }, types,
        name_);
    check_ref_aliasing(operands, traced.consts, name_);
    return ClosedJaxpr{traced.jaxpr, traced.consts};
  }

 private:
  F f_;
  std::string name_;
};

template <class F>
MakeJaxpr<F> make_jaxpr(F f, std::string name = "function") {
  return MakeJaxpr<F>(std::move(f), std::move(name));
}

// jit(f, name): a callable that traces f once per argument signature and runs the jaxpr
// (refs passed in are updated in place); called inside another trace it stages one
// `jit[name=...]` eqn instead.
template <class F>
class Jitted {
 public:
  Jitted(F f, JitOptions options)
      : f_(std::make_shared<F>(std::move(f))), jit_(std::move(options)) {}
  Jitted(F f, std::string name) : Jitted(std::move(f), JitOptions{.name = std::move(name)}) {}

  template <class... A>
  auto operator()(const A&... args) const {
    std::vector<Operand> operands;
    std::vector<size_t> arg_leaves;
    auto flatten = [&](const auto& arg) {
      const size_t before = operands.size();
      tree::flatten_arg(arg, operands);
      arg_leaves.push_back(operands.size() - before);
    };
    (flatten(args), ...);
    F& f = *f_;
    std::vector<Operand> outs =
        jit_.call([&](const std::vector<Operand>& in) { return tree::call_flat(f, in, args...); },
                  operands, arg_leaves);
    return tree::unflatten_result<F, A...>(outs);
  }

  // How many times f has been traced (once per new signature).
  int trace_count() const { return jit_.trace_count(); }
  // How many native compilations calls of this function triggered (both tiers count; a
  // jaxpr already compiled by another jit function is reused without compiling).
  int compile_count() const { return jit_.compile_count(); }
  // Per-stage latency of the most recent native compilation (opt_level -1 if none).
  CompileStageTimings last_compile_timings() const { return jit_.last_compile_timings(); }
  const JitOptions& options() const { return jit_.options(); }
  const std::string& name() const { return jit_.options().name; }
  const F& function() const { return *f_; }

 private:
  std::shared_ptr<F> f_;
  flat::Jit jit_;
};

template <class F>
Jitted<F> jit(F f, std::string name = "jit") {
  return Jitted<F>(std::move(f), std::move(name));
}

// jit(f, {.backend = Backend::interpreter, .tier = Tier::optimized, .name = "step"})
template <class F>
Jitted<F> jit(F f, JitOptions options) {
  return Jitted<F>(std::move(f), std::move(options));
}

// make_jaxpr of a jitted function shows the one jit eqn it stages, as in JAX.
template <class F>
MakeJaxpr<Jitted<F>> make_jaxpr(Jitted<F> f) {
  return MakeJaxpr<Jitted<F>>(f, f.name());
}

}  // namespace refjit
