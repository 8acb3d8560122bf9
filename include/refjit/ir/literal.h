// A typed scalar constant appearing directly as an eqn operand: 3:i32[], 2.0:f32[].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "refjit/ir/type.h"

namespace refjit {

// The shortest text that reads back to the same value of float dtype d, always with a '.' or
// an exponent ("2.0", "0.1", "1e-08"), or nan / inf / -inf.
std::string float_text(DType d, double v);

struct Literal {
  DType dtype = DType::f32;
  // Exactly one is meaningful: `f` for floats, `i` for ints and bools (0/1); a uint64 value
  // is kept as its bit pattern.
  double f = 0.0;
  int64_t i = 0;

  static Literal of_float(DType d, double v) { return Literal{d, v, 0}; }
  static Literal of_int(DType d, int64_t v) { return Literal{d, 0.0, v}; }
  static Literal of_bool(bool v) { return Literal{DType::bool_, 0.0, v ? 1 : 0}; }
  // A literal of dtype d holding v (converted as convert_element_type would).
  static Literal of(DType d, double v);
  // The integer written in `text` (decimal, optional '-') as a literal of integer dtype d;
  // nullopt when it is not an integer or does not fit d.
  static std::optional<Literal> parse_int(DType d, std::string_view text);

  ArrayType type() const { return ArrayType{dtype, {}}; }
  double as_double() const {
    if (is_float(dtype)) return f;
    return dtype == DType::u64 ? static_cast<double>(static_cast<uint64_t>(i))
                               : static_cast<double>(i);
  }
  bool operator==(const Literal& o) const;

  // Value text without the type: "2.0", "3", "True"... as JAX prints it.
  std::string value_text() const;
  // "2.0:f32[]"
  std::string str() const;
};

}  // namespace refjit
