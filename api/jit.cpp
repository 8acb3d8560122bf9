// flat::Jit, what every jit function calls (refjit/jit.h): the trace cache per argument
// signature, donation, and the native path (the compile cache and the tier policy).
#include "refjit/jit.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "api/node.h"
#include "api/trace_state.h"
#include "backend/native.h"
#include "driver/bound_program.h"
#include "refjit/ir/text.h"

namespace refjit {

namespace {

// A trace cache key for a flat argument list: dtype/shape/ref-ness of each leaf.
std::string signature_key(std::span<const Operand> flat) {
  std::string key;
  for (const Operand& x : flat) {
    key += type_of(x).str();
    key += ';';
  }
  return key;
}

bool all_concrete(std::span<const Operand> consts) {
  for (const Operand& c : consts) {
    bool concrete = std::visit([](const auto& v) { return v.is_concrete(); }, c);
    if (!concrete) return false;
  }
  return true;
}

std::atomic<int> g_native_compiles{0};

// The compiled code of one jaxpr, at up to two tiers. Shared by every jit function whose
// trace printed to the same text.
struct CompiledEntry {
  std::mutex mu;  // held while compiling, so one thread compiles and the others wait
  std::shared_ptr<const CompiledFunction> fast;       // -O0
  std::shared_ptr<const CompiledFunction> optimized;  // -O3
  std::atomic<int64_t> calls{0};
};

// Process-wide structural cache: printed jaxpr (which spells every var's type, so it
// covers the input types) -> compiled code.
struct GlobalCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<CompiledEntry>> entries;
};

GlobalCache& global_cache() {
  // Never destroyed: compiled code must not be torn down after LLVM's own statics are
  // (static destruction order across libLLVM and us is unspecified).
  static GlobalCache* c = new GlobalCache;
  return *c;
}

// `donated`: per invar, whether the caller gives it up (the code differs, so the key too).
std::shared_ptr<CompiledEntry> global_entry(const Jaxpr& jaxpr, const std::vector<bool>& donated) {
  std::string key = print_jaxpr(jaxpr);
  if (std::find(donated.begin(), donated.end(), true) != donated.end()) {
    key += "\n# donated:";
    for (bool d : donated) key += d ? " 1" : " 0";
  }
  GlobalCache& g = global_cache();
  std::lock_guard<std::mutex> lock(g.mu);
  std::shared_ptr<CompiledEntry>& e = g.entries[key];
  if (!e) e = std::make_shared<CompiledEntry>();
  return e;
}

using Clock = std::chrono::steady_clock;

}  // namespace

int native_compile_count() { return g_native_compiles.load(); }

namespace flat {

using detail::from_runtime;
using detail::has_executor;
using detail::node_of;
using detail::take_donated;
using detail::to_runtime;

namespace {

std::vector<RtValue> runtime_consts(const TracedFunction& fn, std::string_view name) {
  std::vector<RtValue> values;
  for (const Operand& c : fn.consts) values.push_back(to_runtime(c, name));
  return values;
}

PipelineOptions donating(const std::vector<bool>& donated) {
  PipelineOptions options;
  options.buffers.donated = donated;
  return options;
}

}  // namespace

// What runs natively for one traced function: its jaxpr planned for its constants' values
// (they are fixed for a traced function: all-zero arrays are folded in, and integer
// constants' ranges let dead-regions and simplify-ranges work). The compile cache keys on
// the planned program, so functions share code only when it is valid for both.
struct NativeProgram {
  NativeProgram(const TracedFunction& fn, std::string_view name, const std::vector<bool>& donated)
      : traced(fn.jaxpr),
        bound(*fn.jaxpr, runtime_consts(fn, name), donating(donated)),
        entry(global_entry(bound.planned().jaxpr, donated)) {}

  JaxprPtr traced;  // held so the map key (its address) stays unique
  BoundProgram bound;
  std::shared_ptr<CompiledEntry> entry;
};

struct JitState {
  JitOptions options;

  // The trace cache: one traced function per argument signature.
  std::mutex traces_mu;
  std::map<std::string, TracedFunction> traced;
  int traces = 0;

  // The native path.
  std::mutex mu;
  // Fast path by jaxpr identity: the trace cache hands out the same JaxprPtr for every call
  // with one signature. The JaxprPtr is held so the address stays unique.
  std::unordered_map<const Jaxpr*, std::shared_ptr<const NativeProgram>> by_jaxpr;
  int compiles = 0;
  CompileStageTimings last;
};

namespace {

// Every live JitState, so clear_compile_cache() can drop their references to compiled code.
struct StateRegistry {
  std::mutex mu;
  std::vector<std::weak_ptr<JitState>> states;
};

StateRegistry& state_registry() {
  static StateRegistry* r = new StateRegistry;  // never destroyed, like the global cache
  return *r;
}

std::shared_ptr<JitState> make_jit_state(JitOptions options) {
  auto state = std::make_shared<JitState>();
  state->options = std::move(options);
  StateRegistry& r = state_registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::erase_if(r.states, [](const std::weak_ptr<JitState>& w) { return w.expired(); });
  r.states.push_back(state);
  return state;
}

// Whether a call with these options runs natively (reads REFJIT_BACKEND for automatic).
bool use_native(Backend backend) {
  if (has_executor()) return false;  // an installed executor sees every evaluation
  if (backend != Backend::automatic) return backend == Backend::native;
  const char* env = std::getenv("REFJIT_BACKEND");
  return !(env && std::string_view(env) == "interpreter");
}

std::shared_ptr<const CompiledFunction> compile_tier(JitState& state, const NativeProgram& prog,
                                                     int opt_level, double trace_ms) {
  auto f = std::make_shared<const CompiledFunction>(prog.bound.compile(opt_level));
  ++g_native_compiles;
  const CompileTimings& t = f->timings();
  std::lock_guard<std::mutex> lock(state.mu);
  ++state.compiles;
  state.last = CompileStageTimings{.trace_ms = trace_ms,
                                   .passes_ms = t.passes_ms + prog.bound.planned().passes_ms,
                                   .lower_ms = t.lower_ms,
                                   .mlir_passes_ms = t.mlir_passes_ms,
                                   .llvm_opt_ms = t.llvm_opt_ms,
                                   .codegen_ms = t.codegen_ms,
                                   .opt_level = opt_level};
  return f;
}

// The code to run for this call, compiling a tier if the policy asks for one.
std::shared_ptr<const CompiledFunction> select_code(JitState& state, const NativeProgram& prog,
                                                    Tier tier, double trace_ms) {
  CompiledEntry& entry = *prog.entry;
  int64_t calls = ++entry.calls;
  bool want_optimized =
      tier == Tier::optimized || (tier == Tier::adaptive && calls >= kHotCallThreshold);
  std::lock_guard<std::mutex> lock(entry.mu);
  if (entry.optimized && tier != Tier::fast) return entry.optimized;
  if (want_optimized) {
    entry.optimized = compile_tier(state, prog, 3, trace_ms);
    return entry.optimized;
  }
  if (!entry.fast) entry.fast = compile_tier(state, prog, 0, trace_ms);
  return entry.fast;
}

// Runs `fn` natively on `args` (outside any trace): compiles or reuses compiled code.
// `donated` (per flat argument, may be empty): arrays the caller gives up; they are taken out
// of their Values (take_donated) and may become results' storage.
std::vector<Operand> run_native(JitState& state, const std::string& name, Tier tier,
                                const TracedFunction& fn, std::span<const Operand> args,
                                double trace_ms, const std::vector<bool>& donated) {
  check_ref_aliasing(args, fn.consts, fmt::format("jit function `{}`", name));
  if (args.size() != fn.jaxpr->invars.size())
    throw Error(fmt::format("jit function `{}` takes {} arguments but {} were given", name,
                            fn.jaxpr->invars.size(), args.size()));
  std::shared_ptr<const NativeProgram> prog;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    auto it = state.by_jaxpr.find(fn.jaxpr.get());
    if (it != state.by_jaxpr.end()) prog = it->second;
  }
  if (!prog) {
    prog = std::make_shared<const NativeProgram>(fn, name, donated);
    std::lock_guard<std::mutex> lock(state.mu);
    state.by_jaxpr.emplace(fn.jaxpr.get(), prog);
  }
  std::shared_ptr<const CompiledFunction> code = select_code(state, *prog, tier, trace_ms);

  std::vector<RtValue> rt;
  rt.reserve(fn.consts.size() + args.size());
  for (size_t k = 0; k < fn.consts.size(); ++k)
    if (prog->bound.takes_const(k)) rt.push_back(to_runtime(fn.consts[k], name));
  for (size_t i = 0; i < args.size(); ++i)
    rt.push_back(i < donated.size() && donated[i] ? take_donated(args[i], name)
                                                  : to_runtime(args[i], name));
  std::vector<RtValue> results = (*code)(std::move(rt));
  std::vector<Operand> out;
  out.reserve(results.size());
  for (RtValue& r : results) out.push_back(from_runtime(std::move(r)));
  return out;
}

// Per flat argument: whether it belongs to a donated argument (argument i has sizes[i]
// leaves); checks the positions and that no ref is donated. Empty if nothing is donated.
std::vector<bool> donated_leaves(const std::vector<int>& donate_argnums,
                                 const std::vector<size_t>& sizes, std::span<const Operand> flat,
                                 const std::string& name) {
  if (donate_argnums.empty()) return {};
  std::vector<bool> donated(flat.size(), false);
  for (int a : donate_argnums) {
    if (a < 0 || static_cast<size_t>(a) >= sizes.size())
      throw Error(
          fmt::format("jit function `{}`: donate_argnums names argument {} but the "
                      "function was called with {} arguments",
                      name, a, sizes.size()));
    size_t first = 0;
    for (int k = 0; k < a; ++k) first += sizes[static_cast<size_t>(k)];
    for (size_t i = first; i < first + sizes[static_cast<size_t>(a)]; ++i) {
      if (std::holds_alternative<Ref>(flat[i]))
        throw Error(
            fmt::format("jit function `{}`: argument {} is donated but holds a ref; "
                        "refs are updated in place already, donate only arrays",
                        name, a));
      donated[i] = true;
    }
  }
  return donated;
}

// Marks the donated flat arguments' Values as donated (after a call that did not take them).
void retire_donated(std::span<const Operand> flat, const std::vector<bool>& donated,
                    const std::string& name) {
  for (size_t i = 0; i < flat.size() && i < donated.size(); ++i)
    if (donated[i] && node_of(std::get<Value>(flat[i]))->donated_to.empty())
      take_donated(flat[i], name);
}

// The traced function for this signature: from the cache, or traced now (its tracing time in
// `trace_ms`).
TracedFunction lookup_or_trace(JitState& state, const TraceBody& body,
                               std::span<const Operand> flat, double& trace_ms) {
  std::string key = signature_key(flat);
  {
    std::lock_guard<std::mutex> lock(state.traces_mu);
    auto it = state.traced.find(key);
    if (it != state.traced.end()) return it->second;
  }
  std::vector<Type> types = types_of(flat);
  auto t0 = Clock::now();
  TracedFunction traced = trace_function(body, types, state.options.name);
  trace_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(state.traces_mu);
  ++state.traces;
  // A function that closed over values of an enclosing trace is only valid inside it.
  if (all_concrete(traced.consts)) state.traced.emplace(key, traced);
  return traced;
}

}  // namespace

Jit::Jit(JitOptions options) : state_(make_jit_state(std::move(options))) {}

std::vector<Operand> Jit::call(const TraceBody& body, std::span<const Operand> flat,
                               const std::vector<size_t>& arg_leaves) const {
  JitState& state = *state_;
  const JitOptions& options = state.options;
  check_ref_aliasing(flat, {}, "jit function `" + options.name + "`");
  double trace_ms = 0;
  TracedFunction traced = lookup_or_trace(state, body, flat, trace_ms);
  const bool top = !is_tracing();
  const std::vector<bool> donated =
      top ? donated_leaves(options.donate_argnums, arg_leaves, flat, options.name)
          : std::vector<bool>{};
  std::vector<Operand> outs =
      top && use_native(options.backend)
          ? run_native(state, options.name, options.tier, traced, flat, trace_ms, donated)
          : bind_jaxpr(options.name, traced, flat);
  if (!donated.empty()) retire_donated(flat, donated, options.name);
  return outs;
}

int Jit::trace_count() const {
  std::lock_guard<std::mutex> lock(state_->traces_mu);
  return state_->traces;
}

int Jit::compile_count() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->compiles;
}

CompileStageTimings Jit::last_compile_timings() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->last;
}

const JitOptions& Jit::options() const { return state_->options; }

}  // namespace flat

void clear_compile_cache() {
  // Move the entries out and destroy them outside the locks: tearing down machine code
  // takes a while and must not block other threads' cache lookups.
  std::vector<std::shared_ptr<CompiledEntry>> dropped;
  {
    GlobalCache& g = global_cache();
    std::lock_guard<std::mutex> lock(g.mu);
    for (auto& [key, entry] : g.entries) dropped.push_back(std::move(entry));
    g.entries.clear();
  }
  std::vector<std::shared_ptr<flat::JitState>> states;
  {
    flat::StateRegistry& r = flat::state_registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& w : r.states)
      if (auto s = w.lock()) states.push_back(std::move(s));
    std::erase_if(r.states, [](const std::weak_ptr<flat::JitState>& w) { return w.expired(); });
  }
  for (const auto& state : states) {
    std::lock_guard<std::mutex> lock(state->mu);
    for (auto& [ptr, held] : state->by_jaxpr) dropped.push_back(held->entry);
    state->by_jaxpr.clear();
  }
}

int compile_cache_size() {
  GlobalCache& g = global_cache();
  std::lock_guard<std::mutex> lock(g.mu);
  return static_cast<int>(g.entries.size());
}

}  // namespace refjit
