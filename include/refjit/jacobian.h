// Jacobians and Hessians of a function of one float Value (JAX's jacfwd, jacrev, hessian):
//
//   Value J = jacfwd(f)(x);    // shape f(x).shape + x.shape: J[i..., j...] = d f(x)[i...] / d
//   x[j...] Value K = jacrev(f)(x);    // the same matrix, by reverse mode Value H = hessian(f)(x);
//   // jacfwd(jacrev(f)): x.shape + x.shape for a scalar f
//
// jacfwd runs f's forward pass once (linearize) and applies the linear map to each basis
// vector of x's space; jacrev runs it once (vjp) and pulls back each basis vector of the
// output's space. Either way the basis vectors are the rows of an identity matrix scanned
// over, so a Jacobian is one loop in the program, traced once, whatever its size. Use jacfwd
// when x has fewer elements than f(x), jacrev otherwise. Both nest with each other and with
// jit, grad and the other transformations.
#pragma once

#include <functional>
#include <string>
#include <type_traits>
#include <utility>

#include "refjit/trace.h"
#include "refjit/tree.h"
#include "refjit/value.h"

namespace refjit {

// The flat form of jacfwd / jacrev, which JacobianFunction calls: the Jacobian of `f` (named
// `name` in jaxprs) at x, by reverse mode if `reverse`, else by forward mode.
namespace flat {
Value jacobian(const std::function<Value(const Value&)>& f, const std::string& name, const Value& x,
               bool reverse);
}  // namespace flat

template <class F>
class JacobianFunction {
 public:
  JacobianFunction(F f, bool reverse) : f_(std::move(f)), reverse_(reverse) {}

  Value operator()(const Value& x) const {
    static_assert(std::is_same_v<std::remove_cvref_t<tree::traced_result_t<F, Value>>, Value>,
                  "jacfwd / jacrev / hessian: the function must take and return one Value");
    return flat::jacobian([this](const Value& v) -> Value { return f_(v); }, function_name(f_), x,
                          reverse_);
  }

 private:
  F f_;
  bool reverse_;
};

// jax.jacfwd(f): the Jacobian by forward mode.
template <class F>
JacobianFunction<F> jacfwd(F f) {
  return JacobianFunction<F>(std::move(f), false);
}

// jax.jacrev(f): the Jacobian by reverse mode.
template <class F>
JacobianFunction<F> jacrev(F f) {
  return JacobianFunction<F>(std::move(f), true);
}

// jax.hessian(f): jacfwd(jacrev(f)), the matrix of second derivatives of a scalar f.
template <class F>
auto hessian(F f) {
  return jacfwd([g = jacrev(std::move(f))](const Value& x) { return g(x); });
}

}  // namespace refjit
