#include "refjit/ir/type.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace refjit {

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_text(const Shape& shape) { return fmt::format("{}", fmt::join(shape, ",")); }

std::string ArrayType::str() const {
  return fmt::format("{}[{}]", short_name(dtype), shape_text(shape));
}
std::string ArrayType::long_str() const {
  return fmt::format("{}[{}]", long_name(dtype), shape_text(shape));
}

std::string_view ref_kind_name(RefKind k) {
  switch (k) {
    case RefKind::plain: return "plain";
    case RefKind::no_grad_no_remat: return "no_grad_no_remat";
  }
  return "?";
}

std::optional<RefKind> parse_ref_kind(std::string_view name) {
  if (name == "None" || name == "plain") return RefKind::plain;
  if (name == "no_grad_no_remat") return RefKind::no_grad_no_remat;
  return std::nullopt;
}

namespace {

std::string ref_text(const std::string& inner, RefKind kind) {
  if (kind == RefKind::plain) return "Ref{" + inner + "}";
  return fmt::format("Ref{{{}, {}}}", inner, ref_kind_name(kind));
}

}  // namespace

std::string Type::str() const { return is_ref ? ref_text(array.str(), ref_kind) : array.str(); }
std::string Type::long_str() const {
  return is_ref ? ref_text(array.long_str(), ref_kind) : array.long_str();
}

}  // namespace refjit
