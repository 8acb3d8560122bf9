#include "refjit/ir/literal.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "refjit/ir/half_float.h"

namespace refjit {

namespace {

// The range of an integer dtype, as doubles.
double int_lo(DType d) { return is_unsigned(d) ? 0.0 : -std::ldexp(1.0, bit_width(d) - 1); }
double int_hi(DType d) {
  return std::ldexp(1.0, is_unsigned(d) ? bit_width(d) : bit_width(d) - 1);  // exclusive
}

// Float -> int with XLA's semantics: truncate, NaN -> 0, saturate out of range. The result is
// the value's bit pattern as int64_t (uint64 values past INT64_MAX wrap).
int64_t saturating_cast(double v, DType d) {
  if (std::isnan(v)) return 0;
  const int bits = bit_width(d);
  // The signed minimum -2^(bits-1): all bits from bits-1 up set (two's complement).
  if (v <= int_lo(d)) return is_unsigned(d) ? 0 : static_cast<int64_t>(~uint64_t{0} << (bits - 1));
  if (v >= int_hi(d)) {
    if (is_unsigned(d))
      return bits == 64 ? static_cast<int64_t>(~uint64_t{0})
                        : static_cast<int64_t>((uint64_t{1} << bits) - 1);
    return static_cast<int64_t>((uint64_t{1} << (bits - 1)) - 1);
  }
  double t = std::trunc(v);
  if (is_unsigned(d) && t >= std::ldexp(1.0, 63))
    return static_cast<int64_t>(static_cast<uint64_t>(t));
  return static_cast<int64_t>(t);
}

}  // namespace

Literal Literal::of_complex(DType d, double re, double im) {
  const bool c64 = d == DType::c64;
  auto part = [&](double x) { return c64 ? static_cast<double>(static_cast<float>(x)) : x; };
  Literal l{d, part(re), 0};
  l.im = part(im);
  return l;
}

Literal Literal::of(DType d, double v) {
  switch (d) {
    case DType::c64:
    case DType::c128: return of_complex(d, v, 0.0);
    case DType::f32: return of_float(d, static_cast<double>(static_cast<float>(v)));
    case DType::f64: return of_float(d, v);
    case DType::f16: return of_float(d, static_cast<float>(Float16(v)));
    case DType::bf16: return of_float(d, static_cast<float>(BFloat16(v)));
    case DType::bool_: return of_bool(v != 0.0);
    default: return of_int(d, saturating_cast(v, d));
  }
}

std::optional<Literal> Literal::parse_int(DType d, std::string_view text) {
  if (!is_int(d) || text.empty()) return std::nullopt;
  const char* end = text.data() + text.size();
  const int bits = bit_width(d);
  if (is_unsigned(d)) {
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || p != end) return std::nullopt;
    if (bits < 64 && v >= (uint64_t{1} << bits)) return std::nullopt;
    return of_int(d, static_cast<int64_t>(v));
  }
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end) return std::nullopt;
  if (bits < 64 && (v < -(int64_t{1} << (bits - 1)) || v >= (int64_t{1} << (bits - 1))))
    return std::nullopt;
  return of_int(d, v);
}

bool Literal::operator==(const Literal& o) const {
  if (dtype != o.dtype) return false;
  auto same = [](double x, double y) { return x == y || (std::isnan(x) && std::isnan(y)); };
  if (is_complex(dtype)) return same(f, o.f) && same(im, o.im);
  if (is_float(dtype)) return same(f, o.f);
  return i == o.i;
}

std::string float_text(DType d, double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s;
  if (is_half_float(d)) {
    // The fewest digits that read back to the same 16-bit value: after the point for
    // moderate magnitudes ("-6712.0", "0.02747"), significant ones otherwise ("1e-07").
    auto reads_back = [&](const std::string& t) {
      return Literal::of(d, std::strtod(t.c_str(), nullptr)).f == v;
    };
    bool fixed = std::fabs(v) >= 1e-4 && std::fabs(v) < 1e16;
    for (int digits = fixed ? 0 : 1; digits <= 20; ++digits) {
      s = fixed ? fmt::format("{:.{}f}", v, digits) : fmt::format("{:.{}g}", v, digits);
      if (reads_back(s)) break;
    }
  } else {
    s = d == DType::f32 ? fmt::format("{}", static_cast<float>(v)) : fmt::format("{}", v);
  }
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

namespace {

// A part of a complex repr as Python writes it: the shortest digits, no ".0" on a whole
// number (repr(2+1.5j) == '(2+1.5j)'), inf and nan by name.
std::string complex_part(DType part, double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::trunc(v) && std::fabs(v) < 1e16) {
    std::string s = fmt::format("{:.0f}", v);
    return s == "0" && std::signbit(v) ? "-0" : s;
  }
  return part == DType::f32 ? fmt::format("{}", static_cast<float>(v)) : fmt::format("{}", v);
}

}  // namespace

std::string complex_text(DType d, double re, double im) {
  const DType part = real_dtype(d);
  std::string imag = complex_part(part, im);
  if (re == 0.0 && !std::signbit(re)) return imag + "j";
  if (imag[0] != '-') imag = "+" + imag;
  return "(" + complex_part(part, re) + imag + "j)";
}

std::string Literal::value_text() const {
  if (is_complex(dtype)) return complex_text(dtype, f, im);
  if (dtype == DType::bool_) return i ? "True" : "False";
  if (dtype == DType::u64) return fmt::format("{}", static_cast<uint64_t>(i));
  if (is_int(dtype)) return fmt::format("{}", i);
  return float_text(dtype, f);
}

std::string Literal::str() const { return value_text() + ":" + type().str(); }

}  // namespace refjit
