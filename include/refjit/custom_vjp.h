// custom_vjp(f, fwd, bwd): a function whose reverse-mode derivative is given by the user
// (REFS.md 2.6). Calling it emits one `custom_vjp_call` eqn (call_jaxpr = f, fwd_jaxpr,
// bwd_jaxpr, num_res), or evaluates f outside a trace; reverse mode runs fwd then bwd,
// forward mode differentiates f.
//
//   auto stash_grads = custom_vjp(
//       [](Ref grads_ref, Value x) { return x; },                        // f
//       [](Ref grads_ref, Value x) { return std::tuple{x, grads_ref}; },  // fwd: out, residuals
//       [](Ref grads_ref, Value g) {                                      // bwd: residuals, ct
//         grads_ref.set(g);
//         return std::tuple{std::nullopt, g};                             // one per argument
//       });
//
// fwd returns f's outputs then the residuals. A residual may be a Ref only if it is one of
// fwd's own Ref arguments: that shares the ref with bwd (E10 otherwise). bwd takes the
// residuals then one cotangent per output, as separate parameters of type Value or Ref
// (so it must be a lambda or function with a fixed signature), and returns one cotangent
// per argument of f: a Value, or std::nullopt for "none" (a plumbing ref, an integer
// argument); a single Value, a std::tuple / std::pair, or a std::vector of them.
// f, fwd and bwd are traced at each call with the actual argument types; they must not
// close over arrays or refs (pass those as arguments); closed-over C++ scalars are fine.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "refjit/autodiff.h"
#include "refjit/detail/custom_vjp.h"
#include "refjit/ir/error.h"
#include "refjit/trace.h"
#include "refjit/tree.h"

namespace refjit {

template <class F, class Fwd, class Bwd>
class CustomVjp {
 public:
  CustomVjp(F f, Fwd fwd, Bwd bwd, std::string name)
      : f_(std::move(f)), fwd_(std::move(fwd)), bwd_(std::move(bwd)), name_(std::move(name)) {}

  template <class... A>
  auto operator()(const A&... args) const {
    static_assert((detail::is_leaf_arg_v<A> && ...),
                  "custom_vjp: each argument must be one Value (or C++ scalar or Array) or one "
                  "Ref");
    using R = detail::result_of_traced_t<F, A...>;
    static_assert(!std::is_void_v<R>, "custom_vjp: the function must return something");
    using BwdParams = typename detail::Signature<Bwd>::params;
    std::vector<Operand> flat = detail::flatten_all(args...);
    F f = f_;
    Fwd fwd = fwd_;
    Bwd bwd = bwd_;
    std::vector<Operand> outs = detail::custom_vjp_call(
        [&](const std::vector<Operand>& in) { return tree::call_flat(f, in, args...); },
        [&](const std::vector<Operand>& in) { return tree::call_flat(fwd, in, args...); },
        [&](const std::vector<Operand>& in) {
          constexpr size_t n = std::tuple_size_v<BwdParams>;
          if (in.size() != n)
            throw Error(
                fmt::format("custom_vjp `{}`: bwd takes {} parameters but receives {} "
                            "(the residuals fwd returns, then one cotangent per output)",
                            name_, n, in.size()));
          BwdParams ps = detail::operands_as<BwdParams>(in, std::make_index_sequence<n>{});
          std::vector<std::optional<Value>> cts;
          detail::flatten_bwd_out(std::apply(bwd, ps), cts);
          return cts;
        },
        flat, name_);
    size_t pos = 0;
    return tree::unflatten_out<R>(outs, pos);
  }

  const std::string& name() const { return name_; }

 private:
  F f_;
  Fwd fwd_;
  Bwd bwd_;
  std::string name_;
};

template <class F, class Fwd, class Bwd>
CustomVjp<F, Fwd, Bwd> custom_vjp(F f, Fwd fwd, Bwd bwd, std::string name = "custom_vjp") {
  return CustomVjp<F, Fwd, Bwd>(std::move(f), std::move(fwd), std::move(bwd), std::move(name));
}

}  // namespace refjit
