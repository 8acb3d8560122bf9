// Lowering of reductions (reduce_sum/max/min, argmax) and dot_general.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "compiler/backend/lowering.h"

namespace refjit::backend {
namespace {

using mlir::Value;
namespace arith = mlir::arith;
using Ivs = LowerCtx::Ivs;

bool contains(const IntList& l, int64_t v) { return std::find(l.begin(), l.end(), v) != l.end(); }

enum class Reducer { sum, max, min };

Value identity(LowerCtx& c, DType d, Reducer r) {
  double inf = std::numeric_limits<double>::infinity();
  // The dtype's extreme values (int_constant keeps the low bits: all ones is -1 or UINT_MAX).
  const int bits = bit_width(d);
  const int64_t all_ones = -1;
  const int64_t smin =
      bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (bits - 1));
  const int64_t smax =
      bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1;
  switch (r) {
    case Reducer::sum: return c.constant(d, 0);
    case Reducer::max:
      if (is_float(d)) return c.constant(d, -inf);
      return c.int_constant(d, is_unsigned(d) ? 0 : smin);
    case Reducer::min:
      if (is_float(d)) return c.constant(d, inf);
      return c.int_constant(d, is_unsigned(d) ? all_ones : smax);
  }
  return {};
}

Value combine(LowerCtx& c, DType d, Reducer r, Value a, Value b) {
  bool f = is_float(d);
  switch (r) {
    case Reducer::sum:
      return f ? Value(c.b.create<arith::AddFOp>(c.loc, a, b))
               : Value(c.b.create<arith::AddIOp>(c.loc, a, b));
    case Reducer::max:  // NaN propagates
      if (f) return c.b.create<arith::MaximumFOp>(c.loc, a, b);
      if (is_unsigned(d)) return c.b.create<arith::MaxUIOp>(c.loc, a, b);
      return c.b.create<arith::MaxSIOp>(c.loc, a, b);
    case Reducer::min:
      if (f) return c.b.create<arith::MinimumFOp>(c.loc, a, b);
      if (is_unsigned(d)) return c.b.create<arith::MinUIOp>(c.loc, a, b);
      return c.b.create<arith::MinSIOp>(c.loc, a, b);
  }
  return {};
}

// Result initialised to the identity, then one pass over the operand in row-major order
// accumulating into the result element the operand element maps to.
void lower_reduce(LowerCtx& c, const Eqn& e, Reducer r) {
  if (e.ins.size() != 1 || e.outs.size() != 1) fail_eqn(e, "expected one operand");
  ArrayType xt = c.type_of(e.ins[0]).array;
  ArrayType rt = c.type_of(e.outs[0]).array;
  const IntList& axes = e.params.get<IntList>("axes");
  Value dst = c.result_buffer(e.outs[0]);
  c.fill(dst, rt, identity(c, rt.dtype, r));
  c.loop_nest(xt.shape, [&](Ivs ivs) {
    std::vector<Value> out;
    for (size_t i = 0; i < ivs.size(); ++i)
      if (!contains(axes, static_cast<int64_t>(i))) out.push_back(ivs[i]);
    Value acc = c.load_mem(dst, rt.dtype, out);
    c.store(combine(c, rt.dtype, r, acc, c.load(e.ins[0], ivs)), dst, rt.dtype, out);
  });
}

// argmax: the first maximal index along the axis; NaN counts as maximal.
void lower_argmax(LowerCtx& c, const Eqn& e) {
  if (e.ins.size() != 1 || e.outs.size() != 1) fail_eqn(e, "expected one operand");
  ArrayType xt = c.type_of(e.ins[0]).array;
  ArrayType rt = c.type_of(e.outs[0]).array;
  const IntList& axes = e.params.get<IntList>("axes");
  if (axes.size() != 1) fail_eqn(e, "argmax needs exactly one axis");
  size_t axis = static_cast<size_t>(axes[0]);
  int64_t n = xt.shape.at(axis);
  Value dst = c.result_buffer(e.outs[0]);
  c.loop_nest(rt.shape, [&](Ivs ivs) {
    if (n == 0) {
      c.store(c.int_constant(rt.dtype, 0), dst, rt.dtype, ivs);
      return;
    }
    auto at = [&](Value k) {
      std::vector<Value> in(ivs.begin(), ivs.begin() + axis);
      in.push_back(k);
      in.insert(in.end(), ivs.begin() + axis, ivs.end());
      return c.load(e.ins[0], in);
    };
    std::vector<Value> init{at(c.index(0)), c.index(0)};
    auto best = c.loop_with_carry(n - 1, init, [&](Value iv, const std::vector<Value>& cur) {
      Value k = c.b.create<arith::AddIOp>(c.loc, iv, c.index(1));
      Value x = at(k);
      Value take;
      if (is_float(xt.dtype)) {
        Value gt = c.b.create<arith::CmpFOp>(c.loc, arith::CmpFPredicate::OGT, x, cur[0]);
        Value xnan = c.b.create<arith::CmpFOp>(c.loc, arith::CmpFPredicate::UNO, x, x);
        Value bnum = c.b.create<arith::CmpFOp>(c.loc, arith::CmpFPredicate::ORD, cur[0], cur[0]);
        take = c.b.create<arith::OrIOp>(c.loc, gt, c.b.create<arith::AndIOp>(c.loc, xnan, bnum));
      } else {
        auto pred = xt.dtype == DType::bool_ || is_unsigned(xt.dtype) ? arith::CmpIPredicate::ugt
                                                                      : arith::CmpIPredicate::sgt;
        take = c.b.create<arith::CmpIOp>(c.loc, pred, x, cur[0]);
      }
      return std::vector<Value>{c.b.create<arith::SelectOp>(c.loc, take, x, cur[0]),
                                c.b.create<arith::SelectOp>(c.loc, take, k, cur[1])};
    });
    Value idx = c.b.create<arith::IndexCastOp>(c.loc, c.elem_type(rt.dtype), best[1]);
    c.store(idx, dst, rt.dtype, ivs);
  });
}

// dot_general: result dims are (batch, lhs free, rhs free); each result element is a sum
// over the contracting dims, carried in registers through nested loops.
void lower_dot_general(LowerCtx& c, const Eqn& e) {
  if (e.ins.size() != 2 || e.outs.size() != 1) fail_eqn(e, "expected two operands");
  ArrayType lt = c.type_of(e.ins[0]).array;
  ArrayType ht = c.type_of(e.ins[1]).array;
  ArrayType rt = c.type_of(e.outs[0]).array;
  const DotDims& dn = e.params.get<DotDims>("dimension_numbers");
  if (dn.lhs_contract.size() != dn.rhs_contract.size() ||
      dn.lhs_batch.size() != dn.rhs_batch.size())
    fail_eqn(e, "dimension_numbers pair up different numbers of dims");
  std::vector<int64_t> lfree, rfree;
  for (int64_t i = 0; i < lt.rank(); ++i)
    if (!contains(dn.lhs_contract, i) && !contains(dn.lhs_batch, i)) lfree.push_back(i);
  for (int64_t i = 0; i < ht.rank(); ++i)
    if (!contains(dn.rhs_contract, i) && !contains(dn.rhs_batch, i)) rfree.push_back(i);
  DType d = rt.dtype;
  Value dst = c.result_buffer(e.outs[0]);
  auto mul_add = [&](Value acc, const std::vector<Value>& li, const std::vector<Value>& hi) {
    Value a = convert_element(c, c.load(e.ins[0], li), lt.dtype, d);
    Value b = convert_element(c, c.load(e.ins[1], hi), ht.dtype, d);
    if (is_float(d))
      return Value(c.b.create<arith::AddFOp>(c.loc, acc, c.b.create<arith::MulFOp>(c.loc, a, b)));
    return Value(c.b.create<arith::AddIOp>(c.loc, acc, c.b.create<arith::MulIOp>(c.loc, a, b)));
  };
  if (!rfree.empty()) {
    // Loop order (batch, lhs free, contracting, rhs free): the innermost loop runs along
    // contiguous rows of rhs and of the result, so it vectorises. Each result element still
    // sums its products in contracting-index order.
    c.fill(dst, rt, c.constant(d, 0));
    Shape order;
    for (int64_t i : dn.lhs_batch) order.push_back(lt.shape[i]);
    for (int64_t i : lfree) order.push_back(lt.shape[i]);
    for (int64_t i : dn.lhs_contract) order.push_back(lt.shape[i]);
    for (int64_t i : rfree) order.push_back(ht.shape[i]);
    c.loop_nest(order, [&](Ivs ivs) {
      std::vector<Value> li(lt.rank()), hi(ht.rank()), out;
      size_t p = 0;
      for (size_t k = 0; k < dn.lhs_batch.size(); ++k, ++p) {
        li[dn.lhs_batch[k]] = hi[dn.rhs_batch[k]] = ivs[p];
        out.push_back(ivs[p]);
      }
      for (int64_t i : lfree) {
        li[i] = ivs[p++];
        out.push_back(li[i]);
      }
      for (size_t k = 0; k < dn.lhs_contract.size(); ++k, ++p)
        li[dn.lhs_contract[k]] = hi[dn.rhs_contract[k]] = ivs[p];
      for (int64_t i : rfree) {
        hi[i] = ivs[p++];
        out.push_back(hi[i]);
      }
      c.store(mul_add(c.load_mem(dst, d, out), li, hi), dst, d, out);
    });
    return;
  }
  // No rhs free dims (matrix-vector, dot): accumulate each result element in registers.
  c.loop_nest(rt.shape, [&](Ivs ivs) {
    std::vector<Value> li(lt.rank()), hi(ht.rank());
    size_t p = 0;
    for (size_t k = 0; k < dn.lhs_batch.size(); ++k, ++p) {
      li[dn.lhs_batch[k]] = ivs[p];
      hi[dn.rhs_batch[k]] = ivs[p];
    }
    for (int64_t i : lfree) li[i] = ivs[p++];
    for (int64_t i : rfree) hi[i] = ivs[p++];
    std::function<Value(size_t, Value)> contract = [&](size_t level, Value acc) -> Value {
      if (level == dn.lhs_contract.size()) return mul_add(acc, li, hi);
      int64_t n = lt.shape.at(dn.lhs_contract[level]);
      return c.loop_with_carry(n, {acc}, [&](Value iv, const std::vector<Value>& cur) {
        li[dn.lhs_contract[level]] = iv;
        hi[dn.rhs_contract[level]] = iv;
        return std::vector<Value>{contract(level + 1, cur[0])};
      })[0];
    };
    c.store(contract(0, c.constant(d, 0)), dst, d, ivs);
  });
}

}  // namespace

void register_reduce_lowerings(LowerTable& t) {
  t.set(Prim::reduce_sum, [](LowerCtx& c, const Eqn& e) { lower_reduce(c, e, Reducer::sum); });
  t.set(Prim::reduce_max, [](LowerCtx& c, const Eqn& e) { lower_reduce(c, e, Reducer::max); });
  t.set(Prim::reduce_min, [](LowerCtx& c, const Eqn& e) { lower_reduce(c, e, Reducer::min); });
  t.set(Prim::argmax, &lower_argmax);
  t.set(Prim::dot_general, &lower_dot_general);
}

}  // namespace refjit::backend
