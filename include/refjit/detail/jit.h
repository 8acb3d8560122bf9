// Implementation details of refjit/jit.h that its templates need. Not part of the API: names here
// may change at any time.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "refjit/trace.h"

namespace refjit {

enum class Backend;          // refjit/jit.h
enum class Tier;             // refjit/jit.h
struct CompileStageTimings;  // refjit/jit.h

namespace detail {
// Per-jit-function state of the native path (compiled code per jaxpr, counters).
struct JitState;
std::shared_ptr<JitState> make_jit_state();
// Whether a call with these options runs natively (reads REFJIT_BACKEND for automatic).
bool use_native(Backend backend);
// Runs `fn` natively on `args` (outside any trace): compiles or reuses compiled code.
// `donated` (per flat argument, may be empty): arrays the caller gives up; they are taken out
// of their Values (take_donated) and may become results' storage.
std::vector<Operand> run_native(JitState& state, const std::string& name, Tier tier,
                                const TracedFunction& fn, std::span<const Operand> args,
                                double trace_ms, const std::vector<bool>& donated = {});
// Per flat argument: whether it belongs to a donated argument (argument i has sizes[i]
// leaves); checks the positions and that no ref is donated. Empty if nothing is donated.
std::vector<bool> donated_leaves(const std::vector<int>& donate_argnums,
                                 const std::vector<size_t>& sizes, std::span<const Operand> flat,
                                 const std::string& name);
// Marks the donated flat arguments' Values as donated (after a call that did not take them).
void retire_donated(std::span<const Operand> flat, const std::vector<bool>& donated,
                    const std::string& name);
int compile_count(const JitState& state);
CompileStageTimings last_compile_timings(const JitState& state);
}  // namespace detail

}  // namespace refjit
