// vjp / with_refs / grad / jvp / linearize on top of trace.h and the AD passes
// (refjit/autodiff.h).
#include "refjit/autodiff.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <ostream>

#include "driver/derive.h"
#include "passes/ad/jvp.h"
#include "passes/ad/linearize.h"
#include "passes/ad/transpose.h"
#include "passes/ad/vjp.h"
#include "refjit/ir/error.h"
#include "refjit/ops.h"

namespace refjit {

std::ostream& operator<<(std::ostream& os, const GradRef&) { return os << "GradRef()"; }
std::ostream& operator<<(std::ostream& os, const DidntWant&) { return os << "DidntWant()"; }

const Value& Grad::value() const {
  if (const Value* v = std::get_if<Value>(&v_)) return *v;
  throw Error(fmt::format("this gradient slot holds {} rather than a value: {}", str(),
                          is_grad_ref() ? "the gradient was accumulated into the ref bound "
                                          "with with_refs; read that ref instead"
                                        : "DontWant was passed for this argument"));
}

std::string Grad::str() const {
  if (const Value* v = std::get_if<Value>(&v_)) return v->str();
  return is_grad_ref() ? "GradRef()" : "DidntWant()";
}

std::ostream& operator<<(std::ostream& os, const Grad& g) { return os << g.str(); }

namespace flat {

namespace {

bool differentiable(const Type& t) { return is_inexact(t.dtype()); }

std::string entry_str(const GradEntry& e) {
  if (std::holds_alternative<GradValue>(e)) return "GradValue";
  if (std::holds_alternative<DontWant>(e)) return "DontWant";
  return "a " + Type::ref(std::get<Ref>(e).type()).long_str();
}

// A cotangent or tangent given for a slot of type `want`: weak C++ scalars take the slot's
// dtype (1.0 for an f32 output); anything else must match exactly (E6).
Operand coerce(const Operand& x, const Type& want, const std::string& what) {
  if (const Value* v = std::get_if<Value>(&x); v && !want.is_ref) {
    if (v->type() == want.array) return x;
    if (v->is_weak() && v->shape() == want.shape()) {
      if (v->is_concrete() && v->rank() == 0) return Value::scalar(want.dtype(), v->item());
      return convert(*v, want.dtype());
    }
  }
  if (type_of(x) == want) return x;
  throw RefError("E6", fmt::format("{} has type {} but {} is expected; pass a value of exactly "
                                   "that shape and dtype",
                                   what, type_of(x).long_str(), want.long_str()));
}

// Flat operands: f's captured constants then its arguments.
std::vector<Operand> consts_then(const TracedFunction& fn, const std::vector<Operand>& flat) {
  std::vector<Operand> all = fn.consts;
  all.insert(all.end(), flat.begin(), flat.end());
  return all;
}

TracedFunction trace_checked(const TraceBody& f, const std::vector<Operand>& flat,
                             const std::string& name) {
  check_ref_aliasing(flat, {}, fmt::format("function `{}`", name));
  std::vector<Type> types = types_of(flat);
  TracedFunction fn = trace_function(f, types, name);
  check_ref_aliasing(flat, fn.consts, fmt::format("function `{}`", name));
  return fn;
}

// The function autodiff is given: traced, checked, and in the form every door differentiates
// (driver/derive.h), told the ranges of its concrete integer constants.
struct TracedForAutodiff {
  TracedFunction fn;  // its jaxpr is derive.program()
  Differentiable derive;
};

TracedForAutodiff trace_for_autodiff(const TraceBody& f, const std::vector<Operand>& flat,
                                     const std::string& name) {
  TracedFunction fn = trace_checked(f, flat, name);
  std::vector<std::optional<IntRange>> ranges;
  for (const Operand& c : fn.consts) {
    const Value* v = std::get_if<Value>(&c);
    const bool known = v && v->is_concrete() && is_int(v->dtype());
    ranges.push_back(known ? element_range(v->array()) : std::nullopt);
  }
  Differentiable derive(fn.jaxpr, ranges);
  fn.jaxpr = derive.program();
  return {std::move(fn), std::move(derive)};
}

std::string kinds_key(const std::vector<AccumKind>& kinds) {
  std::string k;
  for (AccumKind a : kinds) k += static_cast<char>('0' + static_cast<int>(a));
  return k;
}

}  // namespace

struct VjpState {
  std::string name;
  std::vector<Type> arg_types;
  std::vector<Type> out_types;
  std::vector<bool> differentiated;
  Jaxpr linear;
  int num_nonlinear = 0;
  std::vector<Operand> residuals;  // value residuals, then ref residuals

  std::mutex mu;
  std::map<std::string, JaxprPtr> transposes;  // per accumulator-kind combination

  JaxprPtr transpose_for(const std::vector<AccumKind>& kinds) {
    std::string key = kinds_key(kinds);
    std::lock_guard<std::mutex> lock(mu);
    auto it = transposes.find(key);
    if (it != transposes.end()) return it->second;
    auto t = std::make_shared<const Jaxpr>(transpose_jaxpr(linear, num_nonlinear, kinds));
    transposes.emplace(key, t);
    return t;
  }
};

std::pair<std::vector<Operand>, Vjp> Vjp::create(const TraceBody& f,
                                                 const std::vector<Operand>& flat,
                                                 const std::string& name) {
  TracedForAutodiff traced = trace_for_autodiff(f, flat, name);
  const TracedFunction& fn = traced.fn;
  auto st = std::make_shared<VjpState>();
  st->name = name;
  st->arg_types = types_of(flat);
  st->out_types = fn.jaxpr->out_types();
  for (const Type& t : st->arg_types) st->differentiated.push_back(differentiable(t));

  Linearized lin = traced.derive.linearize(st->differentiated);
  st->linear = std::move(lin.linear);
  st->num_nonlinear = lin.num_nonlinear();

  TracedFunction forward{std::make_shared<const Jaxpr>(std::move(lin.primal)), fn.consts};
  std::vector<Operand> outs = bind_jaxpr(name, forward, flat);
  const size_t n_out = st->out_types.size();
  st->residuals.assign(outs.begin() + static_cast<long>(n_out), outs.end());
  std::vector<Operand> all = consts_then(fn, flat);
  for (int r : lin.ref_residuals) st->residuals.push_back(all.at(static_cast<size_t>(r)));
  outs.resize(n_out);

  Vjp core;
  core.state_ = std::move(st);
  return {std::move(outs), std::move(core)};
}

Vjp Vjp::with_refs(std::vector<GradEntry> entries) const {
  const VjpState& st = *state_;
  const size_t n = st.arg_types.size();
  if (entries.size() != n) {
    std::string diffs;
    for (size_t k = 0; k < std::max(n, entries.size()); ++k) {
      if (k >= entries.size())
        diffs += fmt::format("\n  argument {} ({}) has no entry", k, st.arg_types[k].long_str());
      else if (k >= n)
        diffs += fmt::format("\n  entry {} ({}) has no argument", k, entry_str(entries[k]));
    }
    throw RefError("E3", fmt::format("with_refs on the VJP of `{}` takes one entry per argument "
                                     "({}), but {} were given:{}\nGive a Ref, GradValue{{}} or "
                                     "DontWant{{}} for each argument, in order",
                                     st.name, n, entries.size(), diffs));
  }
  for (size_t k = 0; k < n; ++k) {
    const Type& t = st.arg_types[k];
    if (const Ref* r = std::get_if<Ref>(&entries[k])) {
      if (r->type() != t.array)
        throw RefError("E6",
                       fmt::format("with_refs entry {} of the VJP of `{}` is a {}, but argument {} "
                                   "has type {}, so its gradient ref must be a {}; bind a ref of "
                                   "exactly that shape and dtype",
                                   k, st.name, Type::ref(r->type()).long_str(), k, t.long_str(),
                                   Type::ref(t.array).long_str()));
      for (size_t j = 0; j < k; ++j)
        if (const Ref* o = std::get_if<Ref>(&entries[j]); o && o->same_as(*r))
          throw RefError("E7", fmt::format("with_refs on the VJP of `{}`: the same {} is bound "
                                           "for argument {} and for argument {}; bind a "
                                           "different gradient ref for each argument",
                                           st.name, Type::ref(r->type()).long_str(), j, k));
    } else if (std::holds_alternative<GradValue>(entries[k]) && t.is_ref && differentiable(t)) {
      throw RefError("E5", fmt::format("with_refs entry {} of the VJP of `{}` is GradValue, but "
                                       "argument {} is Ref-typed ({}): a ref's gradient cannot "
                                       "be returned as a value. Bind a gradient ref of type {} "
                                       "at that position, or pass DontWant{{}}",
                                       k, st.name, k, t.long_str(), t.long_str()));
    }
  }
  Vjp c = *this;
  c.entries_ = std::move(entries);
  return c;
}

std::vector<Grad> Vjp::apply(const std::vector<Operand>& cts_in) const {
  VjpState& st = *state_;
  const size_t n = st.arg_types.size();
  if (cts_in.size() != st.out_types.size())
    throw RefError("E6", fmt::format("the VJP of `{}` takes one cotangent per output of `{}` "
                                     "({}), but {} were given",
                                     st.name, st.name, st.out_types.size(), cts_in.size()));
  std::vector<Operand> cts;
  for (size_t k = 0; k < cts_in.size(); ++k)
    cts.push_back(coerce(cts_in[k], st.out_types[k],
                         fmt::format("the cotangent for output {} of `{}`", k, st.name)));

  const bool bound = !entries_.empty();
  std::vector<GradEntry> entries = bound ? entries_ : std::vector<GradEntry>(n, GradValue{});
  std::vector<AccumKind> kinds;
  std::vector<Operand> grad_refs;
  for (size_t k = 0; k < n; ++k) {
    if (!st.differentiated[k]) continue;
    const GradEntry& e = entries[k];
    if (std::holds_alternative<GradValue>(e)) {
      if (st.arg_types[k].is_ref)
        throw RefError(
            "E4", fmt::format("argument {} of the differentiated function `{}` is Ref-typed ({}), "
                              "so its gradient has to be added into a ref, and no gradient ref "
                              "is bound for it. Bind one before applying the VJP function: "
                              "f_vjp.with_refs(grad_ref)(ct) adds the gradient into grad_ref in "
                              "place. To skip this gradient instead, pass DontWant{{}} at "
                              "position {}",
                              k, st.name, st.arg_types[k].long_str(), k));
      kinds.push_back(AccumKind::value);
    } else if (std::holds_alternative<DontWant>(e)) {
      kinds.push_back(AccumKind::dont_want);
    } else {
      kinds.push_back(AccumKind::ref);
      grad_refs.push_back(std::get<Ref>(e));
    }
  }

  JaxprPtr bwd = st.transpose_for(kinds);
  std::vector<Operand> args = st.residuals;
  args.insert(args.end(), grad_refs.begin(), grad_refs.end());
  args.insert(args.end(), cts.begin(), cts.end());
  std::vector<Operand> results = bind_jaxpr(st.name, TracedFunction{bwd, {}}, args);

  std::vector<Grad> grads;
  size_t next = 0;
  for (size_t k = 0; k < n; ++k) {
    const GradEntry& e = entries[k];
    const Type& t = st.arg_types[k];
    if (std::holds_alternative<DontWant>(e)) {
      grads.emplace_back(DidntWant{});
    } else if (std::holds_alternative<Ref>(e)) {
      grads.emplace_back(GradRef{});
    } else if (!st.differentiated[k]) {
      // Integer arguments have no gradient: zeros (JAX's float0), or nothing for a ref.
      if (t.is_ref)
        grads.emplace_back(DidntWant{});
      else
        grads.emplace_back(zeros(t.shape(), t.dtype()));
    } else {
      grads.emplace_back(std::get<Value>(results.at(next++)));
    }
  }
  return grads;
}

struct LinearState {
  std::string name;
  std::vector<Type> arg_types;
  std::vector<bool> differentiated;
  JaxprPtr linear;
  std::vector<Operand> residuals;
};

std::pair<std::vector<Operand>, LinearMap> LinearMap::create(const TraceBody& f,
                                                             const std::vector<Operand>& flat,
                                                             const std::string& name) {
  TracedForAutodiff traced = trace_for_autodiff(f, flat, name);
  const TracedFunction& fn = traced.fn;
  auto st = std::make_shared<LinearState>();
  st->name = name;
  st->arg_types = types_of(flat);
  for (const Type& t : st->arg_types) st->differentiated.push_back(differentiable(t));
  Linearized lin = traced.derive.linearize(st->differentiated);
  st->linear = std::make_shared<const Jaxpr>(std::move(lin.linear));
  TracedFunction forward{std::make_shared<const Jaxpr>(std::move(lin.primal)), fn.consts};
  std::vector<Operand> outs = bind_jaxpr(name, forward, flat);
  const size_t n_out = fn.jaxpr->outvars.size();
  st->residuals.assign(outs.begin() + static_cast<long>(n_out), outs.end());
  std::vector<Operand> all = consts_then(fn, flat);
  for (int r : lin.ref_residuals) st->residuals.push_back(all.at(static_cast<size_t>(r)));
  outs.resize(n_out);
  LinearMap core;
  core.state_ = std::move(st);
  return {std::move(outs), std::move(core)};
}

std::vector<Operand> LinearMap::apply(const std::vector<Operand>& tangents) const {
  const LinearState& st = *state_;
  if (tangents.size() != st.arg_types.size())
    throw Error(
        fmt::format("the linearized `{}` takes one tangent per argument ({}), but {} "
                    "were given",
                    st.name, st.arg_types.size(), tangents.size()));
  std::vector<Operand> args = st.residuals;
  for (size_t k = 0; k < tangents.size(); ++k) {
    Operand t = coerce(tangents[k], st.arg_types[k],
                       fmt::format("the tangent for argument {} of `{}`", k, st.name));
    if (st.differentiated[k]) args.push_back(t);
  }
  return bind_jaxpr(st.name, TracedFunction{st.linear, {}}, args);
}

std::vector<int> leaf_argnums(const std::vector<int>& argnums, const std::vector<size_t>& first,
                              const std::string& name) {
  const size_t nargs = first.size() - 1;
  std::vector<int> leaves;
  for (int a : argnums) {
    if (a < 0 || static_cast<size_t>(a) >= nargs)
      throw Error(
          fmt::format("grad of `{}`: argnum {} is out of range; the function is called "
                      "with {} arguments",
                      name, a, nargs));
    for (size_t k = first[static_cast<size_t>(a)]; k < first[static_cast<size_t>(a) + 1]; ++k)
      leaves.push_back(static_cast<int>(k));
  }
  return leaves;
}

void check_one_leaf(int argnum, size_t leaves, const std::string& name) {
  if (leaves != 1)
    throw Error(
        fmt::format("grad of `{}`: argument {} is a vector or tuple of {} values, so its "
                    "gradient is not one Value; use grad<{}>(f) to get it shaped like "
                    "the argument, or grad(f, {{{}}}) for one Value per leaf",
                    name, argnum, leaves, argnum, argnum));
}

std::vector<Operand> grad(const TraceBody& f, const std::vector<Operand>& flat,
                          const std::vector<int>& argnums, const std::string& name) {
  for (int w : argnums) {
    if (w < 0 || static_cast<size_t>(w) >= flat.size())
      throw Error(
          fmt::format("grad of `{}`: argnum {} is out of range; the function is called "
                      "with {} arguments",
                      name, w, flat.size()));
    const Type t = type_of(flat[static_cast<size_t>(w)]);
    if (t.is_ref)
      throw RefError("E2", fmt::format("grad of `{}`: argument {} is Ref-typed ({}); the "
                                       "gradient of a ref must itself live in a ref, so grad "
                                       "cannot return it. Use vjp(f, args...) and bind a "
                                       "gradient ref with f_vjp.with_refs(...) instead (Ref "
                                       "arguments not in argnums are plumbing and are fine)",
                                       name, w, t.long_str()));
    if (!differentiable(t))
      throw Error(
          fmt::format("grad of `{}`: argument {} has type {}; only float arguments can "
                      "be differentiated (pass it as f32/f64, or leave it out of "
                      "argnums)",
                      name, w, t.long_str()));
  }
  TracedForAutodiff traced = trace_for_autodiff(f, flat, name);
  TracedFunction g{std::make_shared<const Jaxpr>(traced.derive.grad(argnums)), traced.fn.consts};
  return bind_jaxpr(name, g, flat);
}

std::vector<Operand> jvp(const TraceBody& f, const std::vector<Operand>& primals,
                         const std::vector<Operand>& tangents, const std::string& name) {
  TracedForAutodiff traced = trace_for_autodiff(f, primals, name);
  const TracedFunction& fn = traced.fn;
  std::vector<bool> nonzero;
  std::vector<Operand> args = primals;
  for (size_t k = 0; k < primals.size(); ++k) {
    const Type t = type_of(primals[k]);
    Operand tk =
        coerce(tangents[k], t, fmt::format("the tangent for argument {} of `{}`", k, name));
    nonzero.push_back(differentiable(t));
    if (nonzero.back()) args.push_back(tk);
  }
  TracedFunction j{std::make_shared<const Jaxpr>(traced.derive.jvp(nonzero)), fn.consts};
  return bind_jaxpr(name, j, args);
}

}  // namespace flat
}  // namespace refjit
