// Transposition of a linear jaxpr with one gradient accumulator per linear input
// (REFS.md 2.3-2.4).
#pragma once

#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

// value: return the cotangent as an output; dont_want: don't compute it; ref: add it in
// place into a ref the caller passes (for a Ref-typed linear input: its cotangent ref).
enum class AccumKind { value, dont_want, ref };

// `linear` has `num_nonlinear` leading invars (residuals), then the linear inputs, one
// `kinds` entry each. The result takes: the residuals, then a Ref{cotangent type} per `ref`
// accumulator, then one cotangent per output of `linear`; it returns one cotangent per
// `value` input (zeros when none flowed). Ref-typed linear inputs need `ref` or dont_want
// (RefError "E5" for value). Nested jits are inlined first; the result is DCE'd.
Jaxpr transpose_jaxpr(const Jaxpr& linear, int num_nonlinear, const std::vector<AccumKind>& kinds);

}  // namespace refjit
