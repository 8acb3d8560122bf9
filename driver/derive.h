// The one place every door takes a derivative. A program is first given the form autodiff
// differentiates: the gathers and scatters that the integer ranges of its constants prove to
// touch one window become windows (windows_before_autodiff, passes/simplify/range_simplify.h;
// the constants known to hold integer runs are read as iotas there), so a row written with
// `x.at[idx].set` through a constant index vector differentiates into the same per-step work as the
// same row written with dynamic_update_slice. Then the transformation the door asks for runs on
// that form.
//
// The doors: the C++ API's grad, vjp, jvp and linearize (api/autodiff.cpp), the
// pipeline's `autodiff` pass (`refjit run/dump/bench --grad/--jvp`, derive_program in
// driver/pipeline.h), `refjit compile`'s --grad/--jvp/--vjp entry points
// (driver/aot_entries.cpp) and the Python package's transformations (python/src/module.cpp).
#pragma once

#include <optional>
#include <vector>

#include "passes/ad/linearize.h"
#include "passes/ad/vjp.h"  // VjpJaxprs, AccumKind
#include "passes/simplify/inline_consts.h"
#include "passes/simplify/int_ranges.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

class Differentiable {
 public:
  // `const_ranges`: per constvar of `program`, the range of its integer elements if known
  // (empty: nothing is known, e.g. `refjit compile`, whose constants are arguments);
  // `const_folds`: per constvar, whether it holds zeros or an integer run (or empty).
  explicit Differentiable(JaxprPtr program,
                          const std::vector<std::optional<IntRange>>& const_ranges = {},
                          const std::vector<ConstFold>& const_folds = {});
  explicit Differentiable(const Jaxpr& program,
                          const std::vector<std::optional<IntRange>>& const_ranges = {},
                          const std::vector<ConstFold>& const_folds = {});

  // The program the transformations below differentiate (the given one when no window was
  // made: the same object).
  const JaxprPtr& program() const { return program_; }

  // grad_jaxpr (passes/ad/vjp.h): the outputs, then d out[0] / d invar[w] for w in wrt.
  Jaxpr grad(const std::vector<int>& wrt, int num_aux = 0) const;
  // jvp_jaxpr (passes/ad/jvp.h): primals, a tangent per invar with nonzero[i].
  Jaxpr jvp(const std::vector<bool>& nonzero) const;
  // linearize_jaxpr (passes/ad/linearize.h).
  Linearized linearize(std::vector<bool> differentiated) const;
  // vjp_jaxpr (passes/ad/vjp.h).
  VjpJaxprs vjp(const std::vector<bool>& differentiated, const std::vector<AccumKind>& kinds) const;

 private:
  JaxprPtr program_;
};

}  // namespace refjit
