// Type rules of the ref primitives (docs/primitives.md "Refs").
#include "ir/type_rule_support.h"
#include "ir/type_rules.h"
#include "ir/window_params.h"
#include "refjit/ir/indexing.h"

namespace refjit {

namespace {

using type_rules::Checker;
using type_rules::ints_text;

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

// r, the value written over w1 (a scalar of r's dtype), then w1's and w2's starts; both windows
// contiguous runs of r, the added run inside w1's; one result per side run.
std::vector<Type> shift_add_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::shift_add, in, params);
  c.expect_at_least(2);
  const ArrayType& r = c.ref(0);
  if (r.dtype == DType::bool_) c.fail("the ref holds {}; only numbers are added", r.str());
  const ArrayType& zero = c.array(1);
  if (zero.rank() != 0 || zero.dtype != r.dtype)
    c.fail("operand 1 (the value written) has type {}; it must be a {} scalar", zero.str(),
           short_name(r.dtype));
  const size_t rank = static_cast<size_t>(r.rank());
  if (in.size() != ShiftAddParams::operand_count(rank))
    c.fail(
        "the ref has rank {}, so {} operands are needed (the ref, the value written, then {} "
        "start indices for each window); got {}",
        rank, ShiftAddParams::operand_count(rank), rank, in.size());
  for (size_t i = 2; i < in.size(); ++i) c.int_scalar(i, "a start index");
  auto run_length = [&](std::string_view name) {
    const IntList& sizes = c.ints_param(name);
    if (sizes.size() != rank)
      c.fail("{} {} has {} entries for a ref of rank {}", name, ints_text(sizes), sizes.size(),
             rank);
    int64_t n = 1;
    for (size_t d = 0; d < rank; ++d) {
      if (sizes[d] < 0 || sizes[d] > r.shape[d])
        c.fail("{} entry {} is {} but must be in [0, {}] (dim {} of {})", name, d, sizes[d],
               r.shape[d], d, Type::ref(r).str());
      n *= sizes[d];
    }
    if (!contiguous_run(sizes, r.shape))
      c.fail(
          "{} {} is not one contiguous run of {} (sizes 1, then one partial dim, then whole "
          "dims)",
          name, ints_text(sizes), Type::ref(r).str());
    return n;
  };
  const int64_t written = run_length("write_sizes");
  const int64_t added = run_length("add_sizes");
  const int64_t offset = c.int_param("offset");
  if (offset < 0 || offset + added > written)
    c.fail("the added run [{}, {}) is not inside the written run of {} elements", offset,
           offset + added, written);
  const IntList& offsets = c.ints_param("side_offsets");
  const IntList& lengths = c.ints_param("side_lengths");
  if (offsets.size() != lengths.size())
    c.fail("side_offsets {} and side_lengths {} differ in length", ints_text(offsets),
           ints_text(lengths));
  std::vector<Type> out;
  for (size_t k = 0; k < offsets.size(); ++k) {
    if (offsets[k] < 0 || lengths[k] < 0 || offsets[k] + lengths[k] > written)
      c.fail("side run {} [{}, {}) is not inside the written run of {} elements", k, offsets[k],
             offsets[k] + lengths[k], written);
    out.emplace_back(ArrayType{r.dtype, {lengths[k]}});
  }
  return out;
}

// get_flat_run r start: `length` elements of the ref; swap_flat_run r start v: the same, v of
// their type written over them. The ref has rank 1 or more, the bound is 0 or more.
template <Prim P>
std::vector<Type> flat_run_rule(std::span<const Type> in, const Params& params) {
  Checker c(P, in, params);
  c.expect_count(P == Prim::get_flat_run ? 2 : 3);
  const ArrayType& r = c.ref(0);
  if (r.rank() == 0) c.fail("the ref holds {}; a run needs rank 1 or more", r.str());
  c.int_scalar(1, "the run's first index");
  const int64_t length = c.int_param("length");
  if (length < 0) c.fail("length {} is negative", length);
  const int64_t bound = c.int_param("bound");
  if (bound < 0) c.fail("bound {} is negative", bound);
  if (r.num_elements() == 0 && length > 0)
    c.fail("the ref holds {}; there is no element to read", r.str());
  const ArrayType run{r.dtype, {length}};
  if (P == Prim::swap_flat_run && c.array(2) != run)
    c.fail("operand 2 (the values written) has type {} but the run is {}", c.array(2).str(),
           run.str());
  return {Type(run)};
}

}  // namespace

void register_ref_type_rules(TypeRuleTable& t) {
  auto set = [&t](Prim p, TypeRule r) { t[static_cast<int>(p)] = r; };
  set(Prim::new_ref, new_ref_rule);
  set(Prim::get, get_rule);
  set(Prim::swap, swap_rule);
  set(Prim::addupdate, addupdate_rule);
  set(Prim::freeze, freeze_rule);
  set(Prim::shift_add, shift_add_rule);
  set(Prim::get_flat_run, flat_run_rule<Prim::get_flat_run>);
  set(Prim::swap_flat_run, flat_run_rule<Prim::swap_flat_run>);
}

}  // namespace refjit
