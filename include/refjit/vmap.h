// vmap: a function written for one example, applied to a batch at once (jax.vmap).
//
//   auto f = [](Value x, Value w) { return dot(w, x); };             // x: [3], w: [2, 3]
//   Value ys = vmap(f, {.in_axes = {0, std::nullopt}})(xs, w);       // xs: [B, 3] -> ys: [B, 2]
//
// `in_axes` has one entry per argument (every leaf of a vector or tuple argument takes its
// argument's axis): the axis of that argument that is the batch, or nullopt for an argument
// shared by the whole batch. Empty means axis 0 for every argument. `out_axes` has one entry
// per output leaf, or one for all (default 0): where the batch dim goes in each result; an
// output that does not depend on the batch is broadcast along it, unless its out axis is
// nullopt (then it must not depend on the batch).
//
// The function is traced once at the per-example types and the jaxpr is batched (one rule per
// primitive, passes/batching/vmap.h): products gain a batch dim, elementwise ops broadcast their
// shared operands, loops and branches batch their bodies, a ref argument batched along axis 0 is a
// batched ref (each example reads and writes its own row). What no rule covers (a cond on a
// batched predicate, a read at batched indices of a ref, ...) runs as a loop over the batch:
// the same results, more slowly. Writing a batched value into a ref shared by the batch (a
// captured ref or an unbatched argument) is RefError E11. vmap nests with jit, grad, vjp, jvp
// and itself, in any order.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "refjit/tree.h"

namespace refjit {

struct VmapOptions {
  std::vector<std::optional<int>> in_axes;         // per argument; empty: 0 for all
  std::vector<std::optional<int>> out_axes = {0};  // per output leaf, or one for all
  std::string name = "vmap";
};

// The flat form of vmap, which Vmapped calls once it has flattened its arguments: runs the
// per-example function `f` over the batch. `axes` gives each leaf's batch axis (nullopt: not
// batched), `out_axes` each output leaf's, or one for all. Throws Error naming the leaf for an
// axis out of range, batch axes of different sizes, a ref batched along an axis other than 0,
// or no batched leaf at all.
namespace flat {
std::vector<Operand> vmap(const TraceBody& f, const std::vector<Operand>& leaves,
                          const std::vector<std::optional<int>>& axes,
                          const std::vector<std::optional<int>>& out_axes, const std::string& name);
}  // namespace flat

template <class F>
class Vmapped {
 public:
  Vmapped(F f, VmapOptions options) : f_(std::move(f)), options_(std::move(options)) {}

  template <class... A>
  auto operator()(const A&... args) const {
    std::vector<Operand> leaves;
    std::vector<std::optional<int>> axes;
    size_t arg = 0;
    auto flatten = [&](const auto& a) {
      const size_t before = leaves.size();
      tree::flatten_arg(a, leaves);
      std::optional<int> axis = 0;
      if (!options_.in_axes.empty())
        axis = arg < options_.in_axes.size() ? options_.in_axes[arg] : std::optional<int>{};
      axes.insert(axes.end(), leaves.size() - before, axis);
      ++arg;
    };
    (flatten(args), ...);
    if (!options_.in_axes.empty() && options_.in_axes.size() != sizeof...(A))
      throw Error(options_.name + ": in_axes has " + std::to_string(options_.in_axes.size()) +
                  " entries for " + std::to_string(sizeof...(A)) + " arguments");
    F f = f_;
    std::vector<Operand> outs =
        flat::vmap([&](const std::vector<Operand>& in) { return tree::call_flat(f, in, args...); },
                   leaves, axes, options_.out_axes, options_.name);
    return tree::unflatten_result<F, A...>(outs);
  }

 private:
  F f_;
  VmapOptions options_;
};

// jax.vmap(f, in_axes, out_axes).
template <class F>
Vmapped<F> vmap(F f, VmapOptions options = {}) {
  return Vmapped<F>(std::move(f), std::move(options));
}

}  // namespace refjit
