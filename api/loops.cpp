// scan / foreach / fori_loop / cond / switch_ on top of trace.h (refjit/loops.h): each traces
// its body with trace_function, turns the captured operands into leading operands of the
// eqn (consts_to_invars) and binds one scan or cond eqn with bind_prim.
#include "refjit/loops.h"

#include <fmt/format.h>

#include "api/node.h"
#include "api/trace_state.h"
#include "refjit/ir/error.h"
#include "refjit/ops.h"

namespace refjit::flat {

using detail::current_trace;
using detail::Node;
using detail::node_of;
using detail::NodePtr;
using detail::Trace;

namespace {

// Where a ref returned by a loop body or branch came from, for the E9 message. `args` are
// the body's parameters; `arg_name(p)` names parameter p.
template <class ArgName>
std::string ref_origin(const Ref& r, const std::vector<Operand>& args, const ArgName& arg_name) {
  for (size_t p = 0; p < args.size(); ++p)
    if (const Ref* a = std::get_if<Ref>(&args[p]); a && a->same_as(r)) return arg_name(p);
  const Node& n = *node_of(r);
  const Trace* t = current_trace();
  if (n.concrete()) return "a ref the body closes over";
  if (!t || n.trace_id != t->id()) return "a ref the body closes over from an enclosing trace";
  return "a ref created inside the body with new_ref (such refs live for one iteration)";
}

// A weakly typed value (a C++ scalar) given where a `want` is needed takes want's dtype.
Operand coerce_weak(const Operand& x, const Type& want) {
  const Value* v = std::get_if<Value>(&x);
  if (!v || want.is_ref || !v->is_weak() || v->dtype() == want.dtype() ||
      v->shape() != want.shape())
    return x;
  if (v->is_concrete() && v->rank() == 0) return Value::scalar(want.dtype(), v->item());
  return convert(*v, want.dtype());
}

bool same_operand(const Operand& a, const Operand& b) {
  if (a.index() != b.index()) return false;
  if (const Ref* ra = std::get_if<Ref>(&a)) return ra->same_as(std::get<Ref>(b));
  const NodePtr& na = node_of(std::get<Value>(a));
  const NodePtr& nb = node_of(std::get<Value>(b));
  if (na == nb) return true;
  return !na->concrete() && !nb->concrete() && na->trace_id == nb->trace_id && na->var == nb->var;
}

Type row_type(const Type& t) {
  ArrayType row = t.array;
  row.shape.erase(row.shape.begin());
  return t.is_ref ? Type::ref(row, t.ref_kind) : Type(row);
}

}  // namespace

std::vector<Operand> scan(const TraceBody& body, const std::vector<Operand>& carry_init,
                          const std::vector<Operand>& xs, const ScanOptions& options,
                          const std::string& what) {
  std::vector<Operand> carry = carry_init;
  const size_t n_carry = carry.size();
  // A ref carry is E9, but aliasing is reported first, as JAX orders them: the same ref twice
  // among carry and xs is E7 (positions count the carry leaves, then the xs leaves), a ref
  // passed and also closed over by the body E8.
  for (size_t k = 0; k < n_carry; ++k) {
    if (!std::holds_alternative<Ref>(carry[k])) continue;
    std::vector<Operand> passed = carry;
    passed.insert(passed.end(), xs.begin(), xs.end());
    check_ref_aliasing(passed, {}, fmt::format("{} (its carry, then its xs)", what));
    std::vector<Type> in_types = types_of(carry);
    for (const Operand& x : xs) in_types.push_back(row_type(type_of(x)));
    // Traced only for what it closes over: its ref outputs (the carry it must return) are
    // dropped, as a jaxpr cannot return them.
    auto captures_only = [&](const std::vector<Operand>& in) {
      std::vector<Operand> values;
      for (Operand& o : body(in))
        if (!std::holds_alternative<Ref>(o)) values.push_back(std::move(o));
      return values;
    };
    std::optional<TracedFunction> traced;
    try {
      traced = trace_function(captures_only, in_types, fmt::format("{} body", what));
    } catch (const Error&) {
      // The body cannot even be traced with a ref carry; E9 says why it cannot be one.
    }
    if (traced) check_ref_aliasing(passed, traced->consts, what);
    throw RefError("E9", fmt::format("{}: carry leaf {} of the initial carry is a {} passed as "
                                     "init; refs cannot be scan carries (the body would have "
                                     "to return it). Close over the ref in the body, or scan "
                                     "over it among xs",
                                     what, k, type_of(carry[k]).long_str()));
  }

  int64_t length = -1;
  for (size_t k = 0; k < xs.size(); ++k) {
    const Type t = type_of(xs[k]);
    if (t.shape().empty())
      throw TypeError(
          fmt::format("{}: xs leaf {} is a scalar {}; every xs leaf needs a leading "
                      "dim to loop over",
                      what, k, t.long_str()));
    const int64_t lead = t.shape()[0];
    if (length < 0) {
      length = lead;
    } else if (lead != length) {
      throw TypeError(
          fmt::format("{}: xs leaf {} ({}) has leading dim {} but xs leaf 0 has {}; "
                      "all xs must have the same length",
                      what, k, t.long_str(), lead, length));
    }
  }
  if (options.length) {
    if (*options.length < 0)
      throw Error(fmt::format("{}: length={} is negative", what, *options.length));
    if (length >= 0 && *options.length != length)
      throw TypeError(fmt::format("{}: length={} was given but the xs have leading dim {}", what,
                                  *options.length, length));
    length = *options.length;
  }
  if (length < 0)
    throw Error(
        fmt::format("{}: there are no xs to take the number of iterations from; pass "
                    "it as {{.length = n}}",
                    what));
  check_ref_aliasing(xs, {}, fmt::format("{} (its xs)", what));

  std::vector<Type> xs_rows;
  for (const Operand& x : xs) xs_rows.push_back(row_type(type_of(x)));

  auto checked_body = [&](const std::vector<Operand>& in_types_carry) {
    return [&, in_types_carry](const std::vector<Operand>& in) {
      std::vector<Operand> outs = body(in);
      for (size_t k = 0; k < outs.size(); ++k) {
        const Ref* r = std::get_if<Ref>(&outs[k]);
        if (!r) continue;
        std::string slot = k < n_carry ? fmt::format("carry output {}", k)
                                       : fmt::format("y output {}", k - n_carry);
        std::string origin = ref_origin(*r, in, [&](size_t p) {
          return p < n_carry ? fmt::format("the carry parameter {}", p)
                             : fmt::format("the row view of the ref scanned over as xs leaf {}",
                                           p - n_carry);
        });
        throw RefError("E9", fmt::format("{}: the body returns a {} as its {} ({}); refs cannot "
                                         "be scan carries or outputs. Close over the ref (or "
                                         "scan over it) and return its contents instead: "
                                         "r.get(), or freeze(r) for a ref created inside",
                                         what, type_of(outs[k]).long_str(), slot, origin));
      }
      for (size_t k = 0; k < n_carry && k < outs.size(); ++k)
        outs[k] = coerce_weak(outs[k], type_of(in_types_carry[k]));
      return outs;
    };
  };

  auto trace = [&]() {
    std::vector<Type> in_types = types_of(carry);
    in_types.insert(in_types.end(), xs_rows.begin(), xs_rows.end());
    try {
      return trace_function(checked_body(carry), in_types, fmt::format("{} body", what));
    } catch (const TypeError& e) {
      // Inside the body a C++ scalar init is an ordinary traced value of its own dtype.
      for (size_t k = 0; k < n_carry; ++k)
        if (std::get<Value>(carry[k]).is_weak())
          throw TypeError(
              fmt::format("{} (in the {} body; the initial carry leaf {} is a C++ "
                          "scalar, traced as a {}: give it the dtype the body "
                          "needs, e.g. Value::scalar(DType::f32, 0))",
                          e.what(), what, k, type_of(carry[k]).long_str()));
      throw;
    }
  };

  // A carry whose type the body changes is an error, except for a weakly typed init (a C++
  // scalar), which takes the body's dtype; the body is then traced once more.
  TracedFunction fn = trace();
  for (int attempt = 0;; ++attempt) {
    const std::vector<Type> outs = fn.jaxpr->out_types();
    if (outs.size() < n_carry)
      throw TypeError(fmt::format("{}: the body returns {} values but the carry has {} leaves",
                                  what, outs.size(), n_carry));
    bool retrace = false;
    for (size_t k = 0; k < n_carry; ++k) {
      const Type in = type_of(carry[k]);
      if (outs[k] == in) continue;
      const Value& init = std::get<Value>(carry[k]);
      if (attempt == 0 && init.is_weak() && outs[k].shape() == in.shape()) {
        carry[k] = coerce_weak(carry[k], outs[k]);
        retrace = true;
        continue;
      }
      throw TypeError(
          fmt::format("{}: the body returns carry leaf {} as a {} but it enters the "
                      "body as a {}; the carry must keep its shape and dtype across "
                      "iterations (convert the initial carry or the body's result)",
                      what, k, outs[k].long_str(), in.long_str()));
    }
    if (!retrace) break;
    fn = trace();
  }
  check_ref_aliasing(xs, fn.consts, what);

  const int64_t num_consts = static_cast<int64_t>(fn.consts.size());
  std::vector<Operand> operands = fn.consts;
  operands.insert(operands.end(), carry.begin(), carry.end());
  operands.insert(operands.end(), xs.begin(), xs.end());
  Params params{{"jaxpr", std::make_shared<const Jaxpr>(consts_to_invars(*fn.jaxpr))},
                {"length", length},
                {"reverse", options.reverse},
                {"num_consts", num_consts},
                {"num_carry", static_cast<int64_t>(n_carry)},
                {"linear", IntList(operands.size(), 0)},
                {"unroll", options.unroll},
                {"_split_transpose", false}};
  return bind_prim(Prim::scan, operands, std::move(params));
}

std::vector<Operand> while_loop(const TraceBody& cond, const TraceBody& body,
                                const std::vector<Operand>& carry_init, const std::string& what) {
  std::vector<Operand> carry = carry_init;
  for (size_t k = 0; k < carry.size(); ++k)
    if (std::holds_alternative<Ref>(carry[k]))
      throw RefError("E9", fmt::format("{}: carry leaf {} of the initial carry is a {}; refs "
                                       "cannot be loop carries. Close over the ref in the body "
                                       "and the condition instead",
                                       what, k, type_of(carry[k]).long_str()));
  const size_t n_carry = carry.size();
  auto checked = [&](const TraceBody& fn, std::string_view part) {
    return [&, part](const std::vector<Operand>& in) {
      std::vector<Operand> outs = fn(in);
      for (size_t k = 0; k < outs.size(); ++k)
        if (std::holds_alternative<Ref>(outs[k]))
          throw RefError("E9", fmt::format("{}: the {} returns a {} as output {}; refs cannot be "
                                           "loop carries. Return its contents instead (r.get())",
                                           what, part, type_of(outs[k]).long_str(), k));
      return outs;
    };
  };
  // As in scan: a C++ scalar init takes the dtype the body gives it (one more trace).
  TracedFunction fn = trace_function(checked(body, "body"), types_of(carry), what + " body");
  std::vector<Type> outs = fn.jaxpr->out_types();
  if (outs.size() != n_carry)
    throw TypeError(fmt::format("{}: the body returns {} values but the carry has {} leaves", what,
                                outs.size(), n_carry));
  bool retrace = false;
  for (size_t k = 0; k < n_carry; ++k) {
    const Type in = type_of(carry[k]);
    if (outs[k] == in) continue;
    if (std::get<Value>(carry[k]).is_weak() && outs[k].shape() == in.shape()) {
      carry[k] = coerce_weak(carry[k], outs[k]);
      retrace = true;
      continue;
    }
    throw TypeError(
        fmt::format("{}: the body returns carry leaf {} as a {} but it enters the "
                    "body as a {}; the carry must keep its shape and dtype",
                    what, k, outs[k].long_str(), in.long_str()));
  }
  if (retrace) fn = trace_function(checked(body, "body"), types_of(carry), what + " body");
  TracedFunction c =
      trace_function(checked(cond, "condition"), types_of(carry), what + " condition");
  const std::vector<Type> pred = c.jaxpr->out_types();
  if (pred.size() != 1 || pred[0].is_ref || !pred[0].shape().empty() ||
      pred[0].dtype() != DType::bool_)
    throw TypeError(fmt::format("{}: the condition must return one bool scalar, it returns {}",
                                what, pred.empty() ? "nothing" : pred[0].long_str()));
  std::vector<Operand> operands = c.consts;
  operands.insert(operands.end(), fn.consts.begin(), fn.consts.end());
  operands.insert(operands.end(), carry.begin(), carry.end());
  Params params{{"cond_jaxpr", std::make_shared<const Jaxpr>(consts_to_invars(*c.jaxpr))},
                {"cond_nconsts", static_cast<int64_t>(c.consts.size())},
                {"body_jaxpr", std::make_shared<const Jaxpr>(consts_to_invars(*fn.jaxpr))},
                {"body_nconsts", static_cast<int64_t>(fn.consts.size())}};
  return bind_prim(Prim::while_, operands, std::move(params));
}

Value cond_index_of_pred(const Value& pred) {
  if (pred.rank() != 0)
    throw TypeError(fmt::format("cond: the predicate must be a scalar, got a {}",
                                Type(pred.type()).long_str()));
  if (is_bool(pred.dtype())) return pred;
  if (is_float(pred.dtype()))
    throw TypeError(
        fmt::format("cond: the predicate must be a bool or integer scalar, got a {}; "
                    "compare it explicitly (e.g. x > 0)",
                    Type(pred.type()).long_str()));
  return ne(pred, Value::scalar(pred.dtype(), 0));
}

std::vector<Operand> cond(const Value& index_in, const std::vector<TraceBody>& branches,
                          const std::vector<Operand>& operands, const std::string& what) {
  if (branches.empty()) throw Error(fmt::format("{}: needs at least one branch", what));
  Value index = index_in;
  if (index.rank() != 0 || is_float(index.dtype()))
    throw TypeError(
        fmt::format("{}: the branch index must be an integer or bool scalar, got a "
                    "{}",
                    what, Type(index.type()).long_str()));
  if (!is_bool(index.dtype()) && index.dtype() != DType::i32) index = convert(index, DType::i32);
  check_ref_aliasing(operands, {}, what);
  const std::vector<Type> types = types_of(operands);
  const size_t n_branches = branches.size();

  // Outputs: types must agree across branches; a weak (C++ scalar) output takes the dtype
  // of the other branches' output there, which needs a second trace of that branch.
  std::vector<std::vector<bool>> weak(n_branches);
  const std::vector<Type>* targets = nullptr;
  auto trace_branch = [&](size_t b) {
    return trace_function(
        [&, b](const std::vector<Operand>& in) {
          std::vector<Operand> outs = branches[b](in);
          weak[b].clear();
          for (size_t k = 0; k < outs.size(); ++k) {
            if (const Ref* r = std::get_if<Ref>(&outs[k])) {
              std::string origin = ref_origin(
                  *r, in, [](size_t p) { return fmt::format("the ref passed as operand {}", p); });
              throw RefError("E9", fmt::format("{}: branch {} returns a {} as output {} ({}); refs "
                                               "cannot be returned from cond branches. Return its "
                                               "contents instead (r.get())",
                                               what, b, type_of(outs[k]).long_str(), k, origin));
            }
            const Value& v = std::get<Value>(outs[k]);
            weak[b].push_back(v.is_weak());
            if (targets && k < targets->size()) outs[k] = coerce_weak(outs[k], (*targets)[k]);
          }
          return outs;
        },
        types, fmt::format("{} branch {}", what, b));
  };
  std::vector<TracedFunction> fns;
  for (size_t b = 0; b < n_branches; ++b) fns.push_back(trace_branch(b));

  std::vector<Type> target = fns[0].jaxpr->out_types();
  bool mismatch = false;
  for (size_t b = 1; b < n_branches; ++b) {
    std::vector<Type> outs = fns[b].jaxpr->out_types();
    if (outs.size() != target.size())
      throw TypeError(
          fmt::format("{}: branch 0 returns {} values but branch {} returns {}; all "
                      "branches must return the same structure",
                      what, target.size(), b, outs.size()));
    for (size_t k = 0; k < outs.size(); ++k) {
      if (outs[k] == target[k]) continue;
      mismatch = true;
      if (weak[0][k] && !weak[b][k]) target[k] = outs[k];
    }
  }
  if (mismatch) {
    targets = &target;
    for (size_t b = 0; b < n_branches; ++b) fns[b] = trace_branch(b);
    for (size_t b = 0; b < n_branches; ++b) {
      std::vector<Type> outs = fns[b].jaxpr->out_types();
      for (size_t k = 0; k < outs.size(); ++k)
        if (outs[k] != target[k])
          throw TypeError(
              fmt::format("{}: branch {} returns a {} as output {} but another branch "
                          "returns a {}; all branches must return the same types",
                          what, b, outs[k].long_str(), k, target[k].long_str()));
    }
  }

  // The eqn's operands: the union of what the branches captured, then the operands. Every
  // branch takes all of them (ignoring the other branches' captures).
  std::vector<Operand> consts;
  std::vector<std::vector<size_t>> const_slot(n_branches);
  for (size_t b = 0; b < n_branches; ++b) {
    for (const Operand& c : fns[b].consts) {
      size_t slot = consts.size();
      for (size_t i = 0; i < consts.size(); ++i)
        if (same_operand(consts[i], c)) slot = i;
      if (slot == consts.size()) consts.push_back(c);
      const_slot[b].push_back(slot);
    }
  }
  check_ref_aliasing(operands, consts, what);

  JaxprList jaxprs;
  for (size_t b = 0; b < n_branches; ++b) {
    Jaxpr j = *fns[b].jaxpr;
    std::vector<Var> lead(consts.size());
    std::vector<bool> have(consts.size(), false);
    for (size_t c = 0; c < j.constvars.size(); ++c) {
      lead[const_slot[b][c]] = j.constvars[c];
      have[const_slot[b][c]] = true;
    }
    for (size_t i = 0; i < consts.size(); ++i)
      if (!have[i]) lead[i] = j.new_var(type_of(consts[i]));
    j.invars.insert(j.invars.begin(), lead.begin(), lead.end());
    j.constvars.clear();
    jaxprs.push_back(std::make_shared<const Jaxpr>(std::move(j)));
  }
  std::vector<Operand> ins{index};
  ins.insert(ins.end(), consts.begin(), consts.end());
  ins.insert(ins.end(), operands.begin(), operands.end());
  return bind_prim(Prim::cond, ins, Params{{"branches", std::move(jaxprs)}});
}

}  // namespace refjit::flat
