// custom_vjp: traces the primal, fwd and bwd functions at the call's types and binds one
// custom_vjp_call eqn (refjit/custom_vjp.h).
#include "refjit/custom_vjp.h"

#include <fmt/format.h>

#include "refjit/ir/error.h"
#include "refjit/ops.h"

namespace refjit::flat {

namespace {

void require_no_consts(const TracedFunction& fn, const std::string& what) {
  if (fn.consts.empty()) return;
  throw Error(
      fmt::format("{} closes over {} array(s) or ref(s) (the first is a {}); custom_vjp "
                  "functions may only close over C++ scalars. Pass arrays and refs "
                  "as arguments instead",
                  what, fn.consts.size(), type_of(fn.consts[0]).long_str()));
}

// The primal and fwd functions traced at the call's types.
struct TracedRules {
  TracedFunction call;
  JaxprPtr fwd;
  size_t n_out = 0;
  size_t n_res = 0;
  std::vector<Type> bwd_in;  // bwd's inputs: the residuals, then one cotangent per output
};

TracedRules trace_primal_and_fwd(const TraceBody& primal, const TraceBody& fwd,
                                 const std::vector<Type>& types, const std::string& name) {
  // The primal may take refs but not return them (E10).
  TracedFunction call = trace_function(
      [&](const std::vector<Operand>& in) {
        std::vector<Operand> outs = primal(in);
        for (size_t k = 0; k < outs.size(); ++k)
          if (std::holds_alternative<Ref>(outs[k]))
            throw RefError("E10", fmt::format("custom_vjp function `{}` returns a {} at output "
                                              "{}; a custom_vjp function may take refs but not "
                                              "return them. Return the ref's contents instead",
                                              name, type_of(outs[k]).long_str(), k));
        return outs;
      },
      types, name);
  require_no_consts(call, fmt::format("custom_vjp function `{}`", name));
  const size_t n_out = call.jaxpr->outvars.size();

  // fwd: a returned Ref must be one of its own arguments (shared with bwd); it is traced
  // as a placeholder and then rewired to that argument's binder.
  std::vector<std::pair<size_t, size_t>> ref_outs;  // (output, argument)
  TracedFunction fwd_fn = trace_function(
      [&](const std::vector<Operand>& in) {
        std::vector<Operand> outs = fwd(in);
        for (size_t k = 0; k < outs.size(); ++k) {
          const Ref* r = std::get_if<Ref>(&outs[k]);
          if (!r) continue;
          size_t arg = in.size();
          for (size_t a = 0; a < in.size(); ++a)
            if (const Ref* ar = std::get_if<Ref>(&in[a]); ar && ar->same_as(*r)) arg = a;
          if (arg == in.size())
            throw RefError("E10", fmt::format("the fwd rule of custom_vjp `{}` returns a {} at "
                                              "output {} that is not one of its arguments; fwd "
                                              "may return a Ref only to share one of its own "
                                              "Ref arguments with bwd. Return the ref's "
                                              "contents instead",
                                              name, type_of(outs[k]).long_str(), k));
          if (k < n_out)
            throw RefError("E10", fmt::format("the fwd rule of custom_vjp `{}` returns its Ref "
                                              "argument {} as primal output {}; the primal "
                                              "outputs come first and cannot be refs, shared "
                                              "refs go among the residuals after them",
                                              name, arg, k));
          ref_outs.emplace_back(k, arg);
          outs[k] = Value(0.0f);
        }
        return outs;
      },
      types, fmt::format("{}_fwd", name));
  require_no_consts(fwd_fn, fmt::format("the fwd rule of custom_vjp `{}`", name));
  Jaxpr fwd_jaxpr = *fwd_fn.jaxpr;
  for (auto [k, arg] : ref_outs) fwd_jaxpr.outvars[k] = fwd_jaxpr.invars[arg];
  std::vector<Type> fwd_out = fwd_jaxpr.out_types();
  if (fwd_out.size() < n_out)
    throw Error(
        fmt::format("the fwd rule of custom_vjp `{}` returns {} values but the function "
                    "has {} outputs; fwd returns the outputs, then the residuals",
                    name, fwd_out.size(), n_out));
  for (size_t k = 0; k < n_out; ++k)
    if (fwd_out[k] != call.jaxpr->type_of(call.jaxpr->outvars[k]))
      throw TypeError(fmt::format(
          "the fwd rule of custom_vjp `{}` returns a {} as output {} but "
          "the function returns a {} there",
          name, fwd_out[k].long_str(), k, call.jaxpr->type_of(call.jaxpr->outvars[k]).long_str()));
  const size_t n_res = fwd_out.size() - n_out;
  std::vector<Type> bwd_in(fwd_out.begin() + static_cast<long>(n_out), fwd_out.end());
  for (size_t k = 0; k < n_out; ++k) bwd_in.push_back(fwd_out[k]);
  return {std::move(call), std::make_shared<const Jaxpr>(std::move(fwd_jaxpr)), n_out, n_res,
          std::move(bwd_in)};
}

std::vector<Operand> bind_custom_vjp_call(const std::vector<Operand>& flat, TracedRules rules,
                                          const TracedFunction& bwd_fn, const std::string& name) {
  require_no_consts(bwd_fn, fmt::format("the bwd rule of custom_vjp `{}`", name));
  Params params{{"call_jaxpr", rules.call.jaxpr},
                {"fwd_jaxpr", std::move(rules.fwd)},
                {"bwd_jaxpr", bwd_fn.jaxpr},
                {"num_res", static_cast<int64_t>(rules.n_res)}};
  return bind_prim(Prim::custom_vjp_call, flat, std::move(params));
}

}  // namespace

std::vector<Operand> custom_vjp(const TraceBody& primal, const TraceBody& fwd, const BwdBody& bwd,
                                const std::vector<Operand>& flat, const std::string& name) {
  check_ref_aliasing(flat, {}, fmt::format("custom_vjp function `{}`", name));
  const std::vector<Type> types = types_of(flat);
  TracedRules rules = trace_primal_and_fwd(primal, fwd, types, name);

  // bwd: residuals, then one cotangent per output -> one cotangent per argument.
  TracedFunction bwd_fn = trace_function(
      [&](const std::vector<Operand>& in) {
        std::vector<std::optional<Value>> cts = bwd(in);
        if (cts.size() != types.size())
          throw Error(
              fmt::format("the bwd rule of custom_vjp `{}` returns {} cotangents but the "
                          "function has {} arguments; return one per argument "
                          "(std::nullopt where there is none)",
                          name, cts.size(), types.size()));
        std::vector<Operand> outs;
        for (size_t k = 0; k < cts.size(); ++k) {
          const ArrayType& want = types[k].array;
          if (!cts[k]) {
            outs.emplace_back(zeros(want.shape, want.dtype));
            continue;
          }
          Value v = *cts[k];
          if (v.type() != want && v.is_weak() && v.shape() == want.shape)
            v = convert(v, want.dtype);
          if (v.type() != want)
            throw TypeError(
                fmt::format("the bwd rule of custom_vjp `{}` returns a {} as the "
                            "cotangent of argument {}, which needs a {}",
                            name, Type(v.type()).long_str(), k, Type(want).long_str()));
          outs.emplace_back(v);
        }
        return outs;
      },
      rules.bwd_in, fmt::format("{}_bwd", name));
  return bind_custom_vjp_call(flat, std::move(rules), bwd_fn, name);
}

std::vector<Operand> custom_vjp_accumulating(const TraceBody& primal, const TraceBody& fwd,
                                             const AccumBwdBody& bwd,
                                             const std::vector<Operand>& flat,
                                             const std::string& name) {
  check_ref_aliasing(flat, {}, fmt::format("custom_vjp function `{}`", name));
  const std::vector<Type> types = types_of(flat);
  TracedRules rules = trace_primal_and_fwd(primal, fwd, types, name);
  // bwd: residuals, then one cotangent per output, then one accumulator (a ref of the
  // argument's cotangent type) per argument; it returns nothing.
  std::vector<Type> bwd_in = rules.bwd_in;
  for (const Type& t : types) bwd_in.push_back(Type::ref(t.array));
  TracedFunction bwd_fn = trace_function(
      [&](const std::vector<Operand>& in) {
        bwd(in);
        return std::vector<Operand>{};
      },
      bwd_in, fmt::format("{}_bwd", name));
  return bind_custom_vjp_call(flat, std::move(rules), bwd_fn, name);
}

}  // namespace refjit::flat
