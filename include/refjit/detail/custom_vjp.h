// Implementation details of refjit/custom_vjp.h that its templates need. Not part of the API: names
// here may change at any time.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "refjit/ir/error.h"
#include "refjit/trace.h"
#include "refjit/tree.h"

namespace refjit {

class GradAccum;

namespace detail {

using BwdBody =
    std::function<std::vector<std::optional<Value>>(const std::vector<Operand>& res_then_cts)>;
// A bwd rule that adds into accumulators: residuals, cotangents, then one accumulator ref per
// argument.
using AccumBwdBody = std::function<void(const std::vector<Operand>& res_cts_accums)>;

// Traces f, fwd and bwd at the types of `flat` and binds one custom_vjp_call eqn.
std::vector<Operand> custom_vjp_call(const TraceBody& primal, const TraceBody& fwd,
                                     const BwdBody& bwd, const std::vector<Operand>& flat,
                                     const std::string& name);
// The same with a bwd rule that receives the arguments' gradient accumulators.
std::vector<Operand> custom_vjp_call_accumulating(const TraceBody& primal, const TraceBody& fwd,
                                                  const AccumBwdBody& bwd,
                                                  const std::vector<Operand>& flat,
                                                  const std::string& name);

// The parameter types of a callable with a fixed signature.
template <class F>
struct Signature : Signature<decltype(&F::operator())> {};
template <class C, class R, class... P>
struct Signature<R (C::*)(P...) const> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
  using result = R;
};
template <class C, class R, class... P>
struct Signature<R (C::*)(P...)> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
  using result = R;
};
template <class R, class... P>
struct Signature<R (*)(P...)> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
  using result = R;
};
template <class R, class... P>
struct Signature<R(P...)> {
  using params = std::tuple<std::remove_cvref_t<P>...>;
  using result = R;
};

// Whether the last N parameters are GradAccum (an accumulating bwd rule's signature).
template <class Params, size_t N, size_t... K>
constexpr bool ends_with_accums(std::index_sequence<K...>) {
  constexpr size_t n = std::tuple_size_v<Params>;
  if constexpr (n < N) {
    return false;
  } else {
    return (std::is_same_v<std::tuple_element_t<n - N + K, Params>, GradAccum> && ...);
  }
}

template <class T>
T operand_as(const Operand& x, size_t pos) {
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

}  // namespace refjit
