// Interpreter rules of the collectives (runtime/collectives.h): each runs on the group its
// axis is bound to.
#include <fmt/format.h>

#include <cstring>

#include "runtime/background_sums.h"
#include "runtime/collectives.h"
#include "runtime/eval_rules.h"

namespace refjit {

namespace {

const std::string& axis_of(const Eqn& e) { return e.params.get<std::string>("axis_name"); }

void check(const Eqn& e, const std::string& err) {
  if (!err.empty()) eval_fail(e, fmt::format("over '{}': {}", axis_of(e), err));
}

// The group of `e`'s axis, once every sum native code started in the background is done (the
// collectives run in program order).
std::shared_ptr<CollectiveGroup> group_in_order(const Eqn& e) {
  finish_background_sums();
  return group_of(axis_of(e));
}

std::vector<RtValue> eval_psum(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  Array out = array_in(e, ins, 0).clone();
  check(e, group_in_order(e)->sum_in_place(out.mutable_data(), out.size(), out.dtype()));
  return {out};
}

std::vector<RtValue> eval_all_gather(const EvalContext& cx, const Eqn& e,
                                     std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const Array& x = array_in(e, ins, 0);
  std::shared_ptr<CollectiveGroup> g = group_in_order(e);
  const int64_t n = e.params.get<int64_t>("axis_size");
  if (n != g->size())
    eval_fail(e, fmt::format("axis_size={} but axis '{}' is bound to {} ({} processes)", n,
                             axis_of(e), g->describe(), g->size()));
  Array out(cx.out_type(e, 0).array);
  check(e, g->all_gather(x.data(), out.mutable_data(), x.size(), x.dtype()));
  return {out};
}

std::vector<RtValue> eval_broadcast_from(const EvalContext&, const Eqn& e,
                                         std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  Array out = array_in(e, ins, 0).clone();
  check(e, group_in_order(e)->broadcast(out.mutable_data(), out.size(), out.dtype(),
                                        static_cast<int>(e.params.get<int64_t>("root"))));
  return {out};
}

std::vector<RtValue> eval_axis_index(const EvalContext&, const Eqn& e,
                                     std::span<const RtValue> ins) {
  expect_operands(e, ins, 0);
  std::shared_ptr<CollectiveGroup> g = group_of(axis_of(e));
  if (e.params.find("axis_size"))
    check(e, axis_size_mismatch(e.params.get<int64_t>("axis_size"), *g));
  return {Array::scalar<int32_t>(g->rank())};
}

// psum_wait: the sum psum_start computed (the interpreter sums at the start).
std::vector<RtValue> eval_psum_wait(const EvalContext&, const Eqn& e,
                                    std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  return {ins[0]};
}

// pvary: the value itself; only its transpose communicates.
std::vector<RtValue> eval_pvary(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  return {ins[0]};
}

}  // namespace

void register_collective_eval_rules(EvalRuleTable& t) {
  t.set(Prim::psum, &eval_psum);
  t.set(Prim::psum_invariant, &eval_psum);
  t.set(Prim::psum_start, &eval_psum);
  t.set(Prim::psum_wait, &eval_psum_wait);
  t.set(Prim::pvary, &eval_pvary);
  t.set(Prim::all_gather, &eval_all_gather);
  t.set(Prim::all_gather_invariant, &eval_all_gather);
  t.set(Prim::broadcast_from, &eval_broadcast_from);
  t.set(Prim::axis_index, &eval_axis_index);
}

}  // namespace refjit
