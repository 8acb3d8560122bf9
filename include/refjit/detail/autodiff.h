// Implementation details of refjit/autodiff.h that its templates need. Not part of the API:
// names here may change at any time.
#pragma once

#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "refjit/grad.h"
#include "refjit/trace.h"
#include "refjit/tree.h"

namespace refjit {

namespace detail {

// An argument of a differentiated function must be exactly one leaf.
template <class A>
constexpr bool is_leaf_arg_v =
    std::is_same_v<std::remove_cvref_t<A>, Ref> || std::is_constructible_v<Value, A>;

// The name jaxprs and messages use for a function: a jitted function's name, else "f".
template <class F>
std::string function_name(const F& f) {
  if constexpr (requires { f.name(); })
    return std::string(f.name());
  else
    return "f";
}

template <class F, class... A>
using result_of_traced_t =
    decltype(std::apply(std::declval<F&>(), std::declval<std::tuple<tree::traced_t<A>...>&>()));

// Flattens cotangents/tangents given one per output (or as a tuple) to Operands.
template <class... C>
std::vector<Operand> flatten_all(const C&... xs) {
  std::vector<Operand> flat;
  (tree::flatten_arg(xs, flat), ...);
  return flat;
}

struct VjpState;  // autodiff.cpp: residuals, linear jaxpr, cache of transposes

// The type-erased core of a VJP function.
class VjpCore {
 public:
  // Traces f at the types of `flat`, runs (or stages) its forward pass; returns f's
  // outputs and the core holding what the backward pass needs.
  static std::pair<std::vector<Operand>, VjpCore> create(const TraceBody& f,
                                                         const std::vector<Operand>& flat,
                                                         const std::string& name);
  // A copy with one accumulator entry per argument (E3, E5, E6, E7 checked here).
  VjpCore with_refs(std::vector<GradEntry> entries) const;
  // Runs (or stages) the backward pass for one cotangent per output (E4, E6).
  std::vector<Grad> apply(const std::vector<Operand>& cts) const;

 private:
  std::shared_ptr<VjpState> state_;
  std::vector<GradEntry> entries_;  // empty: all GradValue, not bound by with_refs
};

struct LinearState;  // autodiff.cpp

class LinearCore {
 public:
  static std::pair<std::vector<Operand>, LinearCore> create(const TraceBody& f,
                                                            const std::vector<Operand>& flat,
                                                            const std::string& name);
  // One tangent per argument (ignored for non-differentiated ones) -> output tangents.
  std::vector<Operand> apply(const std::vector<Operand>& tangents) const;

 private:
  std::shared_ptr<const LinearState> state_;
};

// The leaf positions of the arguments `argnums` (each argument's leaves are first[a] to
// first[a + 1]); throws Error naming an argnum out of range.
std::vector<int> leaf_argnums(const std::vector<int>& argnums, const std::vector<size_t>& first,
                              const std::string& name);
// grad(f, argnum) returns one Value: throws Error when that argument has another number of
// leaves, saying how to get its gradient shaped like it.
void check_one_leaf(int argnum, size_t leaves, const std::string& name);

// Returns f's output, then one gradient per argnum (in argnums order).
std::vector<Operand> grad_call(const TraceBody& f, const std::vector<Operand>& flat,
                               const std::vector<int>& argnums, const std::string& name);
// Returns the primal outputs then the tangent outputs.
std::vector<Operand> jvp_call(const TraceBody& f, const std::vector<Operand>& primals,
                              const std::vector<Operand>& tangents, const std::string& name);

}  // namespace detail

}  // namespace refjit
