// Eval rules of the ref primitives. A RefBuffer's storage is never shared with an Array
// (get and freeze return copies), so writes through it never reallocate and the buffer keeps
// its address for the whole run.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "ir/window_params.h"
#include "refjit/ir/error.h"
#include "runtime/eval_rules.h"
#include "runtime/flat_index.h"
#include "runtime/ref_indexing.h"

namespace refjit {

namespace {

// The region of the ref (operand 0) addressed by e's indexer, with dynamic operands from
// position `first_dynamic`.
IndexedRegion region_of(const Eqn& e, std::span<const RtValue> ins, const RefBuffer& ref,
                        size_t first_dynamic) {
  std::vector<Array> dynamic;
  for (size_t i = first_dynamic; i < ins.size(); ++i) dynamic.push_back(array_in(e, ins, i));
  const Indexer& indexer = e.params.get_or<Indexer>("indexer", Indexer{});
  return resolve_indexer(ref.type().shape, indexer, dynamic,
                         fmt::format("{} on {}", prim_name(e.prim), Type::ref(ref.type()).str()));
}

// swap/addupdate: the value written must have the ref's dtype and the indexed shape.
void check_value(const Eqn& e, const RefBuffer& ref, const IndexedRegion& region,
                 const Array& value) {
  ArrayType want{ref.type().dtype, region.shape};
  if (value.type() == want) return;
  throw RefError("E12", fmt::format("{}: the value written has type {} but the indexed part of "
                                    "{} has type {}; convert or reshape the value first",
                                    prim_name(e.prim), value.type().str(),
                                    Type::ref(ref.type()).str(), want.str()));
}

std::vector<RtValue> eval_new_ref(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  return {
      std::make_shared<RefBuffer>(array_in(e, ins, 0), ref_kind_param(e.params))};  // holds a clone
}

std::vector<RtValue> eval_get(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1, true);
  const RefBufferPtr& ref = ref_in(e, ins, 0);
  IndexedRegion region = region_of(e, ins, *ref, 1);
  return {take_elements(ref->value(), region.shape, region.offsets)};
}

std::vector<RtValue> eval_swap(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 2, true);
  const RefBufferPtr& ref = ref_in(e, ins, 0);
  const Array& value = array_in(e, ins, 1);
  IndexedRegion region = region_of(e, ins, *ref, 2);
  check_value(e, *ref, region, value);
  Array old = take_elements(ref->value(), region.shape, region.offsets);
  put_elements(ref->value(), region.offsets, value);
  return {old};
}

std::vector<RtValue> eval_addupdate(const EvalContext&, const Eqn& e,
                                    std::span<const RtValue> ins) {
  expect_operands(e, ins, 2, true);
  const RefBufferPtr& ref = ref_in(e, ins, 0);
  const Array& value = array_in(e, ins, 1);
  IndexedRegion region = region_of(e, ins, *ref, 2);
  check_value(e, *ref, region, value);
  if (is_bool(value.dtype()))
    throw RefError("E12", fmt::format("addupdate: cannot accumulate into {}; addupdate needs a "
                                      "number dtype",
                                      Type::ref(ref->type()).str()));
  add_elements(ref->value(), region.offsets, value);  // duplicates in index arrays accumulate
  return {};
}

// Any live ref may be frozen here, including an argument ref: eager `freeze` runs as a
// one-eqn jaxpr over its argument. Scope rules are the verifier's and the tracer's job.
std::vector<RtValue> eval_freeze(const EvalContext&, const Eqn& e, std::span<const RtValue> ins) {
  expect_operands(e, ins, 1);
  const RefBufferPtr& ref = ref_in(e, ins, 0);
  Array value = ref->value().clone();
  ref->mark_frozen();
  return {value};
}

// The flat offsets, in row-major order, of the window of `sizes` whose starts are operands
// first, first + 1, ... (clamped as dynamic_slice clamps them) in an array of `shape`.
std::vector<int64_t> window_at(const Eqn& e, std::span<const RtValue> ins, size_t first,
                               const Shape& shape, const IntList& sizes) {
  return window_offsets(
      shape, clamped_starts(e, ins.first(first + shape.size()), first, shape, sizes), sizes);
}

// Read w1's run v, return the side runs of it, write `zero` over w1, add v's run at `offset` to
// w2: what the swap, slices and addupdate it was made of do, in their order.
std::vector<RtValue> eval_shift_add(const EvalContext&, const Eqn& e,
                                    std::span<const RtValue> ins) {
  const ShiftAddParams p = ShiftAddParams::of(e);
  const RefBufferPtr& ref = ref_in(e, ins, 0);
  Array& r = ref->value();
  const Shape& shape = ref->type().shape;
  if (shape.size() != p.rank)
    eval_fail(e, fmt::format("windows of rank {} on {}", p.rank, Type::ref(ref->type()).str()));
  const std::vector<int64_t> w1 = window_at(e, ins, 2, shape, *p.write_sizes);
  const std::vector<int64_t> w2 = window_at(e, ins, 2 + p.rank, shape, *p.add_sizes);
  const Array v = take_elements(r, {static_cast<int64_t>(w1.size())}, w1);
  std::vector<RtValue> sides;
  for (size_t k = 0; k < p.side_offsets->size(); ++k) {
    std::vector<int64_t> run((*p.side_lengths)[k]);
    for (size_t i = 0; i < run.size(); ++i) run[i] = (*p.side_offsets)[k] + static_cast<int64_t>(i);
    sides.emplace_back(take_elements(v, {static_cast<int64_t>(run.size())}, run));
  }
  const Array& zero = array_in(e, ins, 1);
  const std::vector<int64_t> all_zero(w1.size(), 0);
  put_elements(r, w1, take_elements(zero, {static_cast<int64_t>(w1.size())}, all_zero));
  std::vector<int64_t> added(w2.size());
  for (size_t i = 0; i < added.size(); ++i) added[i] = p.offset + static_cast<int64_t>(i);
  add_elements(r, w2, take_elements(v, {static_cast<int64_t>(w2.size())}, added));
  return sides;
}

// The flat positions in the ref that get_flat_run / swap_flat_run address (primitives.def):
// f = clamp(start + k, 0, bound); past the ref's end, the split of f with its first index
// clamped into the ref, which keeps f's place within the last row-major block of dim 0.
std::vector<int64_t> flat_run_positions(const Eqn& e, std::span<const RtValue> ins,
                                        const ArrayType& ref) {
  const Shape& shape = ref.shape;
  const int64_t bound = e.params.get<int64_t>("bound");
  const int64_t length = e.params.get<int64_t>("length");
  const int64_t total = num_elements(shape);
  if (shape.empty() || bound < 0 || (total == 0 && length > 0))
    eval_fail(e, fmt::format("cannot address a run of {} in {} with bound {}", length,
                             Type::ref(ref).str(), bound));
  const int64_t block = total / shape[0];  // the elements under one index of dim 0
  const Array idx = run_indices(e, array_in(e, ins, 1), length);
  std::vector<int64_t> at;
  for (int64_t k = 0; k < length; ++k) {
    const int64_t f = std::min(std::max<int64_t>(idx.as_int(k), 0), bound);
    at.push_back(f < total ? f : (shape[0] - 1) * block + f % block);
  }
  return at;
}

std::vector<RtValue> eval_get_flat_run(const EvalContext&, const Eqn& e,
                                       std::span<const RtValue> ins) {
  expect_operands(e, ins, 2);
  const RefBufferPtr& ref = ref_in(e, ins, 0);
  const std::vector<int64_t> at = flat_run_positions(e, ins, ref->type());
  return {take_elements(ref->value(), {static_cast<int64_t>(at.size())}, at)};
}

// Every old value is read first, then v is written in order (a later duplicate wins).
std::vector<RtValue> eval_swap_flat_run(const EvalContext&, const Eqn& e,
                                        std::span<const RtValue> ins) {
  expect_operands(e, ins, 3);
  const RefBufferPtr& ref = ref_in(e, ins, 0);
  const std::vector<int64_t> at = flat_run_positions(e, ins, ref->type());
  const Array& v = array_in(e, ins, 2);
  const ArrayType run{ref->type().dtype, {static_cast<int64_t>(at.size())}};
  if (v.type() != run)
    eval_fail(e,
              fmt::format("the values written are {}, the run is {}", v.type().str(), run.str()));
  Array old = take_elements(ref->value(), run.shape, at);
  put_elements(ref->value(), at, v);
  return {old};
}

}  // namespace

void register_ref_eval_rules(EvalRuleTable& t) {
  t.set(Prim::new_ref, &eval_new_ref);
  t.set(Prim::get, &eval_get);
  t.set(Prim::swap, &eval_swap);
  t.set(Prim::addupdate, &eval_addupdate);
  t.set(Prim::freeze, &eval_freeze);
  t.set(Prim::shift_add, &eval_shift_add);
  t.set(Prim::get_flat_run, &eval_get_flat_run);
  t.set(Prim::swap_flat_run, &eval_swap_flat_run);
}

}  // namespace refjit
