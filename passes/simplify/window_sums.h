// Window accumulations as sums of pads (a rewrite of canonicalize).
//
// Reverse mode accumulates the cotangent of a value read through several windows into a fresh
// zero ref, one `ref[window] += ct` per window, then freezes it: the transpose of im2col (a
// convolution's nine shifted slices of its padded input) is nine read-modify-write passes over
// the whole buffer, after a pass that zeroes it. The frozen value is the sum of the updates,
// each padded with zeros to its window's place:
//
//     r = new_ref zeros; r[w1] += a; r[w2] += b; x = freeze r
//  => x = add (pad a at w1) (pad b at w2)
//
// which elementwise fusion computes in one pass over x, each element reading the updates that
// cover it. A pad with zeros that reads x alone (the crop back to the unpadded input) folds
// into the pads of the sum.
//
// It applies when the ref is made from a broadcast zero, is only added into by static,
// unit-stride windows of its shape (no dynamic starts, integer indices or index arrays) and
// frozen once after them, all in one jaxpr, with at most 16 windows each covering at least
// half of the ref (small windows into a large ref are cheaper as updates than as a pass that
// tests every element against them). The sum adds the updates in program order, as the ref
// did.
#pragma once

#include "refjit/ir/jaxpr.h"

namespace refjit {

// Rewrites the top-level eqns of `j` (not its sub-jaxprs); returns the number of refs
// replaced by sums.
int sum_window_accumulations(Jaxpr& j);

}  // namespace refjit
