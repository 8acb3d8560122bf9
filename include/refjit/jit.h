// jit and make_jaxpr: JAX's two basic function transformations.
//
//   auto take = refjit::jit([](Value x, Value i) { return x[i]; }, "take");
//   Value y = take(x, 3);                                   // traced once per signature
//   std::cout << refjit::make_jaxpr(take)(x, 3) << "\n";    // { lambda ; a:f32[10] b:i32[]. ...
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "refjit/trace.h"
#include "refjit/tree.h"

namespace refjit {

// A cache key for a flat argument list: dtype/shape/ref-ness of each leaf.
std::string signature_key(std::span<const Operand> flat);

// True if every captured operand is concrete (a trace's jaxpr may then be reused).
bool all_concrete(std::span<const Operand> consts);

// make_jaxpr(f)(args...): the jaxpr of f at the types of args.
template <class F>
class MakeJaxpr {
 public:
  explicit MakeJaxpr(F f, std::string name) : f_(std::move(f)), name_(std::move(name)) {}
  template <class... A>
  ClosedJaxpr operator()(const A&... args) const {
    std::vector<Operand> flat;
    (tree::flatten_arg(args, flat), ...);
    check_ref_aliasing(flat, {}, name_);
    std::vector<Type> types = types_of(flat);
    F f = f_;
    TracedFunction traced = trace_function(
        [&](const std::vector<Operand>& in) { return tree::call_flat(f, in, args...); }, types,
        name_);
    check_ref_aliasing(flat, traced.consts, name_);
    return ClosedJaxpr{traced.jaxpr, traced.consts};
  }

 private:
  F f_;
  std::string name_;
};

template <class F>
MakeJaxpr<F> make_jaxpr(F f, std::string name = "function") {
  return MakeJaxpr<F>(std::move(f), std::move(name));
}

// jit(f, name): a callable that traces f once per argument signature and runs the jaxpr
// (refs passed in are updated in place); called inside another trace it stages one
// `jit[name=...]` eqn instead.
template <class F>
class Jitted {
 public:
  Jitted(F f, std::string name)
      : f_(std::make_shared<F>(std::move(f))),
        name_(std::move(name)),
        cache_(std::make_shared<Cache>()) {}

  template <class... A>
  auto operator()(const A&... args) const {
    std::vector<Operand> flat;
    (tree::flatten_arg(args, flat), ...);
    check_ref_aliasing(flat, {}, "jit function `" + name_ + "`");
    TracedFunction traced = lookup_or_trace(flat, args...);
    std::vector<Operand> outs = bind_jaxpr(name_, traced, flat);
    using R = decltype(std::apply(*f_, std::declval<std::tuple<tree::traced_t<A>...>&>()));
    if constexpr (std::is_void_v<R>) {
      return;
    } else {
      size_t pos = 0;
      return tree::unflatten_out<R>(outs, pos);
    }
  }

  // How many times f has been traced (once per new signature).
  int trace_count() const { return cache_->traces; }
  const std::string& name() const { return name_; }
  const F& function() const { return *f_; }

 private:
  struct Cache {
    std::mutex mu;
    std::map<std::string, TracedFunction> entries;
    int traces = 0;
  };

  template <class... A>
  TracedFunction lookup_or_trace(const std::vector<Operand>& flat, const A&... args) const {
    std::string key = signature_key(flat);
    {
      std::lock_guard<std::mutex> lock(cache_->mu);
      auto it = cache_->entries.find(key);
      if (it != cache_->entries.end()) return it->second;
    }
    std::vector<Type> types = types_of(flat);
    F& f = *f_;
    TracedFunction traced = trace_function(
        [&](const std::vector<Operand>& in) { return tree::call_flat(f, in, args...); }, types,
        name_);
    std::lock_guard<std::mutex> lock(cache_->mu);
    ++cache_->traces;
    // A function that closed over values of an enclosing trace is only valid inside it.
    if (all_concrete(traced.consts)) cache_->entries.emplace(key, traced);
    return traced;
  }

  std::shared_ptr<F> f_;
  std::string name_;
  std::shared_ptr<Cache> cache_;
};

template <class F>
Jitted<F> jit(F f, std::string name = "jit") {
  return Jitted<F>(std::move(f), std::move(name));
}

// make_jaxpr of a jitted function shows the one jit eqn it stages, as in JAX.
template <class F>
MakeJaxpr<Jitted<F>> make_jaxpr(Jitted<F> f) {
  return MakeJaxpr<Jitted<F>>(f, f.name());
}

}  // namespace refjit
