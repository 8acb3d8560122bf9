// The CLI's value syntax (docs/cli.md "Values"): parsing VALUE arguments against the binder
// types of a program, and printing results.
//
//   numbers  3  -2.5  1e-3  nan  inf  -inf      (an integer is accepted for a float binder)
//   bools    true  false
//   arrays   [1, 2, 3]  [[1.0, 2.0], [3.0, 4.0]]  []   (nesting matches the shape exactly)
//   refs     a Ref{T} binder takes its initial value, a value of type T
#pragma once

#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "refjit/array.h"
#include "refjit/ir/error.h"
#include "refjit/ir/jaxpr.h"
#include "refjit/ir/type.h"
#include "runtime/interpreter.h"

namespace refjit::cli {

// A VALUE that does not fit its binder (syntax, shape, dtype, count). Exit code 1.
class ValueError : public Error {
 public:
  using Error::Error;
};

// Parses one VALUE as an array of exactly `type`. Throws ValueError saying what is wrong
// (the caller adds which argument it was).
Array parse_array_value(std::string_view text, const ArrayType& type);

// One binder that takes a VALUE: its type and how messages name it ("invar x:f32[3]").
struct ValueSlot {
  Type type;
  std::string label;
};

// Parses one VALUE per slot, in order. An array slot gets an Array, a Ref{T} slot a fresh
// RefBuffer holding its initial value. Throws ValueError naming the 1-based value position
// and the slot on a wrong count, syntax, shape or dtype.
std::vector<RtValue> parse_values(std::span<const ValueSlot> slots,
                                  std::span<const std::string> values);

// The binders that take VALUEs, in order: one slot per constvar, then per invar, then (with
// `tangents`, for --jvp) one tangent per invar.
std::vector<ValueSlot> argument_slots(const Jaxpr& program, bool tangents);

// A value for `slot` drawn from `rng`: floats uniform in [-1, 1), integers in [0, 8), bools
// either way. A Ref{T} slot gets a fresh RefBuffer.
RtValue random_value(const ValueSlot& slot, std::mt19937_64& rng);

// A value in the value syntax; shortest round-trip floats (Array::str).
std::string value_text(const Array& a);
std::string value_text(const RtValue& v);

}  // namespace refjit::cli
