// Loops and branches with refs (REFS.md 4): scan, foreach, fori_loop, while_loop, cond,
// switch_.
//
//   auto [carry, ys] = scan([&](Value c, Value x) { return std::pair{c + x, c * x}; },
//                           init, xs);                          // lax.scan
//   auto [c2, ys2] = scan(body, init, std::tuple{xs, r}, {.reverse = true});
//   Value ys3 = foreach(xs)([&](Value x) { r[...] += x; return x * 2; });
//   Value s = fori_loop(0, 10, [](Value i, Value acc) { return acc + i; }, 0);
//   Value p = while_loop([](Value v) { return v < 100.0f; }, [](Value v) { return v * 2; }, x);
//   Value y = cond(x > 0, [](Value x) { return x; }, [](Value x) { return -x; }, x);
//
// Each call traces its body once (trace.h) and binds one `scan` (or `cond`) eqn: outside any
// trace it runs now on the interpreter, inside make_jaxpr/jit/vjp it is staged. The body
// sees traced arguments, whatever it is called with.
//
// Structures (the C++ stand-in for JAX's pytrees, see tree.h): a carry, an xs or a body
// output is a Value (or a C++ scalar / Array), a std::vector<Value>, a std::tuple / std::pair
// of those, or `nothing` (std::tuple<>{}, JAX's None) for no carry, no xs or no y. xs may also hold
// Refs: a Ref among xs is scanned over, iteration i sees a Ref view of its row i (writes land in
// that row).
//
// Refs: the body may read, write and += refs it closes over (they become Ref-typed consts
// of the scan eqn, passed by reference) and refs it scans over; refs it creates with
// new_ref live for one iteration. Effects run exactly once per iteration, in order.
// Errors (RefError): a Ref as a carry, or returned by a body (E9, naming where the ref came
// from); the same ref twice among xs or operands (E7); a ref both closed over and passed
// (E8). A carry whose type changes in the body is a TypeError (a C++ scalar init, which is
// weakly typed, takes the dtype the body gives it).
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
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

// JAX's None where a loop takes or returns a structure: no carry, no xs, no y.
//   scan([&](auto, Value x) { r[ellipsis] += x; return std::pair{nothing, nothing}; }, nothing,
//   xs);
inline constexpr std::tuple<> nothing{};

struct ScanOptions {
  // Number of iterations; needed when xs is empty, checked against xs otherwise.
  std::optional<int64_t> length;
  // Iterate from the last row to the first (ys still line up with xs).
  bool reverse = false;
  // The eqn's `unroll` param (a hint for backends).
  int64_t unroll = 1;
};

// lax.scan: for each row x of xs (in order, or reversed), (carry, y) = body(carry, x);
// returns the final carry and the ys stacked along a new leading dim of size length.
// body(carry, x) returns std::pair{new_carry, y} (or a 2-tuple); new_carry has the structure
// and types of init.
// The flat form of the loops and conditionals below: functions of flat operand lists, which
// the templates call once they have flattened their arguments.
namespace flat {

// Traces `body` (flat: carry leaves then row leaves -> carry leaves then y leaves) and binds
// one scan eqn over consts (what the body closed over), `carry` and `xs`. Returns the final
// carry leaves then the stacked ys. `what` names the loop in messages ("scan", "foreach").
std::vector<Operand> scan(const TraceBody& body, const std::vector<Operand>& carry,
                          const std::vector<Operand>& xs, const ScanOptions& options,
                          const std::string& what);

// Traces `cond` (carry leaves -> one bool scalar) and `body` (carry leaves -> carry leaves)
// and binds one while eqn over the consts each closed over and `carry`. Returns the final
// carry leaves.
std::vector<Operand> while_loop(const TraceBody& cond, const TraceBody& body,
                                const std::vector<Operand>& carry, const std::string& what);

// Traces each branch on the operands' types and binds one cond eqn; `index` is an integer
// or bool scalar (bool false = branch 0), clamped into range.
std::vector<Operand> cond(const Value& index, const std::vector<TraceBody>& branches,
                          const std::vector<Operand>& operands, const std::string& what);

// The predicate of cond() as a cond index: bool stays bool, an integer p becomes p != 0.
Value cond_index_of_pred(const Value& pred);

}  // namespace flat

template <class Body, class Carry, class Xs>
auto scan(Body body, const Carry& init, const Xs& xs, ScanOptions options = {}) {
  using R =
      std::remove_cvref_t<std::invoke_result_t<Body&, tree::traced_t<Carry>&, tree::traced_t<Xs>&>>;
  static_assert(tree::is_pair_v<R>,
                "scan: the body must return std::pair{new_carry, y} (use std::tuple{} for no y)");
  using CarryOut = std::remove_cvref_t<std::tuple_element_t<0, R>>;
  using YOut = std::remove_cvref_t<std::tuple_element_t<1, R>>;
  std::vector<Operand> flat_carry, flat_xs;
  tree::flatten_arg(init, flat_carry);
  tree::flatten_arg(xs, flat_xs);
  const size_t n_carry = flat_carry.size();
  std::vector<Operand> outs = flat::scan(
      [&](const std::vector<Operand>& in) {
        size_t pos = 0;
        tree::traced_t<Carry> c = tree::unflatten_arg(in, pos, init);
        tree::traced_t<Xs> x = tree::unflatten_arg(in, pos, xs);
        R r = body(c, x);
        std::vector<Operand> out;
        tree::flatten_out(std::get<0>(r), out);
        if (const size_t got = out.size(); got != n_carry)
          throw TypeError(
              fmt::format("scan: the body returns a carry of {} leaves but the "
                          "initial carry has {}; return the new carry with the "
                          "same structure as init",
                          got, n_carry));
        tree::flatten_out(std::get<1>(r), out);
        return out;
      },
      flat_carry, flat_xs, options, "scan");
  return std::pair<tree::result_t<CarryOut>, tree::result_t<YOut>>(
      tree::unflatten_range<CarryOut>(outs, 0, n_carry),
      tree::unflatten_range<YOut>(outs, n_carry, outs.size()));
}

// foreach(xs...)(body): a scan without a carry (REFS.md 4.1). body(x...) gets one row of
// each xs (a Ref view for a Ref) and may read and write closed-over refs at any index;
// the result is body's outputs stacked (nothing for a void body). Runs now, or stages a
// scan inside a trace.
template <class... Xs>
class Foreach {
 public:
  explicit Foreach(const Xs&... xs) : xs_(xs...) {}

  template <class Body>
  auto operator()(Body body) const {
    using Y = std::invoke_result_t<Body&, tree::traced_t<Xs>&...>;
    auto step = [&](std::tuple<>, std::tuple<tree::traced_t<Xs>...>& elts) {
      if constexpr (std::is_void_v<Y>) {
        std::apply(body, elts);
        return std::pair{std::tuple<>{}, std::tuple<>{}};
      } else {
        return std::pair{std::tuple<>{}, std::apply(body, elts)};
      }
    };
    std::vector<Operand> flat_xs;
    tree::flatten_arg(xs_, flat_xs);
    std::vector<Operand> outs = flat::scan(
        [&](const std::vector<Operand>& in) {
          size_t pos = 0;
          std::tuple<tree::traced_t<Xs>...> elts = tree::unflatten_arg(in, pos, xs_);
          auto r = step(std::tuple<>{}, elts);
          std::vector<Operand> out;
          tree::flatten_out(r.second, out);
          return out;
        },
        {}, flat_xs, {}, "foreach");
    if constexpr (!std::is_void_v<Y>) return tree::unflatten_range<Y>(outs, 0, outs.size());
  }

 private:
  std::tuple<Xs...> xs_;
};

template <class... Xs>
Foreach<Xs...> foreach (const Xs&... xs) {
  static_assert(sizeof...(Xs) >= 1, "foreach needs at least one array or ref to loop over");
  return Foreach<Xs...>(xs...);
}

// lax.fori_loop with static bounds: carry = body(i, carry) for i = lo, ..., hi - 1 (an i32
// scalar), as a scan of hi - lo iterations whose carry is (i, carry).
template <class Body, class Carry>
auto fori_loop(int64_t lo, int64_t hi, Body body, const Carry& init) {
  using C = tree::traced_t<Carry>;
  using R = std::remove_cvref_t<std::invoke_result_t<Body&, Value, C&>>;
  ScanOptions options;
  options.length = hi > lo ? hi - lo : 0;
  auto [carry, ys] = scan(
      [&](const std::tuple<Value, C>& ic, std::tuple<>) {
        C c = std::get<1>(ic);
        Value i = std::get<0>(ic);
        R next = body(i, c);
        return std::pair{std::tuple<Value, R>{i + 1, next}, std::tuple<>{}};
      },
      std::tuple<Value, Carry>{Value::scalar(DType::i32, static_cast<double>(lo)), init},
      std::tuple<>{}, options);
  return std::get<1>(carry);
}

// lax.while_loop: carry = body(carry) as long as cond(carry) holds; cond returns a bool
// scalar computed from the (traced) carry, so the number of iterations is known only when it
// runs. Both functions may read refs they close over, and body may write them. Forward mode
// (jvp, linearize's primal pass) differentiates it; reverse mode is refused, as in JAX: its
// trip count is not known when the backward pass is built (write the loop as scan or
// fori_loop with static bounds).
template <class CondFn, class BodyFn, class Carry>
auto while_loop(CondFn cond_fn, BodyFn body_fn, const Carry& init) {
  using C = tree::traced_t<Carry>;
  using R = std::remove_cvref_t<std::invoke_result_t<BodyFn&, C&>>;
  std::vector<Operand> operands;
  tree::flatten_arg(init, operands);
  auto traced = [&](auto& fn) -> TraceBody {
    return [&](const std::vector<Operand>& in) {
      size_t pos = 0;
      C c = tree::unflatten_arg(in, pos, init);
      std::vector<Operand> out;
      tree::flatten_out(fn(c), out);
      return out;
    };
  };
  std::vector<Operand> outs =
      flat::while_loop(traced(cond_fn), traced(body_fn), operands, "while_loop");
  return tree::unflatten_range<R>(outs, 0, outs.size());
}

// lax.cond: true_fn(operands...) if pred, else false_fn(operands...); both return the same
// types. pred is a bool or integer scalar (nonzero is true), possibly traced. The branches
// may read and write refs they close over or receive among operands.
template <class TrueFn, class FalseFn, class... Ops>
auto cond(const Value& pred, TrueFn true_fn, FalseFn false_fn, const Ops&... operands) {
  using R = std::invoke_result_t<TrueFn&, tree::traced_t<Ops>&...>;
  std::vector<Operand> leaves;
  (tree::flatten_arg(operands, leaves), ...);
  auto branch = [&](auto& fn) -> TraceBody {
    return [&](const std::vector<Operand>& in) {
      size_t pos = 0;
      std::tuple<tree::traced_t<Ops>...> args{tree::unflatten_arg(in, pos, operands)...};
      std::vector<Operand> out;
      if constexpr (!std::is_void_v<decltype(std::apply(fn, args))>)
        tree::flatten_out(std::apply(fn, args), out);
      else
        std::apply(fn, args);
      return out;
    };
  };
  std::vector<Operand> outs = flat::cond(flat::cond_index_of_pred(pred),
                                         {branch(false_fn), branch(true_fn)}, leaves, "cond");
  if constexpr (!std::is_void_v<R>) return tree::unflatten_range<R>(outs, 0, outs.size());
}

// lax.switch: branches[index](operands...), index an integer scalar clamped into
// [0, number of branches - 1]. The branches are given as a tuple of callables:
//   switch_(i, std::tuple{f0, f1, f2}, x)
template <class... Fns, class... Ops>
auto switch_(const Value& index, const std::tuple<Fns...>& branches, const Ops&... operands) {
  static_assert(sizeof...(Fns) >= 1, "switch_ needs at least one branch");
  using F0 = std::tuple_element_t<0, std::tuple<Fns...>>;
  using R = std::invoke_result_t<const F0&, tree::traced_t<Ops>&...>;
  std::vector<Operand> leaves;
  (tree::flatten_arg(operands, leaves), ...);
  std::vector<TraceBody> bodies;
  std::apply(
      [&](const auto&... fns) {
        (bodies.push_back([&](const std::vector<Operand>& in) {
          size_t pos = 0;
          std::tuple<tree::traced_t<Ops>...> args{tree::unflatten_arg(in, pos, operands)...};
          std::vector<Operand> out;
          if constexpr (!std::is_void_v<decltype(std::apply(fns, args))>)
            tree::flatten_out(std::apply(fns, args), out);
          else
            std::apply(fns, args);
          return out;
        }),
         ...);
      },
      branches);
  std::vector<Operand> outs = flat::cond(index, bodies, leaves, "switch_");
  if constexpr (!std::is_void_v<R>) return tree::unflatten_range<R>(outs, 0, outs.size());
}

}  // namespace refjit
