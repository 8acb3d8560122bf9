#include "ir/type_rule_support.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "refjit/ir/jaxpr.h"

namespace refjit::type_rules {

bool dtype_in(DType d, DTypeClass cls) {
  switch (cls) {
    case DTypeClass::any: return true;
    case DTypeClass::ordered: return !is_complex(d);
    case DTypeClass::number: return is_float(d) || is_int(d);
    case DTypeClass::arith: return is_inexact(d) || is_int(d);
    case DTypeClass::floating: return is_float(d);
    case DTypeClass::inexact: return is_inexact(d);
    case DTypeClass::integer: return is_int(d);
    case DTypeClass::bool_or_int: return is_bool(d) || is_int(d);
  }
  return false;
}

std::string_view describe(DTypeClass cls) {
  switch (cls) {
    case DTypeClass::any: return "any dtype";
    case DTypeClass::ordered: return "an ordered dtype (not complex)";
    case DTypeClass::number: return "a real numeric dtype (a float or integer dtype)";
    case DTypeClass::arith: return "a numeric dtype (a float, complex or integer dtype)";
    case DTypeClass::floating: return "a real float dtype (f16, bf16, f32 or f64)";
    case DTypeClass::inexact: return "a float or complex dtype";
    case DTypeClass::integer: return "an integer dtype";
    case DTypeClass::bool_or_int: return "a bool or integer dtype";
  }
  return "?";
}

std::string ints_text(const IntList& v) {
  if (v.size() == 1) return fmt::format("({},)", v[0]);
  return fmt::format("({})", fmt::join(v, ", "));
}

void Checker::expect_count(size_t n) const {
  if (in_.size() != n) fail("expected {} operand{}, got {}", n, n == 1 ? "" : "s", in_.size());
}

void Checker::expect_at_least(size_t n) const {
  if (in_.size() < n)
    fail("expected at least {} operand{}, got {}", n, n == 1 ? "" : "s", in_.size());
}

const ArrayType& Checker::array(size_t i) const {
  if (i >= in_.size()) fail("missing operand {} (got {} operands)", i, in_.size());
  const Type& t = in_[i];
  if (t.is_ref)
    fail("operand {} has type {} but an array is needed; read the ref first (get, `r[...]`)", i,
         t.str());
  return t.array;
}

const ArrayType& Checker::array_of(size_t i, DTypeClass cls) const {
  const ArrayType& a = array(i);
  if (!dtype_in(a.dtype, cls))
    fail("operand {} has type {} but {} is needed", i, a.str(), describe(cls));
  return a;
}

void Checker::int_scalar(size_t i, std::string_view role) const {
  const ArrayType& a = array(i);
  if (!is_int(a.dtype) || !a.is_scalar())
    fail("operand {} ({}) has type {} but an integer scalar (i32[] or i64[]) is needed", i, role,
         a.str());
}

const ArrayType& Checker::ref(size_t i) const {
  if (i >= in_.size()) fail("missing operand {} (got {} operands)", i, in_.size());
  const Type& t = in_[i];
  if (!t.is_ref)
    fail_ref("E12", "operand {} has type {} but a ref is needed (create one with new_ref)", i,
             t.str());
  return t.array;
}

const Jaxpr& Checker::jaxpr_param(std::string_view key) const {
  const JaxprPtr& j = param<JaxprPtr>(key);
  if (!j) fail("param '{}' holds no jaxpr", key);
  return *j;
}

void Checker::check_axis(int64_t axis, int rank, std::string_view what) const {
  if (axis < 0 || axis >= rank)
    fail("{} {} is out of range for an operand of rank {} (valid: 0..{})", what, axis, rank,
         rank - 1);
}

void Checker::check_axes(const IntList& axes, int rank, std::string_view what) const {
  for (size_t k = 0; k < axes.size(); ++k) {
    check_axis(axes[k], rank, what);
    if (std::find(axes.begin(), axes.begin() + k, axes[k]) != axes.begin() + k)
      fail("{} {} has axis {} twice", what, ints_text(axes), axes[k]);
  }
}

}  // namespace refjit::type_rules
