// Automatic differentiation of C++ functions on Values and Refs (REFS.md 2.4-2.7):
//
//   auto [y, f_vjp] = vjp(f, x, i);              // runs f's forward pass now
//   auto [x_bar, i_bar] = f_vjp(1.0f);           // gradients as values, one per argument
//   f_vjp.with_refs(grad_ref, GradValue{})(1.0f) // accumulate x's gradient into grad_ref
//   Value g = grad(f)(x);                        // d f / d x for a float scalar f
//   auto [y2, y_dot] = jvp(f, std::tuple{x}, std::tuple{t});
//   auto [y3, f_lin] = linearize(f, x);          // f_lin(t) = J t, callable many times
//
// Every transformation traces f once (trace.h), applies a pass (passes/) and runs the result
// with bind_jaxpr: outside a trace it evaluates now, inside one it stages `jit` eqns, so
// the transformations nest (grad of jit, jit of grad, vjp inside make_jaxpr, grad of grad).
//
// vjp/grad/linearize take functions whose arguments are each one leaf: a Value (or a C++
// scalar or Array) or a Ref. Float arguments are differentiated; integer ones are not (their
// gradient is zeros, their tangent is ignored). A float Ref argument is differentiated with
// respect to its initial value, even when f writes it; its gradient must be accumulated
// into a gradient ref bound with with_refs.
#pragma once

#include <array>
#include <cstddef>
#include <iosfwd>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "refjit/grad.h"
#include "refjit/jit.h"
#include "refjit/trace.h"
#include "refjit/tree.h"

namespace refjit {

// The flat form of the transformations below: functions of flat operand lists (a TraceBody),
// which the templates call once they have flattened the C++ arguments. A language binding
// calls these directly.
namespace flat {

struct VjpState;     // defined inside the library: residuals, linear jaxpr, cached transposes
struct LinearState;  // defined inside the library

// The backward pass of vjp on flat operands.
class Vjp {
 public:
  // Traces f at the types of `flat`, runs (or stages) its forward pass; returns f's outputs
  // and the backward pass.
  static std::pair<std::vector<Operand>, Vjp> create(const TraceBody& f,
                                                     const std::vector<Operand>& operands,
                                                     const std::string& name);
  // A copy with one accumulator entry per argument (E3, E5, E6, E7 are checked here).
  Vjp with_refs(std::vector<GradEntry> entries) const;
  // Runs (or stages) the backward pass for one cotangent per output (E4, E6).
  std::vector<Grad> apply(const std::vector<Operand>& cts) const;

 private:
  std::shared_ptr<VjpState> state_;
  std::vector<GradEntry> entries_;  // empty: all GradValue, not bound by with_refs
};

// The linear map of linearize on flat operands.
class LinearMap {
 public:
  static std::pair<std::vector<Operand>, LinearMap> create(const TraceBody& f,
                                                           const std::vector<Operand>& operands,
                                                           const std::string& name);
  // One tangent per argument (ignored for non-differentiated ones) -> output tangents.
  std::vector<Operand> apply(const std::vector<Operand>& tangents) const;

 private:
  std::shared_ptr<const LinearState> state_;
};

// The leaf positions of the arguments `argnums` (argument a's leaves are first[a] to
// first[a + 1] - 1); throws Error naming an argnum out of range.
std::vector<int> leaf_argnums(const std::vector<int>& argnums, const std::vector<size_t>& first,
                              const std::string& name);
// grad(f, argnum) returns one Value: throws Error when that argument has another number of
// leaves, saying how to get its gradient shaped like it.
void check_one_leaf(int argnum, size_t leaves, const std::string& name);

// grad on flat operands: f's output, then one gradient per leaf of `leaves` (in that order).
std::vector<Operand> grad(const TraceBody& f, const std::vector<Operand>& operands,
                          const std::vector<int>& leaves, const std::string& name);
// jvp on flat operands: the primal outputs, then the tangent outputs.
std::vector<Operand> jvp(const TraceBody& f, const std::vector<Operand>& primals,
                         const std::vector<Operand>& tangents, const std::string& name);

}  // namespace flat

// The backward-pass function vjp returns, for a function of N arguments. Applying it does
// not re-run the forward pass, so it may be applied any number of times (torch's
// retain_graph); each accumulator combination is transposed once and cached.
template <size_t N>
class VjpFunction {
 public:
  explicit VjpFunction(flat::Vjp core) : core_(std::move(core)) {}

  // One cotangent per output of f (or a tuple of them) -> one Grad per argument:
  //   auto [x_bar, i_bar] = f_vjp(1.0f);
  template <class... C>
  std::array<Grad, N> operator()(const C&... cts) const {
    std::vector<Grad> g = core_.apply(tree::flatten_args(cts...));
    std::array<Grad, N> out;
    for (size_t k = 0; k < N; ++k) out[k] = std::move(g.at(k));
    return out;
  }

  // A new VJP function with one entry per argument: a Ref (accumulate into it with +=;
  // the result slot holds GradRef), GradValue{} (return it; default) or DontWant{} (skip
  // it; the slot holds DidntWant). Required for Ref-typed arguments.
  template <class... E>
  VjpFunction with_refs(const E&... entries) const {
    return VjpFunction(core_.with_refs(std::vector<GradEntry>{GradEntry(entries)...}));
  }
  VjpFunction with_refs(std::vector<GradEntry> entries) const {
    return VjpFunction(core_.with_refs(std::move(entries)));
  }

 private:
  flat::Vjp core_;
};

// vjp(f, args...) -> (f(args...), f_vjp). The forward pass runs now (mutating Ref
// arguments), or is staged as one `jit` eqn inside a trace; f_vjp stages another.
template <class F, class... A>
auto vjp(F f, const A&... args) {
  static_assert((tree::is_leaf_v<A> && ...),
                "vjp: each argument must be one Value (or C++ scalar or Array) or one Ref");
  using R = tree::traced_result_t<F, A...>;
  static_assert(!std::is_void_v<R>, "vjp: the function must return something");
  std::vector<Operand> operands = tree::flatten_args(args...);
  auto [outs, core] = flat::Vjp::create(
      [&](const std::vector<Operand>& in) { return tree::call_flat(f, in, args...); }, operands,
      function_name(f));
  size_t pos = 0;
  return std::pair<tree::result_t<R>, VjpFunction<sizeof...(A)>>(tree::unflatten_out<R>(outs, pos),
                                                                 VjpFunction<sizeof...(A)>(core));
}

// grad / value_and_grad of a function with one float scalar output. Arguments not in
// argnums are not differentiated (Ref arguments among them are plumbing: only
// stop_gradient'ed values may be written into them, E1). A Ref argument in argnums is an
// error (E2): use vjp and with_refs.
//
// Arguments may be pytrees (std::vector<Value>, std::tuple of leaves and pytrees), as JAX's
// params. The argument positions to differentiate are given either at compile time, and the
// gradients come back shaped like their arguments:
//   grad(f)(params, x)           // d f / d params, a std::vector<Value> if params is one
//   grad<0, 2>(f)(w, x, b)       // std::tuple of the gradients of w and b
// or at run time, and the gradients come back as Values, one per leaf:
//   grad(f, 1)(x, y)             // a Value (argument 1 must be one leaf)
//   grad(f, {0, 2})(w, x, b)     // std::vector<Value>, the leaves of w, then of b
template <class F, bool kMulti, bool kWithValue, int... K>
class GradFunction {
 public:
  GradFunction(F f, std::vector<int> argnums) : f_(std::move(f)), argnums_(std::move(argnums)) {}

  template <class... A>
  auto operator()(const A&... args) const {
    std::vector<Operand> operands;
    std::vector<size_t> first;  // each argument's first leaf, then the leaf count
    auto flatten = [&](const auto& a) {
      first.push_back(operands.size());
      tree::flatten_arg(a, operands);
    };
    (flatten(args), ...);
    first.push_back(operands.size());
    const std::string name = function_name(f_);
    const std::vector<int> leaves = flat::leaf_argnums(argnums_, first, name);
    const F& f = f_;
    std::vector<Operand> outs = flat::grad(
        [&](const std::vector<Operand>& in) {
          F g = f;
          return tree::call_flat(g, in, args...);
        },
        operands, leaves, name);
    Value value = std::get<Value>(outs[0]);
    std::vector<Operand> grads(outs.begin() + 1, outs.end());
    if constexpr (sizeof...(K) > 0) {
      // Shaped like the arguments they differentiate.
      auto originals = std::forward_as_tuple(args...);
      size_t pos = 0;
      auto shaped = [&]() {
        if constexpr (sizeof...(K) == 1)
          return tree::unflatten_arg(grads, pos, std::get<K...>(originals));
        else
          return std::tuple{tree::unflatten_arg(grads, pos, std::get<K>(originals))...};
      }();
      if constexpr (kWithValue)
        return std::pair{value, std::move(shaped)};
      else
        return shaped;
    } else {
      std::vector<Value> values;
      for (const Operand& g : grads) values.push_back(std::get<Value>(g));
      if constexpr (kMulti) {
        if constexpr (kWithValue)
          return std::pair<Value, std::vector<Value>>(value, values);
        else
          return values;
      } else {
        flat::check_one_leaf(argnums_.at(0), values.size(), name);
        if constexpr (kWithValue)
          return std::pair<Value, Value>(value, values.at(0));
        else
          return values.at(0);
      }
    }
  }

  std::string name() const { return "grad_" + function_name(f_); }

 private:
  F f_;
  std::vector<int> argnums_;
};

// jax.grad(f): with respect to argument 0, shaped like it.
template <class F>
GradFunction<F, false, false, 0> grad(F f) {
  return GradFunction<F, false, false, 0>(std::move(f), {0});
}
// jax.grad(f, argnums=(K...)) with the positions known at compile time: the gradients are
// shaped like their arguments (one, or a std::tuple of them).
template <int... K, class F>
requires(sizeof...(K) > 0) GradFunction<F, (sizeof...(K) > 1), false, K...> grad(F f) {
  return GradFunction<F, (sizeof...(K) > 1), false, K...>(std::move(f), {K...});
}
template <class F>
GradFunction<F, false, false> grad(F f, int argnum) {
  return GradFunction<F, false, false>(std::move(f), {argnum});
}
template <class F>
GradFunction<F, true, false> grad(F f, std::vector<int> argnums) {
  return GradFunction<F, true, false>(std::move(f), std::move(argnums));
}
template <class F>
GradFunction<F, false, true, 0> value_and_grad(F f) {
  return GradFunction<F, false, true, 0>(std::move(f), {0});
}
template <int... K, class F>
requires(sizeof...(K) > 0) GradFunction<F, (sizeof...(K) > 1), true, K...> value_and_grad(F f) {
  return GradFunction<F, (sizeof...(K) > 1), true, K...>(std::move(f), {K...});
}
template <class F>
GradFunction<F, false, true> value_and_grad(F f, int argnum) {
  return GradFunction<F, false, true>(std::move(f), {argnum});
}
template <class F>
GradFunction<F, true, true> value_and_grad(F f, std::vector<int> argnums) {
  return GradFunction<F, true, true>(std::move(f), std::move(argnums));
}

// jvp(f, std::tuple{primals...}, std::tuple{tangents...}) -> (f(primals), J tangents).
// A Ref primal takes a Ref tangent; both are updated in place.
template <class F, class... P, class... T>
auto jvp(F f, const std::tuple<P...>& primals, const std::tuple<T...>& tangents) {
  static_assert(sizeof...(P) == sizeof...(T), "jvp: give one tangent per primal");
  static_assert((tree::is_leaf_v<P> && ...),
                "jvp: each primal must be one Value (or C++ scalar or Array) or one Ref");
  using R = tree::traced_result_t<F, P...>;
  static_assert(!std::is_void_v<R>, "jvp: the function must return something");
  std::vector<Operand> flat_p =
      std::apply([](const auto&... xs) { return tree::flatten_args(xs...); }, primals);
  std::vector<Operand> flat_t =
      std::apply([](const auto&... xs) { return tree::flatten_args(xs...); }, tangents);
  std::vector<Operand> outs = flat::jvp(
      [&](const std::vector<Operand>& in) {
        return std::apply([&](const auto&... ps) { return tree::call_flat(f, in, ps...); },
                          primals);
      },
      flat_p, flat_t, function_name(f));
  size_t pos = 0;
  auto y = tree::unflatten_out<R>(outs, pos);
  std::vector<Operand> touts(outs.begin() + static_cast<long>(pos), outs.end());
  size_t tpos = 0;
  auto y_dot = tree::unflatten_out<R>(touts, tpos);
  return std::pair<tree::result_t<R>, tree::result_t<R>>(std::move(y), std::move(y_dot));
}

// The linear function linearize returns: tangents in, output tangents out, evaluated
// from residuals saved by the forward pass (never re-running it).
template <class R>
class LinearFunction {
 public:
  explicit LinearFunction(flat::LinearMap core) : core_(std::move(core)) {}
  // One tangent per argument of f (a Ref tangent for a Ref argument).
  template <class... T>
  tree::result_t<R> operator()(const T&... tangents) const {
    std::vector<Operand> outs = core_.apply(tree::flatten_args(tangents...));
    size_t pos = 0;
    return tree::unflatten_out<R>(outs, pos);
  }

 private:
  flat::LinearMap core_;
};

// linearize(f, args...) -> (f(args...), f_lin): runs the forward pass now.
template <class F, class... A>
auto linearize(F f, const A&... args) {
  static_assert((tree::is_leaf_v<A> && ...),
                "linearize: each argument must be one Value (or C++ scalar or Array) or one Ref");
  using R = tree::traced_result_t<F, A...>;
  static_assert(!std::is_void_v<R>, "linearize: the function must return something");
  std::vector<Operand> operands = tree::flatten_args(args...);
  auto [outs, core] = flat::LinearMap::create(
      [&](const std::vector<Operand>& in) { return tree::call_flat(f, in, args...); }, operands,
      function_name(f));
  size_t pos = 0;
  return std::pair<tree::result_t<R>, LinearFunction<R>>(tree::unflatten_out<R>(outs, pos),
                                                         LinearFunction<R>(core));
}

}  // namespace refjit
