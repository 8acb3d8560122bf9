// Type rules of the ref primitives (docs/primitives.md "Refs").
#include "ir/type_rule_support.h"
#include "ir/type_rules.h"
#include "refjit/ir/indexing.h"

namespace refjit {

namespace {

using type_rules::Checker;

std::vector<Type> new_ref_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::new_ref, in, params);
  c.expect_count(1);
  if (in[0].is_ref)
    c.fail_ref("E12",
               "operand 0 has type {}; a ref cannot hold another ref (read it with get "
               "first)",
               in[0].str());
  // JAX's memory_space and pin params are accepted and ignored; kind is the ref's kind.
  return {Type::ref(in[0].array, ref_kind_param(params))};
}

// The indexer param; absent means the whole ref.
Indexer indexer_of(const Checker& c) {
  if (const Indexer* idx = c.optional_param<Indexer>("indexer")) return *idx;
  return Indexer{};
}

// The shape `r[indexer]` selects, given the dynamic operands from `first_dynamic` on. Errors
// from the indexing helper are re-thrown with the primitive's name.
Shape indexed(const Checker& c, const ArrayType& ref, const Indexer& idx, size_t first_dynamic) {
  std::span<const Type> dyn =
      first_dynamic <= c.in().size() ? c.in().subspan(first_dynamic) : std::span<const Type>{};
  try {
    return indexed_shape(ref, idx, dyn);
  } catch (const RefError& e) {
    throw RefError(e.code(), fmt::format("{}: {}", c.name(), e.what()));
  } catch (const TypeError& e) {
    c.fail("{}", e.what());
  }
}

std::vector<Type> get_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::get, in, params);
  c.expect_at_least(1);
  const ArrayType& r = c.ref(0);
  return {Type(ArrayType{r.dtype, indexed(c, r, indexer_of(c), 1)})};
}

// swap and addupdate: r, x, dyn...; x must have the ref's dtype and the indexed shape.
ArrayType written_value(const Checker& c) {
  c.expect_at_least(2);
  const ArrayType& r = c.ref(0);
  if (c.in()[1].is_ref)
    c.fail_ref("E12",
               "operand 1 has type {}; a ref cannot be stored into another ref (read it "
               "with get first)",
               c.in()[1].str());
  const ArrayType& x = c.in()[1].array;
  Indexer idx = indexer_of(c);
  ArrayType expected{r.dtype, indexed(c, r, idx, 2)};
  if (x.dtype != r.dtype)
    c.fail_ref("E12",
               "operand 1 has type {} but the ref holds {}; the value's dtype must be the "
               "ref's (insert a convert_element_type)",
               x.str(), Type::ref(r).str());
  if (x.shape != expected.shape)
    c.fail_ref("E12",
               "operand 1 has type {} but the indexed ref {} selects {}; the value must "
               "have the indexed shape",
               x.str(), Type::ref(r).str(), expected.str());
  return expected;
}

std::vector<Type> swap_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::swap, in, params);
  return {Type(written_value(c))};
}

std::vector<Type> addupdate_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::addupdate, in, params);
  ArrayType x = written_value(c);
  if (!type_rules::dtype_in(x.dtype, type_rules::DTypeClass::arith))
    c.fail("operand 1 has type {} but accumulation needs {}", x.str(),
           type_rules::describe(type_rules::DTypeClass::arith));
  return {};
}

std::vector<Type> freeze_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::freeze, in, params);
  c.expect_count(1);
  return {Type(c.ref(0))};
}

}  // namespace

void register_ref_type_rules(TypeRuleTable& t) {
  auto set = [&t](Prim p, TypeRule r) { t[static_cast<int>(p)] = r; };
  set(Prim::new_ref, new_ref_rule);
  set(Prim::get, get_rule);
  set(Prim::swap, swap_rule);
  set(Prim::addupdate, addupdate_rule);
  set(Prim::freeze, freeze_rule);
}

}  // namespace refjit
