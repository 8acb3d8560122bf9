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

#include <type_traits>
#include <utility>

#include "refjit/autodiff.h"
#include "refjit/loops.h"
#include "refjit/ops.h"

namespace refjit {

namespace detail {

// The n x n identity matrix of dtype d.
inline Value identity_matrix(int64_t n, DType d) {
  return convert(eq(iota(DType::i32, {n, n}, 0), iota(DType::i32, {n, n}, 1)), d);
}

inline Ints with(const Shape& a, const Shape& b) {
  Ints s(a.begin(), a.end());
  s.insert(s.end(), b.begin(), b.end());
  return s;
}

// [k, rest...] -> [rest..., k]
inline Value leading_dim_last(const Value& x) {
  Ints perm;
  for (int64_t d = 1; d < x.rank(); ++d) perm.push_back(d);
  perm.push_back(0);
  return transpose(x, perm);
}

template <class F>
void check_jacobian_result(const char* what) {
  static_assert(std::is_same_v<std::remove_cvref_t<detail::result_of_traced_t<F, Value>>, Value>,
                "jacfwd / jacrev / hessian: the function must take and return one Value");
  (void)what;
}

}  // namespace detail

template <class F>
class JacobianFunction {
 public:
  JacobianFunction(F f, bool reverse) : f_(std::move(f)), reverse_(reverse) {}

  Value operator()(const Value& x) const {
    detail::check_jacobian_result<F>(reverse_ ? "jacrev" : "jacfwd");
    if (!is_float(x.dtype()))
      throw TypeError(
          fmt::format("{}: the argument has dtype {}; only float arguments can be "
                      "differentiated",
                      reverse_ ? "jacrev" : "jacfwd", long_name(x.dtype())));
    return reverse_ ? by_rows(x) : by_columns(x);
  }

 private:
  // jacfwd: J e_j for each basis vector e_j of x's space, as the columns.
  Value by_columns(const Value& x) const {
    auto [y, f_lin] = linearize(f_, x);
    const Shape in = x.shape();
    const int64_t n = x.size();
    auto [none, columns] = scan(
        [&](std::tuple<>, const Value& e) {
          return std::pair{std::tuple<>{}, f_lin(reshape(e, Ints(in.begin(), in.end())))};
        },
        std::tuple<>{}, detail::identity_matrix(n, x.dtype()));
    (void)none;
    // columns: [n, out...] -> [out..., n] -> out + in
    return reshape(detail::leading_dim_last(columns), detail::with(y.shape(), in));
  }

  // jacrev: e_i^T J for each basis vector e_i of the output's space, as the rows.
  Value by_rows(const Value& x) const {
    auto [y, f_vjp] = vjp(f_, x);
    const Shape out = y.shape();
    const int64_t m = y.size();
    auto [none, rows] = scan(
        [&](std::tuple<>, const Value& e) {
          auto [g] = f_vjp(reshape(e, Ints(out.begin(), out.end())));
          return std::pair{std::tuple<>{}, g.value()};
        },
        std::tuple<>{}, detail::identity_matrix(m, y.dtype()));
    (void)none;
    return reshape(rows, detail::with(out, x.shape()));  // [m, in...] -> out + in
  }

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
