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

// Python's repr of a complex number, as JAX prints complex literals: "2j", "0j", "(1+2j)",
// "(-0-1j)", "(nan+infj)"; parts of dtype d's part type (f32 for c64) in their shortest form.
std::string complex_text(DType d, double re, double im);

struct Literal {
  DType dtype = DType::f32;
  // `f` for floats and a complex value's real part, `im` for its imaginary part, `i` for
  // ints and bools (0/1); a uint64 value is kept as its bit pattern.
  double f = 0.0;
  int64_t i = 0;
  double im = 0.0;

  static Literal of_float(DType d, double v) { return Literal{d, v, 0}; }
  static Literal of_int(DType d, int64_t v) { return Literal{d, 0.0, v}; }
  static Literal of_bool(bool v) { return Literal{DType::bool_, 0.0, v ? 1 : 0}; }
  // A complex literal of complex dtype d, its parts rounded to d's part type.
  static Literal of_complex(DType d, double re, double im);
  // A literal of dtype d holding v (converted as convert_element_type would).
  static Literal of(DType d, double v);
  // The integer written in `text` (decimal, optional '-') as a literal of integer dtype d;
  // nullopt when it is not an integer or does not fit d.
  static std::optional<Literal> parse_int(DType d, std::string_view text);

  ArrayType type() const { return ArrayType{dtype, {}}; }
  // The value (a complex literal's real part) as a double.
  double as_double() const {
    if (is_inexact(dtype)) return f;
    return dtype == DType::u64 ? static_cast<double>(static_cast<uint64_t>(i))
                               : static_cast<double>(i);
  }
  bool operator==(const Literal& o) const;
  // Whether the value is the real number v (a complex one: v + 0j), in any dtype.
  bool equals(double v) const {
    if (is_complex(dtype)) return f == v && im == 0.0;
    return as_double() == v;
  }

  // Value text without the type: "2.0", "3", "True"... as JAX prints it.
  std::string value_text() const;
  // "2.0:f32[]"
  std::string str() const;
};

}  // namespace refjit
