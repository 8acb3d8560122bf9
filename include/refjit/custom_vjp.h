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
#include "refjit/ir/error.h"
#include "refjit/trace.h"
#include "refjit/tree.h"

namespace refjit {

namespace detail {

using BwdBody =
    std::function<std::vector<std::optional<Value>>(const std::vector<Operand>& res_then_cts)>;

// Traces f, fwd and bwd at the types of `flat` and binds one custom_vjp_call eqn.
std::vector<Operand> custom_vjp_call(const TraceBody& primal, const TraceBody& fwd,
                                     const BwdBody& bwd, const std::vector<Operand>& flat,
                                     const std::string& name);

// The parameter types of a callable with a fixed signature.
template <class F>
struct Signature : Signature<decltype(&F::operator())> {};
template <class C, class R, class... P>
struct Signature<R (C::*)(P...) const> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
};
template <class C, class R, class... P>
struct Signature<R (C::*)(P...)> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
};
template <class R, class... P>
struct Signature<R (*)(P...)> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
};
template <class R, class... P>
struct Signature<R(P...)> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
};

template <class T>
T operand_as(const Operand& x, size_t pos) {
  if constexpr (std::is_same_v<T, Ref>) {
    if (const Ref* r = std::get_if<Ref>(&x)) return *r;
    throw Error(fmt::format("custom_vjp bwd: parameter {} is a Ref but receives a {}", pos,
                            type_of(x).long_str()));
  } else {
    static_assert(std::is_same_v<T, Value>, "custom_vjp bwd parameters must be Value or Ref");
    if (const Value* v = std::get_if<Value>(&x)) return *v;
    throw Error(
        fmt::format("custom_vjp bwd: parameter {} is a Value but receives a {} (a ref "
                    "residual); declare it as Ref",
                    pos, type_of(x).long_str()));
  }
}

template <class Params, size_t... K>
Params operands_as(const std::vector<Operand>& in, std::index_sequence<K...>) {
  return Params{operand_as<std::tuple_element_t<K, Params>>(in[K], K)...};
}

inline void flatten_bwd_out(std::nullopt_t, std::vector<std::optional<Value>>& out) {
  out.emplace_back(std::nullopt);
}
inline void flatten_bwd_out(const std::optional<Value>& v, std::vector<std::optional<Value>>& out) {
  out.push_back(v);
}
inline void flatten_bwd_out(const std::vector<Value>& vs, std::vector<std::optional<Value>>& out) {
  for (const Value& v : vs) out.emplace_back(v);
}
inline void flatten_bwd_out(const std::vector<std::optional<Value>>& vs,
                            std::vector<std::optional<Value>>& out) {
  out.insert(out.end(), vs.begin(), vs.end());
}
template <class T>
requires std::is_constructible_v<Value, T>
void flatten_bwd_out(const T& v, std::vector<std::optional<Value>>& out) {
  out.emplace_back(Value(v));
}
template <class... T>
void flatten_bwd_out(const std::tuple<T...>& t, std::vector<std::optional<Value>>& out) {
  std::apply([&](const auto&... xs) { (flatten_bwd_out(xs, out), ...); }, t);
}
template <class A, class B>
void flatten_bwd_out(const std::pair<A, B>& p, std::vector<std::optional<Value>>& out) {
  flatten_bwd_out(p.first, out);
  flatten_bwd_out(p.second, out);
}

}  // namespace detail

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
