// Flattening C++ arguments and results to Operands and back (JAX's pytrees, for the few
// structures a C++ function takes and returns).
//
// Arguments: Value (or anything that converts to one: C++ scalars, Array) -> one array
// leaf; Ref -> one ref leaf; std::vector<Value> -> one leaf per element; std::tuple of
// those -> their leaves in order.
// Results: void, Value, Ref (an error when traced: E9), std::vector<Value>,
// std::pair / std::tuple of Values.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "refjit/ir/error.h"
#include "refjit/trace.h"

namespace refjit::tree {

// The type a traced function receives for an argument of type A.
template <class A>
struct Traced {
  using type = Value;
};
template <>
struct Traced<Ref> {
  using type = Ref;
};
template <class T>
struct Traced<std::vector<T>> {
  using type = std::vector<Value>;
};
template <class... T>
struct Traced<std::tuple<T...>> {
  using type = std::tuple<typename Traced<T>::type...>;
};
template <class A>
using traced_t = typename Traced<std::remove_cvref_t<A>>::type;

// Whether A is one leaf: a Value (or anything that converts to one) or a Ref. Differentiated
// functions take one leaf per argument.
template <class A>
constexpr bool is_leaf_v =
    std::is_same_v<std::remove_cvref_t<A>, Ref> || std::is_constructible_v<Value, A>;

template <class A>
struct IsTupleArg : std::false_type {};
template <class... T>
struct IsTupleArg<std::tuple<T...>> : std::true_type {};

template <class A>
void flatten_arg(const A& a, std::vector<Operand>& out) {
  using T = std::remove_cvref_t<A>;
  if constexpr (std::is_same_v<T, Ref>) {
    out.emplace_back(a);
  } else if constexpr (IsTupleArg<T>::value) {
    std::apply([&](const auto&... xs) { (flatten_arg(xs, out), ...); }, a);
  } else if constexpr (requires {
                         typename T::value_type;
                         a.size();
                       } &&
                       !std::is_same_v<T, Array>) {
    for (const auto& x : a) out.emplace_back(Value(x));
  } else {
    out.emplace_back(Value(a));
  }
}

// The leaves of all of `xs`, in order.
template <class... A>
std::vector<Operand> flatten_args(const A&... xs) {
  std::vector<Operand> flat;
  (flatten_arg(xs, flat), ...);
  return flat;
}

// Rebuilds an argument of type traced_t<A> from flat operands; `original` (the caller's
// argument) gives the leaf count of vector arguments.
template <class A>
traced_t<A> unflatten_arg(const std::vector<Operand>& in, size_t& pos, const A& original) {
  using T = traced_t<A>;
  if constexpr (IsTupleArg<std::remove_cvref_t<A>>::value) {
    // Braced initialisation evaluates left to right.
    return std::apply([&](const auto&... xs) { return T{unflatten_arg(in, pos, xs)...}; },
                      original);
  } else if constexpr (std::is_same_v<T, Ref>) {
    return std::get<Ref>(in.at(pos++));
  } else if constexpr (std::is_same_v<T, std::vector<Value>>) {
    std::vector<Value> xs;
    for (size_t k = 0; k < original.size(); ++k) xs.push_back(std::get<Value>(in.at(pos++)));
    return xs;
  } else {
    return std::get<Value>(in.at(pos++));
  }
}

template <class R>
struct IsTuple : std::false_type {};
template <class... T>
struct IsTuple<std::tuple<T...>> : std::true_type {};
template <class A, class B>
struct IsTuple<std::pair<A, B>> : std::true_type {};

// A std::pair or a two-element std::tuple (what a scan body returns).
template <class R>
constexpr bool is_pair_v = false;
template <class A, class B>
constexpr bool is_pair_v<std::pair<A, B>> = true;
template <class A, class B>
constexpr bool is_pair_v<std::tuple<A, B>> = true;

template <class R>
void flatten_out(const R& r, std::vector<Operand>& out) {
  using T = std::remove_cvref_t<R>;
  if constexpr (std::is_same_v<T, Ref>) {
    out.emplace_back(r);
  } else if constexpr (std::is_same_v<T, std::vector<Value>>) {
    for (const Value& x : r) out.emplace_back(x);
  } else if constexpr (IsTuple<T>::value) {
    std::apply([&](const auto&... xs) { (flatten_out(xs, out), ...); }, r);
  } else {
    out.emplace_back(Value(r));
  }
}

// The result type a caller gets back for a function returning R.
template <class R>
struct Result {
  using type = Value;
};
template <>
struct Result<void> {
  using type = void;
};
template <>
struct Result<Ref> {
  using type = Ref;
};
template <>
struct Result<std::vector<Value>> {
  using type = std::vector<Value>;
};
template <class A, class B>
struct Result<std::pair<A, B>> {
  using type = std::pair<typename Result<A>::type, typename Result<B>::type>;
};
template <class... T>
struct Result<std::tuple<T...>> {
  using type = std::tuple<typename Result<T>::type...>;
};
template <class R>
using result_t = typename Result<std::remove_cvref_t<R>>::type;

template <class T, size_t... K>
result_t<T> unflatten_tuple(const std::vector<Operand>& outs, size_t& pos,
                            std::index_sequence<K...>);

template <class R>
result_t<R> unflatten_out(const std::vector<Operand>& outs, size_t& pos) {
  using T = std::remove_cvref_t<R>;
  if constexpr (std::is_same_v<T, Ref>) {
    return std::get<Ref>(outs.at(pos++));
  } else if constexpr (std::is_same_v<T, std::vector<Value>>) {
    std::vector<Value> xs;
    while (pos < outs.size()) xs.push_back(std::get<Value>(outs[pos++]));
    return xs;
  } else if constexpr (IsTuple<T>::value) {
    return unflatten_tuple<T>(outs, pos, std::make_index_sequence<std::tuple_size_v<T>>{});
  } else {
    return std::get<Value>(outs.at(pos++));
  }
}

template <class T, size_t... K>
result_t<T> unflatten_tuple(const std::vector<Operand>& outs, size_t& pos,
                            std::index_sequence<K...>) {
  // Braced initialisation evaluates left to right.
  return result_t<T>{unflatten_out<std::tuple_element_t<K, T>>(outs, pos)...};
}

// The result R of the outputs begin..end of `outs`.
template <class R>
result_t<R> unflatten_range(const std::vector<Operand>& outs, size_t begin, size_t end) {
  std::vector<Operand> part(outs.begin() + static_cast<long>(begin),
                            outs.begin() + static_cast<long>(end));
  size_t pos = 0;
  return unflatten_out<R>(part, pos);
}

// What f returns when called on traced arguments for arguments of types A...
template <class F, class... A>
using traced_result_t =
    decltype(std::apply(std::declval<F&>(), std::declval<std::tuple<traced_t<A>...>&>()));

// What a function f called on traced arguments of types A... returns, rebuilt from its flat
// outputs (nothing for a void f).
template <class F, class... A>
auto unflatten_result(const std::vector<Operand>& outs) {
  using R = traced_result_t<F, A...>;
  if constexpr (std::is_void_v<R>) {
    return;
  } else {
    size_t pos = 0;
    return unflatten_out<R>(outs, pos);
  }
}

// Calls f on traced arguments rebuilt from `in` (shaped like `originals`) and flattens
// what it returns.
template <class F, class... A>
std::vector<Operand> call_flat(F& f, const std::vector<Operand>& in, const A&... originals) {
  [[maybe_unused]] size_t pos = 0;  // unused for a function of no arguments
  std::tuple<traced_t<A>...> args{unflatten_arg<A>(in, pos, originals)...};
  using R = decltype(std::apply(f, args));
  std::vector<Operand> outs;
  if constexpr (std::is_void_v<R>) {
    std::apply(f, args);
  } else {
    flatten_out(std::apply(f, args), outs);
  }
  return outs;
}

}  // namespace refjit::tree
