#include "refjit/ir/literal.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace refjit {

namespace {

// Float -> int with XLA's semantics: truncate, NaN -> 0, saturate out of range.
int64_t saturating_cast(double v, DType d) {
  if (std::isnan(v)) return 0;
  double lo = d == DType::i32 ? std::numeric_limits<int32_t>::min()
                              : static_cast<double>(std::numeric_limits<int64_t>::min());
  double hi = d == DType::i32 ? std::numeric_limits<int32_t>::max()
                              : static_cast<double>(std::numeric_limits<int64_t>::max());
  if (v <= lo)
    return d == DType::i32 ? std::numeric_limits<int32_t>::min()
                           : std::numeric_limits<int64_t>::min();
  if (v >= hi)
    return d == DType::i32 ? std::numeric_limits<int32_t>::max()
                           : std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(std::trunc(v));
}

}  // namespace

Literal Literal::of(DType d, double v) {
  switch (d) {
    case DType::f32: return of_float(d, static_cast<double>(static_cast<float>(v)));
    case DType::f64: return of_float(d, v);
    case DType::i32:
    case DType::i64: return of_int(d, saturating_cast(v, d));
    case DType::bool_: return of_bool(v != 0.0);
  }
  return {};
}

bool Literal::operator==(const Literal& o) const {
  if (dtype != o.dtype) return false;
  if (is_float(dtype)) return f == o.f || (std::isnan(f) && std::isnan(o.f));
  return i == o.i;
}

std::string Literal::value_text() const {
  if (dtype == DType::bool_) return i ? "True" : "False";
  if (is_int(dtype)) return fmt::format("{}", i);
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  // Shortest text that reads back to the same value, always with a '.' or exponent.
  std::string s =
      dtype == DType::f32 ? fmt::format("{}", static_cast<float>(f)) : fmt::format("{}", f);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string Literal::str() const { return value_text() + ":" + type().str(); }

}  // namespace refjit
