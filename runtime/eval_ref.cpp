// Eval rules of the ref primitives. A RefBuffer's storage is never shared with an Array
// (get and freeze return copies), so writes through it never reallocate and the buffer keeps
// its address for the whole run.
#include <fmt/format.h>

#include <memory>

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

}  // namespace

void register_ref_eval_rules(EvalRuleTable& t) {
  t.set(Prim::new_ref, &eval_new_ref);
  t.set(Prim::get, &eval_get);
  t.set(Prim::swap, &eval_swap);
  t.set(Prim::addupdate, &eval_addupdate);
  t.set(Prim::freeze, &eval_freeze);
}

}  // namespace refjit
