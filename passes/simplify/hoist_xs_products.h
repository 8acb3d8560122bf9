// Per-step products of a scan's xs rows with its consts, computed for every step before the
// scan (pipeline pass `hoist-xs-products`, docs/pipeline.md).
//
// An RNN step multiplies its input row by a weight matrix: `u_t = dot_general(x_t, W)` with
// x_t a row of the scan's xs and W one of its consts. Nothing in it depends on the carry, so
// all steps' products are one product before the scan,
//   us = dot_general(xs, W)      (the step dim is a free dim of xs, so it leads the result)
// which the scan reads as one more xs. One large product runs at the matrix kernel's full
// speed, on every thread, where `length` small ones ran one after the other on one thread.
// Applied when the row is the product's left operand (so the stacked result needs no
// transpose), there are no batch dims, the stacked products stay under kMaxStackedElements
// and each step's product is at most 16 times the row it multiplies (an LSTM's four gates of
// a hidden size twice the input's are 8 times it; the rewrite stores
// the products for a while instead of the rows). Scans that multiply the same xs by the same
// const (a model applied twice, or the forward scan and its recomputation) share one stacked
// product. Each element is the same sum, which the
// matrix kernel may round differently for the larger shape. Recurses into scan and jit bodies.
#pragma once

#include "refjit/ir/jaxpr.h"

namespace refjit {

// The rewritten program; `changes` (if given) receives the number of products hoisted.
Jaxpr hoist_xs_products(const Jaxpr& jaxpr, int* changes = nullptr);

}  // namespace refjit
