// Pipeline pass `implicit-im2col` (docs/pipeline.md): a product whose left operand is a
// concatenation of equally shaped windows of one array, each spanning its last dim,
//
//   w_t = slice x [starts_t, strides]   (t = 0..T-1)
//   m   = concatenate[last dim] w_0 ... w_{T-1}
//   y   = dot_general m k               (m's last dim against k's first or second)
//
// becomes y = im2col_dot x k (refjit/ir/im2col.h). This is how a convolution is read
// (import/jax/conv.cpp); the native code then multiplies straight from x instead of first
// writing the im2col matrix m, which is nine times the input for a 3x3 kernel. The windows and
// the concatenation stay where something else reads them (a kernel's gradient), else dce
// removes them. Recurses into scan, jit and cond bodies.
#pragma once

#include "refjit/ir/jaxpr.h"

namespace refjit {

// The rewritten program; `changes` (if given) receives the number of products rewritten.
Jaxpr implicit_im2col(const Jaxpr& jaxpr, int* changes = nullptr);

}  // namespace refjit
