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

// psum, psum_invariant, pvary, broadcast_from, psum_start, psum_wait: one array in, the same
// type out.
std::vector<Type> same_type_rule(std::span<const Type> in, const Params& params, Prim p) {
  Checker c(p, in, params);
  c.expect_count(1);
  check_axis_name(c);
  if ((p == Prim::psum || p == Prim::psum_invariant || p == Prim::psum_start) &&
      c.array(0).dtype == DType::bool_)
    c.fail("operand 0 has type {}; {} adds numbers (convert a bool first)", c.array(0).str(),
           prim_name(p));
  if (p == Prim::broadcast_from && c.param<int64_t>("root") < 0)
    c.fail("root {} is negative", c.param<int64_t>("root"));
  return {Type(c.array(0))};
}

// all_gather, all_gather_invariant: x:T[s] -> T[axis_size, s...], the members' values stacked
// in rank order.
std::vector<Type> all_gather_rule(std::span<const Type> in, const Params& params, Prim p) {
  Checker c(p, in, params);
  c.expect_count(1);
  check_axis_name(c);
  const int64_t n = c.param<int64_t>("axis_size");
  if (n < 1) c.fail("axis_size {} must be at least 1", n);
  ArrayType out = c.array(0);
  out.shape.insert(out.shape.begin(), n);
  return {Type(out)};
}

// axis_index: () -> i32[], this process's position along the axis. With axis_size, the
// program also requires the axis to span that many processes (a shard_map's mesh).
std::vector<Type> axis_index_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::axis_index, in, params);
  c.expect_count(0);
  check_axis_name(c);
  if (params.find("axis_size") && c.param<int64_t>("axis_size") < 1)
    c.fail("axis_size {} must be at least 1", c.param<int64_t>("axis_size"));
  return {Type(ArrayType{DType::i32, {}})};
}

template <Prim P>
std::vector<Type> same_type(std::span<const Type> in, const Params& params) {
  return same_type_rule(in, params, P);
}

template <Prim P>
std::vector<Type> gathered(std::span<const Type> in, const Params& params) {
  return all_gather_rule(in, params, P);
}

}  // namespace

void register_collective_type_rules(TypeRuleTable& table) {
  table[static_cast<size_t>(Prim::psum)] = same_type<Prim::psum>;
  table[static_cast<size_t>(Prim::psum_invariant)] = same_type<Prim::psum_invariant>;
  table[static_cast<size_t>(Prim::pvary)] = same_type<Prim::pvary>;
  table[static_cast<size_t>(Prim::psum_start)] = same_type<Prim::psum_start>;
  table[static_cast<size_t>(Prim::psum_wait)] = same_type<Prim::psum_wait>;
  table[static_cast<size_t>(Prim::broadcast_from)] = same_type<Prim::broadcast_from>;
  table[static_cast<size_t>(Prim::all_gather)] = gathered<Prim::all_gather>;
  table[static_cast<size_t>(Prim::all_gather_invariant)] = gathered<Prim::all_gather_invariant>;
  table[static_cast<size_t>(Prim::axis_index)] = axis_index_rule;
}

}  // namespace refjit
