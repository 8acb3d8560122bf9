#include "refjit/ir/dtype.h"

namespace refjit {

std::string_view short_name(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::bool_: return "bool";
  }
  return "?";
}

std::string_view long_name(DType d) {
  switch (d) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::bool_: return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType d : kAllDTypes) {
    if (name == short_name(d) || name == long_name(d)) return d;
  }
  return std::nullopt;
}

}  // namespace refjit
