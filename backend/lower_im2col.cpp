// Lowering of im2col_dot (refjit/ir/im2col.h). f32 and f64 call the runtime's
// refjit_im2col_gemm_* (runtime/kernels/gemm.h), which reads the windows of x in place while it
// multiplies; other dtypes, and code that must stand alone (`refjit compile` objects), get one
// loop nest per window.
#include <numeric>
#include <optional>
#include <string>

#include "backend/lowering.h"
#include "refjit/ir/im2col.h"

namespace refjit::backend {
namespace {

// The geometry vector refjit_im2col_gemm_* reads: [q, sizes[q], steps[q], runs, run_len,
// run_offsets[runs]], with adjacent windows whose channels follow each other in x (a kernel
// row's windows, when they are one element apart) merged into one run.
std::vector<int64_t> kernel_geometry(const Im2col& g, const Shape& x) {
  std::vector<int64_t> xs(x.size(), 1);
  for (size_t d = x.size() - 1; d-- > 0;) xs[d] = xs[d + 1] * x[d + 1];
  std::vector<int64_t> window_offsets;
  for (const IntList& s : g.starts)
    window_offsets.push_back(std::inner_product(s.begin(), s.end(), xs.begin(), int64_t{0}));
  // The largest group size that divides the windows and whose groups are contiguous.
  const int64_t t = g.windows(), ch = g.channels();
  int64_t group = 1;
  for (int64_t size = t; size > 1; --size) {
    if (t % size) continue;
    bool contiguous = true;
    for (int64_t w = 0; w < t && contiguous; ++w)
      if (w % size) contiguous = window_offsets[w] == window_offsets[w - 1] + ch;
    if (contiguous) {
      group = size;
      break;
    }
  }
  const int q = g.rank() - 1;
  std::vector<int64_t> geo = {q};
  for (int d = 0; d < q; ++d) geo.push_back(g.window[d]);
  for (int d = 0; d < q; ++d) geo.push_back(g.strides[d] * xs[d]);
  geo.push_back(t / group);
  geo.push_back(group * ch);
  for (int64_t w = 0; w < t; w += group) geo.push_back(window_offsets[w]);
  return geo;
}

// The geometry vector as a memref, for the runtime call.
Value geometry_table(LowerCtx& c, const Im2col& g, const Shape& x) {
  const std::vector<int64_t> geo = kernel_geometry(g, x);
  Value table = c.alloc(ArrayType{DType::i64, {static_cast<int64_t>(geo.size())}});
  for (size_t i = 0; i < geo.size(); ++i)
    c.store(c.int_constant(DType::i64, geo[i]), table, DType::i64,
            {c.index(static_cast<int64_t>(i))});
  return table;
}

// The runtime call (im2col_dot: B is any strided matrix; im2col_tdot: B is the contiguous
// rows x n cotangent), when the operands' layouts allow it; nullopt when loops are needed.
std::optional<KernelCall> kernel_call(LowerCtx& c, const Eqn& e, const Im2col& g) {
  const ArrayType& xt = c.type_of(e.ins[0]).array;
  const ArrayType& rt = c.type_of(e.outs[0]).array;
  if (!c.options().runtime_kernels || (rt.dtype != DType::f32 && rt.dtype != DType::f64))
    return std::nullopt;
  if (!is_var(e.ins[0]) || !is_var(e.ins[1])) return std::nullopt;
  Value x = c.buffer(e.ins[0]), b = c.buffer(e.ins[1]);
  const ArrayType& bt = c.type_of(e.ins[1]).array;
  int64_t b_rs = bt.shape.back(), b_cs = 1;
  if (e.prim == Prim::im2col_dot) {
    const llvm::SmallVector<int64_t> bs = static_strides(b);
    if (bs.size() != 2 || mlir::ShapedType::isDynamic(bs[0]) || mlir::ShapedType::isDynamic(bs[1]))
      return std::nullopt;
    b_rs = bs[0];
    b_cs = bs[1];
  } else if (!is_contiguous(b)) {
    return std::nullopt;
  }
  if (!is_contiguous(x)) return std::nullopt;
  Value out = c.result_buffer(e.outs[0]);
  Value target = is_contiguous(out) ? out : c.alloc(rt);
  const int64_t n = rt.shape.back();
  const std::string entry =
      std::string(e.prim == Prim::im2col_dot ? "refjit_im2col_gemm" : "refjit_im2col_tgemm") +
      (rt.dtype == DType::f32 ? "_f32" : "_f64");
  std::vector<Value> args = {unranked_memref(c, geometry_table(c, g, xt.shape)),
                             unranked_memref(c, x),
                             unranked_memref(c, b),
                             c.index(b_rs),
                             c.index(b_cs),
                             unranked_memref(c, target),
                             c.index(n),
                             c.index(1),
                             c.index(n)};
  return KernelCall{entry, std::move(args), target, out, rt};
}

// One loop nest per window over (rows..., channels, columns), adding in the interpreter's
// order: im2col_dot's out[row, o] += x[starts[t] + row * strides, ch] * k[t * C + ch, o], or
// im2col_tdot's out[t * C + ch, o] += x[...] * g[row, o].
void lower_im2col_loops(LowerCtx& c, const Eqn& e, const Im2col& g) {
  const ArrayType& rt = c.type_of(e.outs[0]).array;
  const DType d = rt.dtype;
  const bool transposed = e.prim == Prim::im2col_tdot;
  Value dst = c.result_buffer(e.outs[0]);
  c.fill(dst, rt, c.constant(d, 0));
  const int q = g.rank() - 1;
  Shape nest = g.row_shape();
  nest.push_back(g.channels());
  nest.push_back(rt.shape.back());
  for (int64_t t = 0; t < g.windows(); ++t) {
    c.loop_nest(nest, [&](Ivs ivs) {
      std::vector<Value> xi, row;
      for (int dim = 0; dim < q; ++dim) {
        xi.push_back(c.affine_index(ivs[dim], g.strides[dim], g.starts[t][dim]));
        row.push_back(ivs[dim]);
      }
      xi.push_back(ivs[q]);
      Value depth = c.b.create<arith::AddIOp>(c.loc, ivs[q], c.index(t * g.channels()));
      Value col = ivs[q + 1];
      std::vector<Value> other = {depth, col}, out = row;  // im2col_dot: k[depth, col]
      out.push_back(col);
      if (transposed) std::swap(other, out);  // im2col_tdot: g[row, col] into out[depth, col]
      Value prod = c.mul(d, c.load(e.ins[0], xi), c.load(e.ins[1], other));
      c.store(c.add(d, c.load_mem(dst, d, out), prod), dst, d, out);
    });
  }
}

void lower_im2col(LowerCtx& c, const Eqn& e) {
  if (e.ins.size() != 2 || e.outs.size() != 1) fail_eqn(e, "expected two operands");
  const Im2col g = Im2col::of(e.params);
  if (std::optional<KernelCall> call = kernel_call(c, e, g))
    emit_kernel_call(c, *call);
  else
    lower_im2col_loops(c, e, g);
}

}  // namespace

void lower_im2col_with_epilogue(LowerCtx& c, const Jaxpr& j, size_t product, size_t root) {
  const Eqn& e = j.eqns[product];
  const Im2col g = Im2col::of(e.params);
  // The kernel's rows are the result's dims but the last.
  emit_product_with_epilogue(c, j, root, kernel_call(c, e, g), true,
                             [&] { lower_im2col_loops(c, e, g); });
}

void register_im2col_lowerings(LowerTable& t) {
  t.set(Prim::im2col_dot, &lower_im2col);
  t.set(Prim::im2col_tdot, &lower_im2col);
}

}  // namespace refjit::backend
