// Internal: checks shared by the type rules (ir/type_rules_*.cpp). Every check throws a
// TypeError (or a RefError for ref misuse) whose message starts with the primitive's name.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "refjit/ir/error.h"
#include "refjit/ir/params.h"
#include "refjit/ir/primitive.h"
#include "refjit/ir/type.h"

namespace refjit::type_rules {

// Which dtypes an operand accepts.
// number: the real numbers (floats and integers); arith: those and the complex dtypes;
// floating: the real floats; inexact: those and the complex dtypes; ordered: all but complex.
enum class DTypeClass { any, ordered, number, arith, floating, inexact, integer, bool_or_int };

bool dtype_in(DType d, DTypeClass cls);
// "a float dtype (f32 or f64)" and the like, for messages.
std::string_view describe(DTypeClass cls);

// Names the primitive in every message: "add: ...".
class Checker {
 public:
  Checker(Prim prim, std::span<const Type> in, const Params& params)
      : prim_(prim), name_(prim_name(prim)), in_(in), params_(params) {}

  Prim prim() const { return prim_; }
  std::string_view name() const { return name_; }
  std::span<const Type> in() const { return in_; }
  const Params& params() const { return params_; }

  template <class... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) const {
    throw TypeError(fmt::format("{}: {}", name_, fmt::format(f, std::forward<Args>(args)...)));
  }
  template <class... Args>
  [[noreturn]] void fail_ref(std::string code, fmt::format_string<Args...> f,
                             Args&&... args) const {
    throw RefError(std::move(code),
                   fmt::format("{}: {}", name_, fmt::format(f, std::forward<Args>(args)...)));
  }

  // Operand counts.
  void expect_count(size_t n) const;
  void expect_at_least(size_t n) const;

  // Operand i is an array (not a ref); returns it.
  const ArrayType& array(size_t i) const;
  // Operand i is an array whose dtype is in `cls`.
  const ArrayType& array_of(size_t i, DTypeClass cls) const;
  // Operand i is a scalar array of an integer dtype (a dynamic start or index).
  void int_scalar(size_t i, std::string_view role) const;
  // Operand i is a ref (RefError E12 otherwise); returns the array it holds.
  const ArrayType& ref(size_t i) const;

  // Required params: a missing or ill-typed param is a TypeError naming the param.
  template <class T>
  const T& param(std::string_view key) const {
    const ParamValue* v = params_.find(key);
    if (!v) fail("missing param '{}'", key);
    const T* t = std::get_if<T>(v);
    if (!t) fail("param '{}' has the wrong kind of value", key);
    return *t;
  }
  int64_t int_param(std::string_view key) const { return param<int64_t>(key); }
  const IntList& ints_param(std::string_view key) const { return param<IntList>(key); }
  DType dtype_param(std::string_view key) const { return param<DType>(key); }
  // Optional params: absent or None gives nullptr; another kind of value is an error.
  template <class T>
  const T* optional_param(std::string_view key) const {
    const ParamValue* v = params_.find(key);
    if (!v || std::holds_alternative<NoneParam>(*v)) return nullptr;
    const T* t = std::get_if<T>(v);
    if (!t) fail("param '{}' has the wrong kind of value", key);
    return t;
  }
  // A sub-jaxpr param, non-null.
  const Jaxpr& jaxpr_param(std::string_view key) const;

  // `axis` is a valid dimension of a rank-`rank` value; `what` names the param.
  void check_axis(int64_t axis, int rank, std::string_view what) const;
  // Distinct valid axes.
  void check_axes(const IntList& axes, int rank, std::string_view what) const;

 private:
  Prim prim_;
  std::string_view name_;
  std::span<const Type> in_;
  const Params& params_;
};

// "(1, 2)" as JAX prints int tuples, for messages.
std::string ints_text(const IntList& v);

// Every shape-transforming rule returns a single array.
inline std::vector<Type> one(ArrayType t) { return {Type(std::move(t))}; }

}  // namespace refjit::type_rules
