// Implementation details of refjit/loops.h that its templates need. Not part of the API: names here
// may change at any time.
#pragma once

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "refjit/trace.h"
#include "refjit/tree.h"

namespace refjit {

struct ScanOptions;  // refjit/loops.h

namespace detail {

// Traces `body` (flat: carry leaves then row leaves -> carry leaves then y leaves) and binds
// one scan eqn over consts (what the body closed over), `carry` and `xs`. Returns the final
// carry leaves then the stacked ys. `what` names the loop in messages ("scan", "foreach").
std::vector<Operand> scan_call(const TraceBody& body, const std::vector<Operand>& carry,
                               const std::vector<Operand>& xs, const ScanOptions& options,
                               const std::string& what);

// Traces `cond` (carry leaves -> one bool scalar) and `body` (carry leaves -> carry leaves)
// and binds one while eqn over the consts each closed over and `carry`. Returns the final
// carry leaves.
std::vector<Operand> while_call(const TraceBody& cond, const TraceBody& body,
                                const std::vector<Operand>& carry, const std::string& what);

// Traces each branch on the operands' types and binds one cond eqn; `index` is an integer
// or bool scalar (bool false = branch 0), clamped into range.
std::vector<Operand> cond_call(const Value& index, const std::vector<TraceBody>& branches,
                               const std::vector<Operand>& operands, const std::string& what);

// The predicate of cond() as a cond index: bool stays bool, an integer p becomes p != 0.
Value cond_index_of_pred(const Value& pred);

template <class R>
struct IsPairLike : std::false_type {};
template <class A, class B>
struct IsPairLike<std::pair<A, B>> : std::true_type {};
template <class A, class B>
struct IsPairLike<std::tuple<A, B>> : std::true_type {};

template <class R>
tree::result_t<R> unflatten_part(const std::vector<Operand>& outs, size_t begin, size_t end) {
  std::vector<Operand> part(outs.begin() + static_cast<long>(begin),
                            outs.begin() + static_cast<long>(end));
  size_t pos = 0;
  return tree::unflatten_out<R>(part, pos);
}

// Flattens a body result, counting how many leaves came from `r`.
template <class R>
size_t flatten_counted(const R& r, std::vector<Operand>& out) {
  const size_t before = out.size();
  tree::flatten_out(r, out);
  return out.size() - before;
}

template <class Body, class Carry, class Xs>
using scan_body_result_t =
    std::remove_cvref_t<std::invoke_result_t<Body&, tree::traced_t<Carry>&, tree::traced_t<Xs>&>>;

}  // namespace detail

}  // namespace refjit
