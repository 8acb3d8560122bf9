// Helpers shared by the fuzz targets: a work budget that keeps every run short, and
// deterministic arguments for a jaxpr's binders.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "refjit/ir/jaxpr.h"
#include "runtime/interpreter.h"

namespace refjit::fuzz {

// Upper bound on the element operations one evaluation of `jaxpr` may do; refuses (returns
// false) when the estimate exceeds `budget`. Scan bodies count `length` times, dot_general
// counts lhs * rhs elements, every other eqn the elements of its operands and results.
// Saturating arithmetic: absurd shapes from the fuzzer must not overflow the estimate.
bool within_budget(const Jaxpr& jaxpr, int64_t budget);

// A value for `t`, filled deterministically from `salt`: small floats in [-2, 2] with a
// few exact zeros, ints in [-2, 4], alternating bools. Refs get a fresh buffer.
RtValue make_value(const Type& t, uint64_t salt);

// One value per constvar then invar.
std::vector<RtValue> make_args(const Jaxpr& jaxpr, uint64_t salt);

// A fresh deep copy (ref buffers are not shared with `args`).
std::vector<RtValue> copy_values(const std::vector<RtValue>& args);

// Aborts with `what` (and the input) printed: turns a property violation into a libFuzzer
// crash with a reproducer.
[[noreturn]] void fail(std::string_view what, std::string_view detail, std::string_view input);

// FNV-1a of the input, to vary arguments and choices without extra input bytes.
uint64_t hash_bytes(const uint8_t* data, size_t size);

}  // namespace refjit::fuzz
