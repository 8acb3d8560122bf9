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

std::string Type::str() const { return is_ref ? "Ref{" + array.str() + "}" : array.str(); }
std::string Type::long_str() const {
  return is_ref ? "Ref{" + array.long_str() + "}" : array.long_str();
}

}  // namespace refjit
