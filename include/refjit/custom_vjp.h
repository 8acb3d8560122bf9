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
//
// A bwd rule may instead add the cotangents itself (JAX's ref-aware rules, vjp_bwd with
// accumulators): it returns void and takes, after the residuals and cotangents, one GradAccum
// per argument of f.
//
//   auto embed = custom_vjp(
//       [](Value table, Value i) { return table.at(i).get(); },
//       [](Value table, Value i) { return std::tuple{table.at(i).get(), i}; },
//       [](Value i, Value g, GradAccum table_bar, GradAccum) { table_bar.add(i, g); });
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

// The gradient accumulator of one argument of a custom_vjp function, handed to an
// accumulating bwd rule: the rule adds the argument's cotangent into it instead of returning
// it. Contributions go straight into the gradient's buffer, so an indexed add costs the size
// of what is added (no dense zeros + add). For an argument whose gradient is not wanted the
// contributions are dropped.
class GradAccum {
 public:
  explicit GradAccum(Ref ref) : ref_(std::move(ref)) {}
  // add(g): acc += g, the whole cotangent; add(idx..., g): acc[idx...] += g (as Ref::add).
  template <class... A>
  void add(const A&... args) const {
    ref_.add(args...);
  }
  const GradAccum& operator+=(const Value& g) const {
    ref_ += g;
    return *this;
  }
  // The cotangent's type: the argument's array type (a Ref argument's inner type).
  const ArrayType& type() const { return ref_.type(); }

 private:
  Ref ref_;
};

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
    constexpr size_t n = std::tuple_size_v<BwdParams>;
    auto call_f = [&](const std::vector<Operand>& in) { return tree::call_flat(f, in, args...); };
    auto call_fwd = [&](const std::vector<Operand>& in) {
      return tree::call_flat(fwd, in, args...);
    };
    std::vector<Operand> outs;
    if constexpr (std::is_void_v<typename detail::Signature<Bwd>::result>) {
      static_assert(detail::ends_with_accums<BwdParams, sizeof...(A)>(
                        std::make_index_sequence<sizeof...(A)>{}),
                    "custom_vjp: a bwd rule returning void adds the cotangents itself; its last "
                    "parameters are one GradAccum per argument");
      outs = detail::custom_vjp_call_accumulating(
          call_f, call_fwd,
          [&](const std::vector<Operand>& in) {
            if (in.size() != n)
              throw Error(fmt::format(
                  "custom_vjp `{}`: bwd takes {} parameters but receives {} (the residuals "
                  "fwd returns, one cotangent per output, then {} accumulators)",
                  name_, n, in.size(), sizeof...(A)));
            std::apply(bwd, detail::operands_as<BwdParams>(in, std::make_index_sequence<n>{}));
          },
          flat, name_);
    } else {
      outs = detail::custom_vjp_call(
          call_f, call_fwd,
          [&](const std::vector<Operand>& in) {
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
    }
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
