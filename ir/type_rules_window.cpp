// Type rules of the windowed reductions (docs/primitives.md "Windows"; geometry: ir/window.h).
#include <fmt/ranges.h>

#include "ir/type_rule_support.h"
#include "ir/type_rules.h"
#include "refjit/ir/window.h"

namespace refjit {

namespace {

using type_rules::Checker;
using type_rules::DTypeClass;
using type_rules::one;

template <Prim P>
std::vector<Type> reduce_window_rule(std::span<const Type> in, const Params& params) {
  Checker c(P, in, params);
  c.expect_count(1);
  const ArrayType& x =
      c.array_of(0, P == Prim::reduce_window_sum ? DTypeClass::arith : DTypeClass::number);
  return one(ArrayType{x.dtype, Window::of(params).out_shape(x.shape, prim_name(P))});
}

// select_prim is ge (each window's first maximum) or le (first minimum).
void check_select_prim(const Checker& c, const Params& params) {
  const std::string& s = params.get<std::string>("select_prim");
  if (s != "ge" && s != "le") c.fail("select_prim={} is not ge or le", s);
}

// select_and_gather_add t x: per window of x, t at x's selected element.
std::vector<Type> select_and_gather_add_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::select_and_gather_add, in, params);
  c.expect_count(2);
  const ArrayType& t = c.array_of(0, DTypeClass::floating);
  const ArrayType& x = c.array_of(1, DTypeClass::number);
  if (t.shape != x.shape)
    c.fail("operand 0 (the tangents) has type {} but operand 1 has shape {}; they must agree",
           t.str(), x.str());
  check_select_prim(c, params);
  return one(ArrayType{t.dtype, Window::of(params).out_shape(x.shape, "select_and_gather_add")});
}

// select_and_scatter_add s x: x's shape, each window's s added at x's selected element.
std::vector<Type> select_and_scatter_add_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::select_and_scatter_add, in, params);
  c.expect_count(2);
  const ArrayType& s = c.array_of(0, DTypeClass::floating);
  const ArrayType& x = c.array_of(1, DTypeClass::number);
  check_select_prim(c, params);
  const Shape windows = Window::of(params).out_shape(x.shape, "select_and_scatter_add");
  if (s.shape != windows)
    c.fail("operand 0 (the source) has type {} but operand 1 ({}) has windows of shape [{}]",
           s.str(), x.str(), fmt::join(windows, ","));
  return one(ArrayType{s.dtype, x.shape});
}

}  // namespace

void register_window_type_rules(TypeRuleTable& t) {
  auto set = [&t](Prim p, TypeRule r) { t[static_cast<int>(p)] = r; };
  set(Prim::reduce_window_sum, reduce_window_rule<Prim::reduce_window_sum>);
  set(Prim::reduce_window_max, reduce_window_rule<Prim::reduce_window_max>);
  set(Prim::reduce_window_min, reduce_window_rule<Prim::reduce_window_min>);
  set(Prim::select_and_gather_add, select_and_gather_add_rule);
  set(Prim::select_and_scatter_add, select_and_scatter_add_rule);
}

}  // namespace refjit
