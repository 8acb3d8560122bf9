// Element types of refjit arrays.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace refjit {

enum class DType : uint8_t { f32, f64, i32, i64, bool_ };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::i32, DType::i64,
                                       DType::bool_};

// Short name used in jaxpr text: "f32", "i32", "bool".
std::string_view short_name(DType d);
// Long name used in params and error messages: "float32", "int32", "bool".
std::string_view long_name(DType d);
// Accepts either spelling ("f32" or "float32"); nullopt if unknown.
std::optional<DType> parse_dtype(std::string_view name);

constexpr int64_t byte_size(DType d) {
  switch (d) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::bool_: return 1;
  }
  return 0;
}
constexpr bool is_float(DType d) { return d == DType::f32 || d == DType::f64; }
constexpr bool is_int(DType d) { return d == DType::i32 || d == DType::i64; }
constexpr bool is_bool(DType d) { return d == DType::bool_; }

}  // namespace refjit
