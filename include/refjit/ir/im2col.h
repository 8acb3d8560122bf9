// The geometry of `im2col_dot` (docs/primitives.md "Decisions"): a product whose left operand
// is the concatenation, along the last dim, of equally shaped windows of one array x,
//
//   im2col_dot[starts strides window] x k
//     = dot_general(concatenate(slice(x, starts[t], stride) for t in windows), k)
//
// with every window spanning x's whole last dim (the channels). Row i of the product (a
// multi-index over window[:-1]) and window t read x at starts[t] + i * strides: the element
// address is a part that depends only on the row plus a part that depends only on the window
// and channel, so the native code multiplies without ever writing the concatenation (an
// implicit im2col). Shared by the type rule, the interpreter, the lowering and the pass that
// makes it (passes/simplify/implicit_im2col.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "refjit/ir/params.h"
#include "refjit/ir/type.h"

namespace refjit {

struct Im2col {
  IntListList starts;  // one start per window, rank(x) entries each (the last one 0)
  IntList strides;     // rank(x) entries (the last one 1)
  IntList window;      // the shape of every window (the last entry: x's last dim)

  static Im2col of(const Params& p);
  Params params() const;

  int rank() const { return static_cast<int>(window.size()); }
  int64_t windows() const { return static_cast<int64_t>(starts.size()); }
  int64_t channels() const { return window.empty() ? 0 : window.back(); }
  // The product's rows: the window's shape without its last dim.
  Shape row_shape() const { return Shape(window.begin(), window.end() - 1); }
  // What is wrong with these params for an operand of shape `x`, or "" when they fit.
  std::string problem(const Shape& x) const;
};

}  // namespace refjit
