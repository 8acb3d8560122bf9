// checkpoint (jax.checkpoint, also spelled remat): the backward pass recomputes what the
// function computes instead of keeping it from the forward pass, trading compute for memory.
//
//   auto layer = checkpoint([&](Value h) { return tanh(matmul(h, w)); });
//   auto step = checkpoint(step_fn, {.policy = RematPolicy::dots_saveable});
//   auto [h, hs] = scan(checkpoint(step_fn), h0, xs);   // saves each step's carry only
//
// Forward results and derivatives are unchanged; only what reverse mode keeps between its
// forward and backward passes changes. The policy says which values may still be kept:
//   nothing_saveable (the default)     none: the backward pass recomputes from the inputs
//   dots_saveable                      products (dot_general results)
//   dots_with_no_batch_dims_saveable   products without batch dims
//   everything_saveable                all: an ordinary call
//   save_only_these_names              the values tagged by checkpoint_name(x, "NAME") with a
//                                      name in CheckpointOptions::names
// Code with ref effects is never recomputed (its results are kept), so a checkpointed
// function may read and write refs. Forward mode (jvp) ignores the policy.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "refjit/tree.h"

namespace refjit {

enum class RematPolicy {
  nothing_saveable,
  dots_saveable,
  dots_with_no_batch_dims_saveable,
  everything_saveable,
  save_only_these_names,     // the values tagged with CheckpointOptions::names by checkpoint_name
  save_any_names_but_these,  // the values tagged by checkpoint_name, except those names
};

// The policy's name in the jaxpr (`jit[... policy=NAME]`).
std::string policy_name(RematPolicy p, const std::vector<std::string>& names = {});

struct CheckpointOptions {
  RematPolicy policy = RematPolicy::nothing_saveable;
  std::vector<std::string> names;  // the names save_only_these_names saves (the others don't)
  std::string name = "checkpoint";
};

// jax.ad_checkpoint.checkpoint_name: x itself, tagged `name` for the save_only_these_names
// policy of an enclosing checkpoint (a `name[name=...]` eqn).
Value checkpoint_name(const Value& x, const std::string& name);

// The flat form of checkpoint, which Checkpointed calls once it has flattened its arguments:
// calls `f` on `args` as bind_jaxpr does; inside a trace the staged `jit` eqn carries the
// remat policy `policy` (passes/ad/remat.h names them).
namespace flat {
std::vector<Operand> checkpoint(const TraceBody& f, const std::vector<Operand>& args,
                                const std::string& policy, const std::string& name);
}  // namespace flat

template <class F>
class Checkpointed {
 public:
  Checkpointed(F f, CheckpointOptions options) : f_(std::move(f)), options_(std::move(options)) {}

  template <class... A>
  auto operator()(const A&... args) const {
    std::vector<Operand> operands;
    (tree::flatten_arg(args, operands), ...);
    F f = f_;
    std::vector<Operand> outs = flat::checkpoint(
        [&](const std::vector<Operand>& in) { return tree::call_flat(f, in, args...); }, operands,
        policy_name(options_.policy, options_.names), options_.name);
    return tree::unflatten_result<F, A...>(outs);
  }

  const std::string& name() const { return options_.name; }

 private:
  F f_;
  CheckpointOptions options_;
};

// jax.checkpoint(f, policy=...).
template <class F>
Checkpointed<F> checkpoint(F f, CheckpointOptions options = {}) {
  return Checkpointed<F>(std::move(f), std::move(options));
}

// jax.remat: another name for checkpoint.
template <class F>
Checkpointed<F> remat(F f, CheckpointOptions options = {}) {
  return Checkpointed<F>(std::move(f), std::move(options));
}

}  // namespace refjit
