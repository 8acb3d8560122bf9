// Lowering of dot_general and dot_accumulate (r += x . y). Large f32/f64 products call the
// runtime's blocked, packed and threaded kernel (runtime/kernels/gemm.h) when the operands' dims
// group into three strided axes each (batch, free, contracting); everything else, and code that
// must stand alone
// (`refjit compile` objects), gets loops.
#include <algorithm>
#include <functional>
#include <optional>
#include <string>

#include "backend/lowering.h"

namespace refjit::backend {
namespace {

// A product's operands and type: dot_general x y gives its result; dot_accumulate r x y adds
// a product of the ref's type into r.
size_t first_operand(const Eqn& e) { return e.prim == Prim::dot_accumulate ? 1 : 0; }
const Atom& lhs_of(const Eqn& e) { return e.ins.at(first_operand(e)); }
const Atom& rhs_of(const Eqn& e) { return e.ins.at(first_operand(e) + 1); }
ArrayType product_type(LowerCtx& c, const Eqn& e) {
  return e.prim == Prim::dot_accumulate ? c.type_of(e.ins.at(0)).array
                                        : c.type_of(e.outs.at(0)).array;
}

// Products with fewer multiply-adds stay loops: the call and packing would cost more, and
// the loops vectorise well at these sizes.
constexpr int64_t kMinKernelWork = 4096;

// Dims of one operand that the kernel sees as one axis: their total size, and the stride of
// the whole (the stride of the innermost dim of size > 1; 0 when every dim has size 1).
struct Axis {
  int64_t size = 1;
  int64_t stride = 0;
};

// `dims` (outermost first) as one axis, or nullopt when their strides do not nest (a view
// with gaps between the dims) or are only known at run time.
std::optional<Axis> collapse(const std::vector<int64_t>& dims, const Shape& shape,
                             const llvm::SmallVector<int64_t>& strides) {
  Axis axis;
  bool first = true;
  for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
    const int64_t size = shape.at(*it), stride = strides[*it];
    if (size == 1) continue;
    if (mlir::ShapedType::isDynamic(stride)) return std::nullopt;
    if (first) {
      axis = {size, stride};
      first = false;
      continue;
    }
    if (stride != axis.stride * axis.size) return std::nullopt;
    axis.size *= size;
  }
  return axis;
}

// One operand as the kernel sees it: batch, row and column axes.
struct MatrixAxes {
  Axis batch, rows, cols;
};

std::optional<MatrixAxes> matrix_axes(const std::vector<int64_t>& batch,
                                      const std::vector<int64_t>& rows,
                                      const std::vector<int64_t>& cols, const Shape& shape,
                                      const llvm::SmallVector<int64_t>& strides) {
  if (strides.size() != shape.size()) return std::nullopt;
  auto b = collapse(batch, shape, strides), r = collapse(rows, shape, strides),
       k = collapse(cols, shape, strides);
  if (!b || !r || !k) return std::nullopt;
  return MatrixAxes{*b, *r, *k};
}

std::vector<int64_t> range(int64_t begin, int64_t end) {
  std::vector<int64_t> v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

// The call when the product qualifies; nullopt when loops are needed. `into`: a
// dot_accumulate's ref, to which the product is added (null: stored in the result's buffer).
std::optional<KernelCall> kernel_call(LowerCtx& c, const Eqn& e, const std::vector<int64_t>& lfree,
                                      const std::vector<int64_t>& rfree, Value into) {
  const bool accumulate = bool(into);
  const ArrayType lt = c.type_of(lhs_of(e)).array;
  const ArrayType ht = c.type_of(rhs_of(e)).array;
  const ArrayType rt = product_type(c, e);
  const DotDims& dn = e.params.get<DotDims>("dimension_numbers");
  if (!c.options().runtime_kernels || (rt.dtype != DType::f32 && rt.dtype != DType::f64) ||
      lt.dtype != rt.dtype || ht.dtype != rt.dtype)
    return std::nullopt;
  if (!is_var(lhs_of(e)) || !is_var(rhs_of(e))) return std::nullopt;
  Value a = c.buffer(lhs_of(e)), b = c.buffer(rhs_of(e));
  auto am = matrix_axes(dn.lhs_batch, lfree, dn.lhs_contract, lt.shape, static_strides(a));
  auto bm = matrix_axes(dn.rhs_batch, dn.rhs_contract, rfree, ht.shape, static_strides(b));
  if (!am || !bm) return std::nullopt;
  const int64_t batch = am->batch.size, m = am->rows.size, k = am->cols.size, n = bm->cols.size;
  if (batch * m * n * k < kMinKernelWork) return std::nullopt;
  Value out = into ? into : c.result_buffer(e.outs[0]);
  const int64_t nb = static_cast<int64_t>(dn.lhs_batch.size());
  const int64_t nm = static_cast<int64_t>(lfree.size());
  auto result_axes = [&](Value memref) {
    return matrix_axes(range(0, nb), range(nb, nb + nm), range(nb + nm, rt.rank()), rt.shape,
                       static_strides(memref));
  };
  // A result view whose dims do not nest gets the product in a fresh buffer, then a copy.
  Value target = out;
  auto cm = result_axes(target);
  if (!cm && accumulate) return std::nullopt;
  if (!cm) {
    target = c.alloc(rt);
    cm = result_axes(target);
    if (!cm) return std::nullopt;
  }
  const DType d = rt.dtype;
  std::vector<Value> args = {c.index(batch),
                             c.index(m),
                             c.index(n),
                             c.index(k),
                             unranked_memref(c, a),
                             c.index(am->batch.stride),
                             c.index(am->rows.stride),
                             c.index(am->cols.stride),
                             unranked_memref(c, b),
                             c.index(bm->batch.stride),
                             c.index(bm->rows.stride),
                             c.index(bm->cols.stride),
                             unranked_memref(c, target),
                             c.index(cm->batch.stride),
                             c.index(cm->rows.stride),
                             c.index(cm->cols.stride),
                             c.index(accumulate ? 1 : 0)};
  return KernelCall{d == DType::f32 ? "refjit_gemm_f32" : "refjit_gemm_f64", std::move(args),
                    target, out, rt};
}

// The kernel call when the product qualifies (emitted); false when loops are needed.
bool lower_dot_kernel(LowerCtx& c, const Eqn& e, const std::vector<int64_t>& lfree,
                      const std::vector<int64_t>& rfree, Value into) {
  std::optional<KernelCall> call = kernel_call(c, e, lfree, rfree, into);
  if (call) emit_kernel_call(c, *call);
  return call.has_value();
}

// The dims of each operand that are neither contracted nor batch.
std::pair<std::vector<int64_t>, std::vector<int64_t>> free_dims(LowerCtx& c, const Eqn& e) {
  const DotDims& dn = e.params.get<DotDims>("dimension_numbers");
  return {refjit::free_dims(c.type_of(lhs_of(e)).array.rank(), dn.lhs_contract, dn.lhs_batch),
          refjit::free_dims(c.type_of(rhs_of(e)).array.rank(), dn.rhs_contract, dn.rhs_batch)};
}

// The loop form: result dims are (batch, lhs free, rhs free); each result element is a sum
// over the contracting dims, carried in registers through nested loops. `into` (a
// dot_accumulate's ref): the products are added to what it holds.
void lower_dot_loops(LowerCtx& c, const Eqn& e, const std::vector<int64_t>& lfree,
                     const std::vector<int64_t>& rfree, Value into = Value()) {
  ArrayType lt = c.type_of(lhs_of(e)).array;
  ArrayType ht = c.type_of(rhs_of(e)).array;
  ArrayType rt = product_type(c, e);
  const DotDims& dn = e.params.get<DotDims>("dimension_numbers");
  DType d = rt.dtype;
  Value dst = into ? into : c.result_buffer(e.outs[0]);
  auto mul_add = [&](Value acc, const std::vector<Value>& li, const std::vector<Value>& hi) {
    Value a = convert_element(c, c.load(lhs_of(e), li), lt.dtype, d);
    Value b = convert_element(c, c.load(rhs_of(e), hi), ht.dtype, d);
    return c.add(d, acc, c.mul(d, a, b));
  };
  if (!rfree.empty()) {
    // Loop order (batch, lhs free, contracting, rhs free): the innermost loop runs along
    // contiguous rows of rhs and of the result, so it vectorises. Each result element still
    // sums its products in contracting-index order.
    if (!into) c.fill(dst, rt, c.constant(d, 0));
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
    c.store(contract(0, into ? c.load_mem(dst, d, ivs) : c.constant(d, 0)), dst, d, ivs);
  });
}

void lower_dot_general(LowerCtx& c, const Eqn& e) {
  if (e.ins.size() != 2 || e.outs.size() != 1) fail_eqn(e, "expected two operands");
  const DotDims& dn = e.params.get<DotDims>("dimension_numbers");
  if (dn.lhs_contract.size() != dn.rhs_contract.size() ||
      dn.lhs_batch.size() != dn.rhs_batch.size())
    fail_eqn(e, "dimension_numbers pair up different numbers of dims");
  auto [lfree, rfree] = free_dims(c, e);
  if (!lower_dot_kernel(c, e, lfree, rfree, Value())) lower_dot_loops(c, e, lfree, rfree);
}

}  // namespace

void emit_kernel_call(LowerCtx& c, const KernelCall& call) {
  c.call_runtime(call.entry, call.args);
  if (call.target != call.out) c.copy(call.target, call.out, call.type);
}

void emit_product_with_epilogue(LowerCtx& c, const Jaxpr& j, size_t root,
                                const std::optional<KernelCall>& call, bool rows_are_results,
                                const std::function<void()>& loops) {
  if (call && rows_are_results && call->target == call->out) {
    c.lower_epilogue_rows(j, root);  // outline_epilogues hands it to the call
    emit_kernel_call(c, *call);
    return;
  }
  if (call)
    emit_kernel_call(c, *call);
  else
    loops();
  c.lower_eqn_at(j, root);
}

llvm::SmallVector<int64_t> static_strides(Value memref) {
  auto type = mlir::cast<mlir::MemRefType>(memref.getType());
  llvm::SmallVector<int64_t> strides;
  int64_t offset = 0;
  if (mlir::failed(mlir::getStridesAndOffset(type, strides, offset))) strides.clear();
  return strides;
}

void lower_product_with_epilogue(LowerCtx& c, const Jaxpr& j, size_t dot, size_t root) {
  const Eqn& d = j.eqns[dot];
  auto [lfree, rfree] = free_dims(c, d);
  // The kernel's rows are the result's dims but the last: one rhs free dim.
  emit_product_with_epilogue(c, j, root, kernel_call(c, d, lfree, rfree, Value()),
                             rfree.size() == 1, [&] { lower_dot_loops(c, d, lfree, rfree); });
}

Value dot_row(LowerCtx& c, const Eqn& e, Value row) {
  const ArrayType lt = c.type_of(e.ins[0]).array;
  const DType d = c.type_of(e.outs[0]).array.dtype;
  auto reassoc =
      mlir::arith::FastMathFlagsAttr::get(c.b.getContext(), mlir::arith::FastMathFlags::reassoc);
  return c.loop_with_carry(
      lt.shape[1], {c.constant(d, 0)}, [&](Value k, const std::vector<Value>& acc) {
        Value p = c.mul(d, c.load(e.ins[0], {row, k}), c.load(e.ins[1], {k}));
        return std::vector<Value>{c.b.create<mlir::arith::AddFOp>(c.loc, acc[0], p, reassoc)};
      })[0];
}

// r += x . y: the kernel adds the product into the ref's buffer (C += A B), or loops add each
// element's sum of products to what the ref holds.
void lower_dot_accumulate(LowerCtx& c, const Eqn& e) {
  if (e.ins.size() != 3 || !e.outs.empty()) fail_eqn(e, "expected a ref and two operands");
  auto [lfree, rfree] = free_dims(c, e);
  const Value ref = c.buffer(e.ins[0]);
  if (!lower_dot_kernel(c, e, lfree, rfree, ref)) lower_dot_loops(c, e, lfree, rfree, ref);
}

void register_dot_lowerings(LowerTable& t) {
  t.set(Prim::dot_general, &lower_dot_general);
  t.set(Prim::dot_accumulate, &lower_dot_accumulate);
}

}  // namespace refjit::backend
