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

// The flat form of custom_vjp: functions of flat operand lists, which CustomVjp calls once it
// has flattened its arguments.
namespace flat {

// A bwd rule on flat operands: residuals then cotangents -> one cotangent per argument
// (nullopt: none).
using BwdBody =
    std::function<std::vector<std::optional<Value>>(const std::vector<Operand>& res_then_cts)>;
// A bwd rule that adds into accumulators: residuals, cotangents, then one accumulator ref per
// argument.
using AccumBwdBody = std::function<void(const std::vector<Operand>& res_cts_accums)>;

// Traces f, fwd and bwd at the types of `flat` and binds one custom_vjp_call eqn.
std::vector<Operand> custom_vjp(const TraceBody& primal, const TraceBody& fwd, const BwdBody& bwd,
                                const std::vector<Operand>& operands, const std::string& name);
// The same with a bwd rule that receives the arguments' gradient accumulators.
std::vector<Operand> custom_vjp_accumulating(const TraceBody& primal, const TraceBody& fwd,
                                             const AccumBwdBody& bwd,
                                             const std::vector<Operand>& operands,
                                             const std::string& name);

}  // namespace flat

// The parameter types and result type of a callable with one fixed signature: a function,
// a function pointer, or an object with one non-template operator() (a lambda whose
// parameters are not `auto`). custom_vjp reads its bwd rule's parameters from it.
template <class F>
struct CallableSignature : CallableSignature<decltype(&F::operator())> {};
template <class C, class R, class... P>
struct CallableSignature<R (C::*)(P...) const> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
  using result = R;
};
template <class C, class R, class... P>
struct CallableSignature<R (C::*)(P...)> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
  using result = R;
};
template <class R, class... P>
struct CallableSignature<R (*)(P...)> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
  using result = R;
};
template <class R, class... P>
struct CallableSignature<R(P...)> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
  using result = R;
};

template <class F, class Fwd, class Bwd>
class CustomVjp {
 public:
  CustomVjp(F f, Fwd fwd, Bwd bwd, std::string name)
      : f_(std::move(f)), fwd_(std::move(fwd)), bwd_(std::move(bwd)), name_(std::move(name)) {}

  template <class... A>
  auto operator()(const A&... args) const {
    static_assert((tree::is_leaf_v<A> && ...),
                  "custom_vjp: each argument must be one Value (or C++ scalar or Array) or one "
                  "Ref");
    using R = tree::traced_result_t<F, A...>;
    static_assert(!std::is_void_v<R>, "custom_vjp: the function must return something");
    using BwdParams = typename CallableSignature<Bwd>::params;
    std::vector<Operand> operands = tree::flatten_args(args...);
    F f = f_;
    Fwd fwd = fwd_;
    Bwd bwd = bwd_;
    constexpr size_t n = std::tuple_size_v<BwdParams>;
    auto call_f = [&](const std::vector<Operand>& in) { return tree::call_flat(f, in, args...); };
    auto call_fwd = [&](const std::vector<Operand>& in) {
      return tree::call_flat(fwd, in, args...);
    };
    std::vector<Operand> outs;
    if constexpr (std::is_void_v<typename CallableSignature<Bwd>::result>) {
      static_assert(
          ends_with_accums<BwdParams, sizeof...(A)>(std::make_index_sequence<sizeof...(A)>{}),
          "custom_vjp: a bwd rule returning void adds the cotangents itself; its last "
          "parameters are one GradAccum per argument");
      outs = flat::custom_vjp_accumulating(
          call_f, call_fwd,
          [&](const std::vector<Operand>& in) {
            if (in.size() != n)
              throw Error(fmt::format(
                  "custom_vjp `{}`: bwd takes {} parameters but receives {} (the residuals "
                  "fwd returns, one cotangent per output, then {} accumulators)",
                  name_, n, in.size(), sizeof...(A)));
            std::apply(bwd, operands_as<BwdParams>(in, std::make_index_sequence<n>{}));
          },
          operands, name_);
    } else {
      outs = flat::custom_vjp(
          call_f, call_fwd,
          [&](const std::vector<Operand>& in) {
            if (in.size() != n)
              throw Error(
                  fmt::format("custom_vjp `{}`: bwd takes {} parameters but receives {} "
                              "(the residuals fwd returns, then one cotangent per output)",
                              name_, n, in.size()));
            BwdParams ps = operands_as<BwdParams>(in, std::make_index_sequence<n>{});
            std::vector<std::optional<Value>> cts;
            flatten_bwd_out(std::apply(bwd, ps), cts);
            return cts;
          },
          operands, name_);
    }
    size_t pos = 0;
    return tree::unflatten_out<R>(outs, pos);
  }

  const std::string& name() const { return name_; }

 private:
  // Whether the last N parameters are GradAccum (an accumulating bwd rule's signature).
  template <class Params, size_t N, size_t... K>
  static constexpr bool ends_with_accums(std::index_sequence<K...>) {
    constexpr size_t n = std::tuple_size_v<Params>;
    if constexpr (n < N) {
      return false;
    } else {
      return (std::is_same_v<std::tuple_element_t<n - N + K, Params>, GradAccum> && ...);
    }
  }

  // Operand `pos` as bwd's parameter type T.
  template <class T>
  static T operand_as(const Operand& x, size_t pos) {
    if constexpr (std::is_same_v<T, GradAccum>) {
      return T(std::get<Ref>(x));  // the accumulators are always refs
    } else if constexpr (std::is_same_v<T, Ref>) {
      if (const Ref* r = std::get_if<Ref>(&x)) return *r;
      throw Error(fmt::format("custom_vjp bwd: parameter {} is a Ref but receives a {}", pos,
                              type_of(x).long_str()));
    } else {
      static_assert(std::is_same_v<T, Value>,
                    "custom_vjp bwd parameters must be Value, Ref or GradAccum");
      if (const Value* v = std::get_if<Value>(&x)) return *v;
      throw Error(
          fmt::format("custom_vjp bwd: parameter {} is a Value but receives a {} (a ref "
                      "residual); declare it as Ref",
                      pos, type_of(x).long_str()));
    }
  }

  template <class Params, size_t... K>
  static Params operands_as(const std::vector<Operand>& in, std::index_sequence<K...>) {
    return Params{operand_as<std::tuple_element_t<K, Params>>(in[K], K)...};
  }

  // What bwd returns, as one optional cotangent per argument.
  static void flatten_bwd_out(std::nullopt_t, std::vector<std::optional<Value>>& out) {
    out.emplace_back(std::nullopt);
  }
  static void flatten_bwd_out(const std::optional<Value>& v,
                              std::vector<std::optional<Value>>& out) {
    out.push_back(v);
  }
  static void flatten_bwd_out(const std::vector<Value>& vs,
                              std::vector<std::optional<Value>>& out) {
    for (const Value& v : vs) out.emplace_back(v);
  }
  static void flatten_bwd_out(const std::vector<std::optional<Value>>& vs,
                              std::vector<std::optional<Value>>& out) {
    out.insert(out.end(), vs.begin(), vs.end());
  }
  template <class T>
  requires std::is_constructible_v<Value, T>
  static void flatten_bwd_out(const T& v, std::vector<std::optional<Value>>& out) {
    out.emplace_back(Value(v));
  }
  template <class... T>
  static void flatten_bwd_out(const std::tuple<T...>& t, std::vector<std::optional<Value>>& out) {
    std::apply([&](const auto&... xs) { (flatten_bwd_out(xs, out), ...); }, t);
  }
  template <class A, class B>
  static void flatten_bwd_out(const std::pair<A, B>& p, std::vector<std::optional<Value>>& out) {
    flatten_bwd_out(p.first, out);
    flatten_bwd_out(p.second, out);
  }

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
