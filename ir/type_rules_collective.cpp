// Type rules of the collectives over a named axis (docs/primitives.md "Collectives").
#include "ir/type_rule_support.h"
#include "ir/type_rules.h"

namespace refjit {

namespace {

using type_rules::Checker;

// The axis_name param: a non-empty word.
void check_axis_name(const Checker& c) {
  if (c.param<std::string>("axis_name").empty()) c.fail("axis_name is empty");
}

// psum, broadcast_from: one array in, the same type out.
std::vector<Type> same_type_rule(std::span<const Type> in, const Params& params, Prim p) {
  Checker c(p, in, params);
  c.expect_count(1);
  check_axis_name(c);
  if (p == Prim::psum && c.array(0).dtype == DType::bool_)
    c.fail("operand 0 has type {}; psum adds numbers (convert a bool first)", c.array(0).str());
  if (p == Prim::broadcast_from && c.param<int64_t>("root") < 0)
    c.fail("root {} is negative", c.param<int64_t>("root"));
  return {Type(c.array(0))};
}

// all_gather: x:T[s] -> T[axis_size, s...], the members' values stacked in rank order.
std::vector<Type> all_gather_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::all_gather, in, params);
  c.expect_count(1);
  check_axis_name(c);
  const int64_t n = c.param<int64_t>("axis_size");
  if (n < 1) c.fail("axis_size {} must be at least 1", n);
  ArrayType out = c.array(0);
  out.shape.insert(out.shape.begin(), n);
  return {Type(out)};
}

// axis_index: () -> i32[], this process's position along the axis.
std::vector<Type> axis_index_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::axis_index, in, params);
  c.expect_count(0);
  check_axis_name(c);
  return {Type(ArrayType{DType::i32, {}})};
}

}  // namespace

void register_collective_type_rules(TypeRuleTable& table) {
  table[static_cast<size_t>(Prim::psum)] = [](std::span<const Type> in, const Params& p) {
    return same_type_rule(in, p, Prim::psum);
  };
  table[static_cast<size_t>(Prim::broadcast_from)] = [](std::span<const Type> in, const Params& p) {
    return same_type_rule(in, p, Prim::broadcast_from);
  };
  table[static_cast<size_t>(Prim::all_gather)] = all_gather_rule;
  table[static_cast<size_t>(Prim::axis_index)] = axis_index_rule;
}

}  // namespace refjit
