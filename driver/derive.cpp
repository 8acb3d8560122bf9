#include "driver/derive.h"

#include <memory>
#include <utility>

#include "passes/ad/jvp.h"
#include "passes/simplify/range_simplify.h"

namespace refjit {

Differentiable::Differentiable(JaxprPtr program,
                               const std::vector<std::optional<IntRange>>& const_ranges,
                               const std::vector<ConstFold>& const_folds)
    : program_(std::move(program)) {
  int windows = 0;
  Jaxpr windowed = windows_before_autodiff(*program_, const_ranges, const_folds, &windows);
  if (windows > 0) program_ = std::make_shared<const Jaxpr>(std::move(windowed));
}

Differentiable::Differentiable(const Jaxpr& program,
                               const std::vector<std::optional<IntRange>>& const_ranges,
                               const std::vector<ConstFold>& const_folds)
    : Differentiable(std::make_shared<const Jaxpr>(program), const_ranges, const_folds) {}

Jaxpr Differentiable::grad(const std::vector<int>& wrt, int num_aux) const {
  return grad_jaxpr(*program_, wrt, num_aux);
}

Jaxpr Differentiable::jvp(const std::vector<bool>& nonzero) const {
  return jvp_jaxpr(*program_, nonzero);
}

Linearized Differentiable::linearize(std::vector<bool> differentiated) const {
  return linearize_jaxpr(*program_, std::move(differentiated));
}

VjpJaxprs Differentiable::vjp(const std::vector<bool>& differentiated,
                              const std::vector<AccumKind>& kinds) const {
  return vjp_jaxpr(*program_, differentiated, kinds);
}

}  // namespace refjit
