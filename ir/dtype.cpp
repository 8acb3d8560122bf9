#include "refjit/ir/dtype.h"

namespace refjit {

namespace {

struct Names {
  std::string_view short_name, long_name;
};

constexpr Names names(DType d) {
  switch (d) {
    case DType::f32: return {"f32", "float32"};
    case DType::f64: return {"f64", "float64"};
    case DType::i32: return {"i32", "int32"};
    case DType::i64: return {"i64", "int64"};
    case DType::bool_: return {"bool", "bool"};
    case DType::i8: return {"i8", "int8"};
    case DType::i16: return {"i16", "int16"};
    case DType::u8: return {"u8", "uint8"};
    case DType::u16: return {"u16", "uint16"};
    case DType::u32: return {"u32", "uint32"};
    case DType::u64: return {"u64", "uint64"};
    case DType::f16: return {"f16", "float16"};
    case DType::bf16: return {"bf16", "bfloat16"};
    case DType::c64: return {"c64", "complex64"};
    case DType::c128: return {"c128", "complex128"};
  }
  return {"?", "?"};
}

}  // namespace

std::string_view short_name(DType d) { return names(d).short_name; }

std::string_view long_name(DType d) { return names(d).long_name; }

std::optional<DType> parse_dtype(std::string_view name) {
  // JAX's float0, the tangent type of integer and bool values, holds no data: refjit reads
  // it as bool, whose zero (False) stands for that tangent.
  if (name == "float0") return DType::bool_;
  for (DType d : kAllDTypes) {
    if (name == short_name(d) || name == long_name(d)) return d;
  }
  return std::nullopt;
}

}  // namespace refjit
