#include "tools/values.h"

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "tools/program.h"

namespace refjit::cli {

namespace {

bool is_separator(char c) { return c == '[' || c == ']' || c == ','; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool is_decimal_number(std::string_view w) {
  // [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?
  size_t i = 0;
  if (i < w.size() && (w[i] == '+' || w[i] == '-')) ++i;
  size_t digits = 0;
  while (i < w.size() && std::isdigit(static_cast<unsigned char>(w[i]))) ++i, ++digits;
  if (i < w.size() && w[i] == '.') {
    ++i;
    while (i < w.size() && std::isdigit(static_cast<unsigned char>(w[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < w.size() && (w[i] == 'e' || w[i] == 'E')) {
    ++i;
    if (i < w.size() && (w[i] == '+' || w[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < w.size() && std::isdigit(static_cast<unsigned char>(w[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == w.size();
}

bool is_integer_number(std::string_view w) {
  size_t i = (!w.empty() && (w[0] == '+' || w[0] == '-')) ? 1 : 0;
  if (i == w.size()) return false;
  for (; i < w.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(w[i]))) return false;
  return true;
}

// A real part or an imaginary coefficient: a decimal number, inf or nan (signed).
std::optional<double> real_number(std::string_view w) {
  std::string_view body = w;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
  if (body != "inf" && body != "nan" && !is_decimal_number(w)) return std::nullopt;
  return std::strtod(std::string(w).c_str(), nullptr);
}

// Python's complex forms, as refjit prints them: 1.5 (real), 2j, (1+2j), (-0-1.5e-3j).
std::optional<std::complex<double>> complex_number(std::string_view w) {
  if (w.size() >= 2 && w.front() == '(' && w.back() == ')') w = w.substr(1, w.size() - 2);
  if (w.empty() || w.back() != 'j') {
    std::optional<double> re = real_number(w);
    if (!re) return std::nullopt;
    return std::complex<double>(*re, 0.0);
  }
  w.remove_suffix(1);
  // The imaginary part starts at the last sign that is neither the first character nor an
  // exponent's.
  size_t split = std::string_view::npos;
  for (size_t k = w.size(); k-- > 1;)
    if ((w[k] == '+' || w[k] == '-') && w[k - 1] != 'e' && w[k - 1] != 'E') {
      split = k;
      break;
    }
  std::optional<double> re =
      split == std::string_view::npos ? 0.0 : real_number(w.substr(0, split));
  std::optional<double> im = real_number(split == std::string_view::npos ? w : w.substr(split));
  if (!re || !im) return std::nullopt;
  return std::complex<double>(*re, *im);
}

// Walks one VALUE text, guided by the expected type, writing elements in row-major order.
class ValueParser {
 public:
  ValueParser(std::string_view text, const ArrayType& type)
      : text_(text), type_(type), result_(type) {}

  Array parse() {
    parse_dim(0);
    skip_space();
    if (pos_ < text_.size())
      fail(fmt::format("unexpected '{}' at column {} after a complete {} value", rest_token(),
                       pos_ + 1, type_.str()));
    return std::move(result_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) { throw ValueError(message); }

  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }
  bool at_end() {
    skip_space();
    return pos_ >= text_.size();
  }
  // The token at pos_ (for messages): a separator or a word.
  std::string rest_token() {
    if (pos_ >= text_.size()) return "end of value";
    if (is_separator(text_[pos_])) return std::string(1, text_[pos_]);
    size_t end = pos_;
    while (end < text_.size() && !is_separator(text_[end]) && !is_space(text_[end])) ++end;
    return std::string(text_.substr(pos_, end - pos_));
  }
  std::string describe_here() {
    if (at_end()) return "the end of the value";
    return fmt::format("'{}' at column {}", rest_token(), pos_ + 1);
  }

  void parse_dim(int dim) {
    if (dim == type_.rank()) {
      parse_element();
      return;
    }
    int64_t expected = type_.shape[dim];
    if (at_end() || text_[pos_] != '[') {
      if (type_.rank() == dim + 1 && dim == 0)
        fail(fmt::format("{} is an array: expected a list like [{}], got {}", type_.str(),
                         example_elements(expected), describe_here()));
      fail(fmt::format("expected '[' opening dimension {} of {} ({} elements), got {}", dim,
                       type_.str(), expected, describe_here()));
    }
    ++pos_;
    int64_t count = 0;
    if (!at_end() && text_[pos_] == ']') {
      ++pos_;
    } else {
      while (true) {
        if (count == expected)
          fail(
              fmt::format("dimension {} of {} has {} element{}, but the list has more "
                          "(column {})",
                          dim, type_.str(), expected, expected == 1 ? "" : "s", pos_ + 1));
        parse_dim(dim + 1);
        ++count;
        if (at_end()) fail(fmt::format("missing ']' closing dimension {} of {}", dim, type_.str()));
        if (text_[pos_] == ',') {
          ++pos_;
          if (!at_end() && text_[pos_] == ']')
            fail(fmt::format("expected an element after ',', got ']' at column {}", pos_ + 1));
          continue;
        }
        if (text_[pos_] == ']') {
          ++pos_;
          break;
        }
        fail(fmt::format("expected ',' or ']' in dimension {}, got {}", dim, describe_here()));
      }
    }
    if (count != expected)
      fail(fmt::format("dimension {} of {} has {} element{}, but the list has {}", dim, type_.str(),
                       expected, expected == 1 ? "" : "s", count));
  }

  std::string example_elements(int64_t n) {
    std::string s;
    for (int64_t i = 0; i < std::min<int64_t>(n, 3); ++i) s += i ? ", x" : "x";
    if (n > 3) s += ", ...";
    return s;
  }

  void parse_element() {
    if (at_end()) fail(fmt::format("missing a {} number at the end of the value", dtype_name()));
    if (text_[pos_] == '[' && type_.rank() == 0)
      fail(fmt::format("{} is a scalar: expected a number like 3, not a list", type_.str()));
    if (text_[pos_] == '[')
      fail(fmt::format("too many '[' at column {}: {} nests {} list level{} deep", pos_ + 1,
                       type_.str(), type_.rank(), type_.rank() == 1 ? "" : "s"));
    if (is_separator(text_[pos_]))
      fail(fmt::format("expected a {} number, got {}", dtype_name(), describe_here()));
    size_t column = pos_ + 1;
    std::string word = rest_token();
    pos_ += word.size();
    store(word, column);
  }

  std::string_view dtype_name() const { return long_name(type_.dtype); }

  void store(const std::string& w, size_t column) {
    DType d = type_.dtype;
    std::string where = fmt::format("'{}' at column {}", w, column);
    if (is_bool(d)) {
      if (w != "true" && w != "false")
        fail(fmt::format("{} is not a bool: expected true or false", where));
      result_.mutable_values<bool>()[index_++] = w == "true";
      return;
    }
    if (is_int(d)) {
      if (!is_integer_number(w))
        fail(fmt::format("{} is not an integer, which {} needs", where, type_.str()));
      std::string_view digits = w;
      if (digits.starts_with('+')) digits.remove_prefix(1);
      std::optional<Literal> v = Literal::parse_int(d, digits);
      if (!v) fail(fmt::format("{} does not fit in {}", where, dtype_name()));
      // The value's low bytes are the element (little-endian).
      std::memcpy(result_.mutable_data() + index_++ * byte_size(d), &v->i,
                  static_cast<size_t>(byte_size(d)));
      return;
    }
    if (is_complex(d)) {
      std::optional<std::complex<double>> z = complex_number(w);
      if (!z)
        fail(
            fmt::format("{} is not a complex number: expected Python's form, e.g. 1.5, 2j, "
                        "(1+2j) or (-0.5-1e-3j)",
                        where));
      result_.set_from_complex(index_++, *z);
      return;
    }
    // Floats: decimal numbers (integers included), nan, inf, -inf.
    double special = 0;
    bool is_special = true;
    if (w == "nan" || w == "+nan" || w == "-nan")
      special = std::numeric_limits<double>::quiet_NaN();
    else if (w == "inf" || w == "+inf")
      special = std::numeric_limits<double>::infinity();
    else if (w == "-inf")
      special = -std::numeric_limits<double>::infinity();
    else
      is_special = false;
    if (!is_special && !is_decimal_number(w)) {
      std::string hint = (w == "true" || w == "false") ? " (true/false are for bool binders)" : "";
      fail(fmt::format("{} is not a number{}", where, hint));
    }
    if (d == DType::f32) {
      float v = static_cast<float>(special);
      if (!is_special) {
        errno = 0;
        v = std::strtof(w.c_str(), nullptr);  // correctly rounded straight to f32
        if (errno == ERANGE && std::isinf(v))
          fail(fmt::format("{} does not fit in float32 (largest about 3.4e38)", where));
      }
      result_.mutable_values<float>()[index_++] = v;
    } else {
      double v = special;
      if (!is_special) {
        errno = 0;
        v = std::strtod(w.c_str(), nullptr);
        if (errno == ERANGE && std::isinf(v))
          fail(fmt::format("{} does not fit in float64 (largest about 1.8e308)", where));
      }
      if (is_half_float(type_.dtype)) {  // one rounding, from the decimal's double
        if (std::isfinite(v) && std::isinf(Literal::of(type_.dtype, v).f))
          fail(fmt::format("{} does not fit in {} (largest {})", where, long_name(type_.dtype),
                           type_.dtype == DType::f16 ? "65504" : "about 3.4e38"));
        result_.set_from_double(index_++, v);
      } else
        result_.mutable_values<double>()[index_++] = v;
    }
  }

  std::string_view text_;
  const ArrayType& type_;
  Array result_;
  size_t pos_ = 0;
  int64_t index_ = 0;
};

std::string quoted_value(std::string_view text) {
  constexpr size_t kMax = 40;
  if (text.size() <= kMax) return fmt::format("'{}'", text);
  return fmt::format("'{}...'", text.substr(0, kMax));
}

}  // namespace

Array parse_array_value(std::string_view text, const ArrayType& type) {
  return ValueParser(text, type).parse();
}

std::vector<RtValue> parse_values(std::span<const ValueSlot> slots,
                                  std::span<const std::string> values) {
  if (values.size() != slots.size()) {
    std::string expected;
    for (size_t i = 0; i < slots.size(); ++i)
      expected += fmt::format("\n  value {}: {}", i + 1, slots[i].label);
    if (slots.empty()) expected = " (the program takes no values)";
    std::string detail;
    if (values.size() > slots.size())
      detail = fmt::format("; the first extra one is value {} {}", slots.size() + 1,
                           quoted_value(values[slots.size()]));
    throw ValueError(fmt::format("expected {} value{}, got {}{}; the values are:{}", slots.size(),
                                 slots.size() == 1 ? "" : "s", values.size(), detail, expected));
  }
  std::vector<RtValue> out;
  out.reserve(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    const Type& t = slots[i].type;
    try {
      Array a = parse_array_value(values[i], t.array);
      if (t.is_ref)
        out.emplace_back(std::make_shared<RefBuffer>(std::move(a)));
      else
        out.emplace_back(std::move(a));
    } catch (const ValueError& e) {
      throw ValueError(fmt::format("value {} ({}) {}: {}", i + 1, slots[i].label,
                                   quoted_value(values[i]), e.what()));
    }
  }
  return out;
}

std::vector<ValueSlot> argument_slots(const Jaxpr& program, bool tangents) {
  std::vector<ValueSlot> slots;
  auto add = [&](std::string_view kind, Var v) {
    const Type& t = program.type_of(v);
    slots.push_back({t, fmt::format("{} {}:{}", kind, binder_name(program, v), t.str())});
  };
  for (Var v : program.constvars) add("constvar", v);
  for (Var v : program.invars) add("invar", v);
  if (tangents)
    for (Var v : program.invars) add("tangent of invar", v);
  return slots;
}

RtValue random_value(const ValueSlot& slot, std::mt19937_64& rng) {
  const ArrayType& type = slot.type.array;
  Array a(type);
  // Uniform in [-1, 1) from the top 53 bits (std::uniform_real_distribution takes a long
  // double logarithm per draw in libstdc++: most of the setup time of a 4M-element input).
  auto real = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-52 - 1.0; };
  auto small = [&] { return static_cast<int>(rng() >> 61); };  // 0..7
  for (int64_t i = 0; i < a.size(); ++i) {
    double v = is_float(type.dtype)         ? real()
               : type.dtype == DType::bool_ ? double(small() & 1)
                                            : double(small());
    a.set_from_double(i, v);
  }
  if (slot.type.is_ref) return std::make_shared<RefBuffer>(std::move(a));
  return a;
}

std::string value_text(const Array& a) { return a.str(); }

std::string value_text(const RtValue& v) {
  if (const auto* a = std::get_if<Array>(&v)) return value_text(*a);
  const auto& ref = std::get<RefBufferPtr>(v);
  return ref ? value_text(ref->value()) : std::string("<no value>");
}

}  // namespace refjit::cli
