// The plain eqns the decisions a transpose rule writes stand for. The rules write two kinds of
// decision of the lowering themselves, and the transforms have no rules of their own for them:
// the cotangent of a window moved inside an array is one shift_add (passes/ad/window_shift.h),
// and a flattened cotangent ref read or written at a run of consecutive indices is one
// get_flat_run / swap_flat_run (passes/ad/cotangent_ref.h). A derived program that is
// transformed again (a second derivative, a vmap of a gradient, a gradient inside a loop whose
// program is differentiated) is read with each of them written out as what it does. So are
// the gathers and scatters whose indices address several dims (`dims` > 1: what JAX's
// `x.at[i, j]` is read as, import/jax/gather_scatter.cpp), which the rules take as one dim:
//
//   shift_add:  v, r[w1] <- r[w1], broadcast(zero)     (w1: write_sizes at i)
//               side_k = slice(reshape(v), side run k) (its results)
//               r[w2] += reshape(slice(reshape(v), offset run), add_sizes)   (w2: add_sizes at j)
//   gather/scatter[dims=k>1]:  the operand reshaped to one dim for the k it indexes, the
//               one-axis gather or scatter on it, a scatter's result reshaped back;
//   get_flat_run[bound length] r s:  f = min(max(s + iota(length), 0), bound), split row-major
//               into one index array per dim of r (idx[0] = f / stride0, idx[d] = f / stride_d -
//               (f / stride_{d-1}) * shape[d]), then r[idx...]; swap_flat_run the same swap.
//
// which the interpreter runs with the same numbers (runtime/eval_ref.cpp).
#pragma once

#include <optional>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// `j` with every shift_add, get_flat_run and swap_flat_run, and every gather and scatter
// indexing several dims, at any depth, written as plain eqns. Returns `j` itself when it holds
// none; else the copy, kept in `storage`.
const Jaxpr& plain_decisions(const Jaxpr& j, std::optional<Jaxpr>& storage);
// `j` with only the gathers and scatters indexing several dims written out: what the pipeline
// lowers, once those that became windows have (passes/simplify/range_simplify.h).
Jaxpr one_dim_indexing(const Jaxpr& j);

}  // namespace refjit
