#include "runtime/interpreter.h"

#include <fmt/format.h>

#include <optional>

#include "refjit/ir/error.h"
#include "runtime/dtype_dispatch.h"
#include "runtime/eval_rules.h"

namespace refjit {

namespace {

Array literal_array(const Literal& l) {
  return visit_dtype(l.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsComplex<T>)
      return Array::scalar<T>(
          T(static_cast<typename T::value_type>(l.f), static_cast<typename T::value_type>(l.im)));
    else if constexpr (kIsFloat<T>)
      return Array::scalar<T>(static_cast<T>(l.f));
    else
      return Array::scalar<T>(static_cast<T>(l.i));
  });
}

std::string value_type_text(const RtValue& v) {
  if (const Array* a = std::get_if<Array>(&v)) return a->type().str();
  const RefBufferPtr& r = std::get<RefBufferPtr>(v);
  return r ? Type::ref(r->type()).str() : "a null ref";
}

bool value_has_type(const RtValue& v, const Type& t) {
  if (const Array* a = std::get_if<Array>(&v)) return !t.is_ref && a->type() == t.array;
  const RefBufferPtr& r = std::get<RefBufferPtr>(v);
  return r && t.is_ref && r->type() == t.array;
}

// Evaluates one jaxpr; `where` prefixes error messages for nested jaxprs.
class Frame {
 public:
  explicit Frame(const Jaxpr& j) : jaxpr_(j), env_(j.vars.size()) {}

  void bind_inputs(const std::vector<RtValue>& args, std::string_view what) {
    size_t nc = jaxpr_.constvars.size(), ni = jaxpr_.invars.size();
    if (args.size() != nc + ni)
      throw Error(fmt::format("{}: expected {} values ({} constants then {} arguments), got {}",
                              what, nc + ni, nc, ni, args.size()));
    for (size_t k = 0; k < args.size(); ++k) {
      Var v = k < nc ? jaxpr_.constvars[k] : jaxpr_.invars[k - nc];
      const Type& t = jaxpr_.type_of(v);
      if (!value_has_type(args[k], t)) {
        std::string pos =
            k < nc ? fmt::format("constant {}", k) : fmt::format("argument {}", k - nc);
        throw Error(fmt::format("{}: {} (value {}) has the wrong type: expected {}, got {}", what,
                                pos, k, t.str(), value_type_text(args[k])));
      }
      if (const RefBufferPtr* r = std::get_if<RefBufferPtr>(&args[k]); r && (*r)->frozen())
        throw RefError("E12", fmt::format("{}: value {} is a ref that was already frozen; a ref "
                                          "may not be used after `freeze`",
                                          what, k));
      env_[v.id] = args[k];
    }
  }

  std::vector<RtValue> run() {
    EvalContext cx(jaxpr_);
    const EvalRuleTable& rules = eval_rules();
    for (size_t n = 0; n < jaxpr_.eqns.size(); ++n) {
      const Eqn& e = jaxpr_.eqns[n];
      const EvalRule* rule = rules.find(e.prim);
      if (!rule)
        throw Error(fmt::format("eqn {} ({}): the interpreter has no eval rule for it", n,
                                prim_name(e.prim)));
      std::vector<RtValue> ins;
      ins.reserve(e.ins.size());
      for (const Atom& a : e.ins) ins.push_back(read(a, n));
      std::vector<RtValue> outs = apply(*rule, cx, e, ins, n);
      if (outs.size() != e.outs.size())
        throw Error(fmt::format("eqn {} ({}): produced {} results but declares {} outputs", n,
                                prim_name(e.prim), outs.size(), e.outs.size()));
      for (size_t k = 0; k < outs.size(); ++k) {
        const Type& t = jaxpr_.type_of(e.outs[k]);
        if (!value_has_type(outs[k], t))
          throw Error(fmt::format("eqn {} ({}): output {} is declared {} but evaluates to {}", n,
                                  prim_name(e.prim), k, t.str(), value_type_text(outs[k])));
        env_[e.outs[k].id] = std::move(outs[k]);
      }
    }
    std::vector<RtValue> result;
    result.reserve(jaxpr_.outvars.size());
    for (const Atom& a : jaxpr_.outvars) result.push_back(read(a, jaxpr_.eqns.size()));
    return result;
  }

 private:
  // Runs a rule; errors get the eqn's position in front ("eqn 3 (get): ..."), keeping their
  // kind so RefError codes survive.
  static std::vector<RtValue> apply(EvalRule rule, const EvalContext& cx, const Eqn& e,
                                    std::span<const RtValue> ins, size_t n) {
    const std::string where = fmt::format("eqn {} ({})", n, prim_name(e.prim));
    try {
      return rule(cx, e, ins);
    } catch (const RefError& err) {
      throw RefError(err.code(), fmt::format("{}: {}", where, err.what()));
    } catch (const TypeError& err) {
      throw TypeError(fmt::format("{}: {}", where, err.what()));
    } catch (const Error& err) {
      throw Error(fmt::format("{}: {}", where, err.what()));
    }
  }

  RtValue read(const Atom& a, size_t eqn) const {
    if (const Literal* l = std::get_if<Literal>(&a)) return literal_array(*l);
    Var v = as_var(a);
    if (v.id >= env_.size() || !env_[v.id])
      throw Error(fmt::format("eqn {}: variable {} is read before it is defined", eqn, v.id));
    return *env_[v.id];
  }

  const Jaxpr& jaxpr_;
  std::vector<std::optional<RtValue>> env_;
};

std::vector<RtValue> eval_jaxpr(const Jaxpr& j, const std::vector<RtValue>& args,
                                std::string_view what) {
  Frame f(j);
  f.bind_inputs(args, what);
  return f.run();
}

}  // namespace

std::vector<RtValue> EvalContext::call(const Eqn& e, const Jaxpr& sub,
                                       const std::vector<RtValue>& args,
                                       std::string_view role) const {
  return eval_jaxpr(sub, args, fmt::format("{} ({})", role, prim_name(e.prim)));
}

std::vector<RtValue> interpret(const Jaxpr& jaxpr, const std::vector<RtValue>& consts_then_args) {
  // Two binders of one buffer would make the program's ref effects interfere (E7); the
  // native backend rejects it the same way.
  // Only ref binders are checked here: a ref given for an array binder is a type error,
  // reported by name when the inputs are bound.
  std::vector<Type> types = jaxpr.const_types();
  for (const Type& t : jaxpr.in_types()) types.push_back(t);
  auto ref_at = [&](size_t i) -> const RefBufferPtr* {
    if (i >= types.size() || !types[i].is_ref) return nullptr;
    const RefBufferPtr* r = std::get_if<RefBufferPtr>(&consts_then_args[i]);
    return r && *r ? r : nullptr;
  };
  for (size_t i = 0; i < consts_then_args.size(); ++i)
    if (const RefBufferPtr* r = ref_at(i))
      for (size_t k = 0; k < i; ++k)
        if (const RefBufferPtr* o = ref_at(k); o && *o == *r)
          throw RefError("E7", fmt::format("interpret: the same ref is passed as value {} and as "
                                           "value {}; pass it once",
                                           k, i));
  return eval_jaxpr(jaxpr, consts_then_args, "interpret");
}

}  // namespace refjit
