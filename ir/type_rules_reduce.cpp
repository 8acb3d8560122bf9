// Type rules of the reductions and contractions (docs/primitives.md "Reductions and
// contractions").
#include <algorithm>

#include "ir/type_rule_support.h"
#include "ir/type_rules.h"
#include "refjit/ir/im2col.h"

namespace refjit {

namespace {

using type_rules::Checker;
using type_rules::DTypeClass;
using type_rules::ints_text;
using type_rules::one;

bool contains(const IntList& l, int64_t v) { return std::find(l.begin(), l.end(), v) != l.end(); }

Shape without_axes(const Shape& s, const IntList& axes) {
  Shape out;
  for (size_t d = 0; d < s.size(); ++d)
    if (!contains(axes, static_cast<int64_t>(d))) out.push_back(s[d]);
  return out;
}

template <Prim P>
std::vector<Type> reduce_rule(std::span<const Type> in, const Params& params) {
  Checker c(P, in, params);
  c.expect_count(1);
  // Sums of complex numbers; maxima and minima of ordered ones.
  const ArrayType& x =
      c.array_of(0, P == Prim::reduce_sum ? DTypeClass::arith : DTypeClass::number);
  const IntList& axes = c.ints_param("axes");
  c.check_axes(axes, x.rank(), "axes entry");
  return one(ArrayType{x.dtype, without_axes(x.shape, axes)});
}

std::vector<Type> argmax_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::argmax, in, params);
  c.expect_count(1);
  const ArrayType& x = c.array_of(0, DTypeClass::number);
  const IntList& axes = c.ints_param("axes");
  if (axes.size() != 1) c.fail("axes {} must name exactly one axis", ints_text(axes));
  c.check_axes(axes, x.rank(), "axes entry");
  if (x.shape[axes[0]] == 0)
    c.fail("operand 0 ({}) has size 0 along axis {}; an empty axis has no maximum", x.str(),
           axes[0]);
  DType index_dtype = c.dtype_param("index_dtype");
  if (!is_int(index_dtype))
    c.fail("index_dtype {} is not an integer dtype (use int32 or int64)", long_name(index_dtype));
  return one(ArrayType{index_dtype, without_axes(x.shape, axes)});
}

// Checks one side's contracting and batch dims: valid, distinct, and not shared.
void check_dot_side(const Checker& c, const ArrayType& t, const IntList& contract,
                    const IntList& batch, std::string_view side) {
  c.check_axes(contract, t.rank(), fmt::format("{} contracting dim", side));
  c.check_axes(batch, t.rank(), fmt::format("{} batch dim", side));
  for (int64_t d : contract)
    if (contains(batch, d)) c.fail("{} dim {} is both a contracting and a batch dim", side, d);
}

std::vector<Type> dot_general_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::dot_general, in, params);
  c.expect_count(2);
  const ArrayType& lhs = c.array_of(0, DTypeClass::arith);
  const ArrayType& rhs = c.array_of(1, DTypeClass::arith);
  if (lhs.dtype != rhs.dtype)
    c.fail("operand 1 has type {} but operand 0 has type {}; both must have the same dtype",
           rhs.str(), lhs.str());
  const auto& dims = c.param<DotDims>("dimension_numbers");
  if (dims.lhs_contract.size() != dims.rhs_contract.size())
    c.fail("dimension_numbers contract {} lhs dims with {} rhs dims; the counts must be equal",
           dims.lhs_contract.size(), dims.rhs_contract.size());
  if (dims.lhs_batch.size() != dims.rhs_batch.size())
    c.fail(
        "dimension_numbers have {} lhs batch dims and {} rhs batch dims; the counts must be "
        "equal",
        dims.lhs_batch.size(), dims.rhs_batch.size());
  check_dot_side(c, lhs, dims.lhs_contract, dims.lhs_batch, "lhs");
  check_dot_side(c, rhs, dims.rhs_contract, dims.rhs_batch, "rhs");
  for (size_t k = 0; k < dims.lhs_contract.size(); ++k) {
    int64_t l = dims.lhs_contract[k], r = dims.rhs_contract[k];
    if (lhs.shape[l] != rhs.shape[r])
      c.fail(
          "contracting lhs dim {} (size {} in {}) with rhs dim {} (size {} in {}); the sizes "
          "must be equal",
          l, lhs.shape[l], lhs.str(), r, rhs.shape[r], rhs.str());
  }
  Shape out;
  for (size_t k = 0; k < dims.lhs_batch.size(); ++k) {
    int64_t l = dims.lhs_batch[k], r = dims.rhs_batch[k];
    if (lhs.shape[l] != rhs.shape[r])
      c.fail(
          "batch lhs dim {} (size {} in {}) and rhs dim {} (size {} in {}) must have equal "
          "sizes",
          l, lhs.shape[l], lhs.str(), r, rhs.shape[r], rhs.str());
    out.push_back(lhs.shape[l]);
  }
  for (int d = 0; d < lhs.rank(); ++d)
    if (!contains(dims.lhs_contract, d) && !contains(dims.lhs_batch, d))
      out.push_back(lhs.shape[d]);
  for (int d = 0; d < rhs.rank(); ++d)
    if (!contains(dims.rhs_contract, d) && !contains(dims.rhs_batch, d))
      out.push_back(rhs.shape[d]);
  DType result = lhs.dtype;
  if (const DType* preferred = c.optional_param<DType>("preferred_element_type")) {
    if (is_float(*preferred) != is_float(lhs.dtype) ||
        is_complex(*preferred) != is_complex(lhs.dtype) ||
        !type_rules::dtype_in(*preferred, DTypeClass::arith))
      c.fail("preferred_element_type {} is not of the same kind as the operands' {}",
             long_name(*preferred), long_name(lhs.dtype));
    result = *preferred;
  }
  return one(ArrayType{result, std::move(out)});
}

// r x y: r += dot_general(x, y); the product's type must be the whole ref's. No results.
std::vector<Type> dot_accumulate_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::dot_accumulate, in, params);
  c.expect_count(3);
  const ArrayType& r = c.ref(0);
  for (size_t k : {size_t{1}, size_t{2}})
    if (in[k].is_ref)
      c.fail_ref("E12", "operand {} has type {}; the product's operands are values", k,
                 in[k].str());
  std::vector<Type> product;
  try {
    product = dot_general_rule(in.subspan(1), params);
  } catch (const TypeError& e) {
    c.fail("the product of operands 1 and 2: {}", e.what());
  }
  if (product[0].array != r)
    c.fail_ref("E12", "the product has type {} but the ref holds {}; it is added to the whole ref",
               product[0].str(), Type::ref(r).str());
  return {};
}

// x [..., C] and k [windows * C, O] give [window rows..., O] (refjit/ir/im2col.h).
std::vector<Type> im2col_dot_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::im2col_dot, in, params);
  c.expect_count(2);
  const ArrayType& x = c.array_of(0, DTypeClass::floating);
  const ArrayType& k = c.array_of(1, DTypeClass::floating);
  if (k.dtype != x.dtype)
    c.fail("operand 1 has type {} but operand 0 has type {}; both must have the same dtype",
           k.str(), x.str());
  const Im2col g = Im2col::of(params);
  if (std::string problem = g.problem(x.shape); !problem.empty()) c.fail("{}", problem);
  if (k.rank() != 2 || k.shape[0] != g.windows() * g.channels())
    c.fail("operand 1 ({}) must be [{}, O]: {} windows of {} channels", k.str(),
           g.windows() * g.channels(), g.windows(), g.channels());
  Shape out = g.row_shape();
  out.push_back(k.shape[1]);
  return one(ArrayType{x.dtype, std::move(out)});
}

// x [..., C] and g [window rows..., O] give [windows * C, O] (refjit/ir/im2col.h).
std::vector<Type> im2col_tdot_rule(std::span<const Type> in, const Params& params) {
  Checker c(Prim::im2col_tdot, in, params);
  c.expect_count(2);
  const ArrayType& x = c.array_of(0, DTypeClass::floating);
  const ArrayType& g = c.array_of(1, DTypeClass::floating);
  if (g.dtype != x.dtype)
    c.fail("operand 1 has type {} but operand 0 has type {}; both must have the same dtype",
           g.str(), x.str());
  const Im2col w = Im2col::of(params);
  if (std::string problem = w.problem(x.shape); !problem.empty()) c.fail("{}", problem);
  const Shape rows = w.row_shape();
  if (g.rank() != w.rank() || !std::equal(rows.begin(), rows.end(), g.shape.begin()))
    c.fail("operand 1 ({}) must have the windows' rows ({}) and one more dim", g.str(),
           ints_text(IntList(rows.begin(), rows.end())));
  return one(ArrayType{x.dtype, {w.windows() * w.channels(), g.shape.back()}});
}

}  // namespace

void register_reduce_type_rules(TypeRuleTable& t) {
  auto set = [&t](Prim p, TypeRule r) { t[static_cast<int>(p)] = r; };
  set(Prim::reduce_sum, reduce_rule<Prim::reduce_sum>);
  set(Prim::reduce_max, reduce_rule<Prim::reduce_max>);
  set(Prim::reduce_min, reduce_rule<Prim::reduce_min>);
  set(Prim::argmax, argmax_rule);
  set(Prim::dot_general, dot_general_rule);
  set(Prim::im2col_dot, im2col_dot_rule);
  set(Prim::im2col_tdot, im2col_tdot_rule);
  set(Prim::dot_accumulate, dot_accumulate_rule);
}

}  // namespace refjit
