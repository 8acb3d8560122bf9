// Shorthands for the ir type-rule, indexing and verifier tests.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "refjit/ir/error.h"
#include "refjit/ir/primitive.h"
#include "refjit/ir/type.h"

namespace refjit::testing {

inline Type f32(Shape s) { return ArrayType{DType::f32, std::move(s)}; }
inline Type f64(Shape s) { return ArrayType{DType::f64, std::move(s)}; }
inline Type i32(Shape s) { return ArrayType{DType::i32, std::move(s)}; }
inline Type i64(Shape s) { return ArrayType{DType::i64, std::move(s)}; }
inline Type boolean(Shape s) { return ArrayType{DType::bool_, std::move(s)}; }
inline Type ref_f32(Shape s) { return Type::ref(ArrayType{DType::f32, std::move(s)}); }
inline Type ref_i32(Shape s) { return Type::ref(ArrayType{DType::i32, std::move(s)}); }

inline std::vector<Type> infer(Prim p, std::vector<Type> in, const Params& params = {}) {
  return infer_types(p, in, params);
}

// The message of the TypeError `f` throws, or "<no error>" / "<other error>".
inline std::string type_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const TypeError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<other error> ") + e.what();
  }
  return "<no error>";
}

// "CODE: message" of the RefError `f` throws, or "<no error>" / "<other error>".
inline std::string ref_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const RefError& e) {
    return e.code() + ": " + e.what();
  } catch (const std::exception& e) {
    return std::string("<other error> ") + e.what();
  }
  return "<no error>";
}

}  // namespace refjit::testing
