// The batching driver (passes/batching/vmap.h): walks the jaxpr, applies each primitive's rule
// (vmap_rules.cpp), runs an eqn no rule covers as a scan over the batch, and batches the
// bodies of jit, scan, cond and while.
#include "passes/batching/vmap.h"

#include <fmt/format.h>

#include <unordered_map>

#include "ir/loop_params.h"
#include "passes/batching/vmap_rules.h"
#include "passes/jaxpr_util.h"
#include "passes/plain_decisions.h"
#include "refjit/ir/builder.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

Type with_batch(const Type& t, int64_t size) {
  Shape shape{size};
  shape.insert(shape.end(), t.array.shape.begin(), t.array.shape.end());
  ArrayType a{t.array.dtype, shape};
  return t.is_ref ? Type::ref(a) : Type(a);
}

Type without_batch(const Type& t) {
  ArrayType a{t.array.dtype, Shape(t.array.shape.begin() + 1, t.array.shape.end())};
  return t.is_ref ? Type::ref(a) : Type(a);
}

Params scan_params(JaxprPtr body, int64_t length, size_t num_consts, size_t num_carry,
                   size_t num_operands) {
  return Params{{"jaxpr", std::move(body)},
                {"length", length},
                {"reverse", false},
                {"num_consts", static_cast<int64_t>(num_consts)},
                {"num_carry", static_cast<int64_t>(num_carry)},
                {"linear", IntList(num_operands, 0)},
                {"unroll", int64_t{1}},
                {"_split_transpose", false}};
}

// Whether the eqn writes (or accumulates into) its ref operand `k`, through its sub-jaxprs.
bool writes_operand(const Eqn& e, size_t k) {
  auto written = [](const Jaxpr& j, size_t binder) {
    const std::vector<RefEffects> fx = compute_effects(j);
    const size_t at = j.constvars.size() + binder;
    return at < fx.size() && (fx[at].written || fx[at].accumulated);
  };
  switch (e.prim) {
    case Prim::swap:
    case Prim::addupdate: return k == 0;
    case Prim::jit:
    case Prim::scan: return written(*e.params.get<JaxprPtr>("jaxpr"), k);
    case Prim::cond: {
      if (k == 0) return false;
      for (const JaxprPtr& br : e.params.get<JaxprList>("branches"))
        if (written(*br, k - 1)) return true;
      return false;
    }
    case Prim::while_: {
      const WhileParams while_params = WhileParams::of(e);
      const auto ncc = while_params.cond_nconsts;
      const auto nbc = while_params.body_nconsts;
      if (k < ncc) return written(*e.params.get<JaxprPtr>("cond_jaxpr"), k);
      if (k < ncc + nbc) return written(*e.params.get<JaxprPtr>("body_jaxpr"), k - ncc);
      return false;
    }
    case Prim::custom_vjp_call: return written(*e.params.get<JaxprPtr>("call_jaxpr"), k);
    case Prim::linear_solve: return false;  // its jaxprs take no refs (its type rule)
    default: return false;
  }
}

// An eqn no rule covers, run once per example: a scan over the batch whose consts are the
// unbatched operands, whose xs are the batched ones (a batched ref is scanned over, so each
// step sees its example's ref) and whose ys are the results.
std::vector<BVal> per_example_scan(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  for (Var o : e.outs)
    if (c.src.type_of(o).is_ref)
      throw Error(
          fmt::format("vmap: {} makes a ref from batched operands; no batching rule "
                      "covers it",
                      c.where));
  for (size_t k = 0; k < ins.size(); ++k)
    if (!ins[k].batched && c.e.type_of(ins[k].atom).is_ref && writes_operand(e, k))
      throw RefError("E11", fmt::format("vmap: {} depends on the batch and writes its operand {}, "
                                        "a ref that is not batched (one value for the whole "
                                        "batch). Create the ref inside the vmapped function, or "
                                        "pass it batched (an argument with in_axes 0)",
                                        c.where, k));
  JaxprBuilder body;
  std::vector<Atom> inner(ins.size()), outer;
  for (size_t k = 0; k < ins.size(); ++k)
    if (!ins[k].batched) {
      if (is_var(ins[k].atom)) {
        inner[k] = body.add_invar(c.e.type_of(ins[k].atom));
        outer.push_back(ins[k].atom);
      } else {
        inner[k] = ins[k].atom;
      }
    }
  const size_t num_consts = outer.size();
  for (size_t k = 0; k < ins.size(); ++k)
    if (ins[k].batched) {
      inner[k] = body.add_invar(without_batch(c.e.type_of(ins[k].atom)));
      outer.push_back(ins[k].atom);
    }
  std::vector<Var> outs = body.add_eqn(e.prim, inner, e.params);
  body.set_outvars(std::vector<Atom>(outs.begin(), outs.end()));
  const size_t n = outer.size();
  std::vector<BVal> r;
  for (Var v : c.e.emit(
           Prim::scan, std::move(outer),
           scan_params(std::make_shared<const Jaxpr>(body.finish()), c.size, num_consts, 0, n)))
    r.push_back({v, true});
  return r;
}

std::vector<bool> batched_flags(const std::vector<BVal>& ins, size_t from, size_t n) {
  std::vector<bool> r;
  for (size_t k = from; k < from + n; ++k) r.push_back(ins[k].batched);
  return r;
}

// jit: the body batched with its operands' batching. A custom JVP rule is batched alongside
// (each tangent as its primal), its outputs as the body's.
std::optional<std::vector<BVal>> jit(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  const std::vector<bool> flags = batched_flags(ins, 0, ins.size());
  BatchedJaxpr body = vmap_jaxpr(jit_body(e), flags, c.size);
  Params p = e.params;
  if (const JaxprPtr* rule = std::get_if<JaxprPtr>(e.params.find("jvp_jaxpr")); rule && *rule) {
    std::vector<bool> rule_in = flags, rule_out = body.out_batched;
    rule_in.insert(rule_in.end(), flags.begin(), flags.end());
    rule_out.insert(rule_out.end(), body.out_batched.begin(), body.out_batched.end());
    BatchedJaxpr batched_rule = vmap_jaxpr(**rule, rule_in, c.size, rule_out);
    if (batched_rule.out_batched != rule_out)
      throw Error(fmt::format(
          "vmap: the custom_jvp rule of `{}` gives a batched result where the function's own "
          "result is not batched; refjit cannot batch it",
          e.params.get_or<std::string>("name", "jit")));
    p.set("jvp_jaxpr", std::make_shared<const Jaxpr>(std::move(batched_rule.jaxpr)));
  }
  p.set("jaxpr", std::make_shared<const Jaxpr>(std::move(body.jaxpr)));
  std::vector<Atom> args;
  for (const BVal& v : ins) args.push_back(v.atom);
  std::vector<BVal> r;
  std::vector<Var> outs = c.e.emit(Prim::jit, std::move(args), std::move(p));
  for (size_t k = 0; k < outs.size(); ++k) r.push_back({outs[k], body.out_batched[k]});
  return r;
}

// `carry` becomes batched wherever the body's carry out is, until it no longer changes.
template <class Batch>
BatchedJaxpr carry_fixpoint(std::vector<bool>& carry, Batch batch) {
  for (;;) {
    BatchedJaxpr b = batch(carry);
    bool changed = false;
    for (size_t k = 0; k < carry.size(); ++k)
      if (b.out_batched[k] && !carry[k]) carry[k] = changed = true;
    if (!changed) return b;
  }
}

Atom swap_leading(BatchCtx& c, const Atom& x) {
  const int rank = c.e.array_type_of(x).rank();
  IntList perm{1, 0};
  for (int d = 2; d < rank; ++d) perm.push_back(d);
  return c.e.emit1(Prim::transpose, {x}, Params{{"permutation", perm}});
}

// scan: batched xs are scanned over with the batch as their second dim; a batched carry stays
// batched; ys come out [length, B, ...] and are turned to [B, length, ...].
std::optional<std::vector<BVal>> scan(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  const ScanParams scan_params = ScanParams::of(e);
  const Jaxpr& body = *scan_params.body;
  const auto nconsts = scan_params.num_consts;
  const auto ncarry = scan_params.num_carry;
  for (size_t k = nconsts + ncarry; k < ins.size(); ++k)
    if (ins[k].batched && c.e.type_of(ins[k].atom).is_ref) return std::nullopt;
  std::vector<bool> carry = batched_flags(ins, nconsts, ncarry);
  BatchedJaxpr b = carry_fixpoint(carry, [&](const std::vector<bool>& cb) {
    std::vector<bool> in = batched_flags(ins, 0, nconsts);
    in.insert(in.end(), cb.begin(), cb.end());
    for (size_t k = nconsts + ncarry; k < ins.size(); ++k) in.push_back(ins[k].batched);
    std::vector<bool> force(body.outvars.size(), false);
    std::copy(cb.begin(), cb.end(), force.begin());
    return vmap_jaxpr(body, in, c.size, force);
  });
  std::vector<Atom> args;
  for (size_t k = 0; k < ins.size(); ++k) {
    if (k >= nconsts && k < nconsts + ncarry)
      args.push_back(carry[k - nconsts] ? c.batched(ins[k]) : ins[k].atom);
    else if (k >= nconsts + ncarry && ins[k].batched)
      args.push_back(swap_leading(c, ins[k].atom));
    else
      args.push_back(ins[k].atom);
  }
  Params p = e.params;
  p.set("jaxpr", std::make_shared<const Jaxpr>(std::move(b.jaxpr)));
  std::vector<Var> outs = c.e.emit(Prim::scan, std::move(args), std::move(p));
  std::vector<BVal> r;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (k < ncarry || !b.out_batched[k])
      r.push_back({outs[k], b.out_batched[k]});
    else
      r.push_back({swap_leading(c, outs[k]), true});
  }
  return r;
}

// cond on an unbatched index: every branch batched alike (an output batched in one branch is
// batched in all). A batched index runs per example.
std::optional<std::vector<BVal>> cond(BatchCtx& c, const Eqn& e, const std::vector<BVal>& ins) {
  if (ins[0].batched) return std::nullopt;
  const JaxprList& branches = e.params.get<JaxprList>("branches");
  const std::vector<bool> in = batched_flags(ins, 1, ins.size() - 1);
  std::vector<bool> force(e.outs.size(), false);
  for (const JaxprPtr& br : branches) {
    BatchedJaxpr b = vmap_jaxpr(*br, in, c.size);
    for (size_t k = 0; k < force.size(); ++k) force[k] = force[k] || b.out_batched[k];
  }
  JaxprList batched;
  for (const JaxprPtr& br : branches)
    batched.push_back(std::make_shared<const Jaxpr>(vmap_jaxpr(*br, in, c.size, force).jaxpr));
  Params p = e.params;
  p.set("branches", batched);
  std::vector<Atom> args;
  for (const BVal& v : ins) args.push_back(v.atom);
  std::vector<Var> outs = c.e.emit(Prim::cond, std::move(args), std::move(p));
  std::vector<BVal> r;
  for (size_t k = 0; k < outs.size(); ++k) r.push_back({outs[k], force[k]});
  return r;
}

// while with a predicate that stays unbatched: the body batched to a fixed point of the
// carry. A predicate that depends on the batch runs per example.
std::optional<std::vector<BVal>> while_loop(BatchCtx& c, const Eqn& e,
                                            const std::vector<BVal>& ins) {
  const WhileParams while_params = WhileParams::of(e);
  const Jaxpr& cond_j = *while_params.cond;
  const Jaxpr& body_j = *while_params.body;
  const auto ncc = while_params.cond_nconsts;
  const auto nbc = while_params.body_nconsts;
  const size_t ncarry = ins.size() - ncc - nbc;
  std::vector<bool> carry = batched_flags(ins, ncc + nbc, ncarry);
  BatchedJaxpr body = carry_fixpoint(carry, [&](const std::vector<bool>& cb) {
    std::vector<bool> in = batched_flags(ins, ncc, nbc);
    in.insert(in.end(), cb.begin(), cb.end());
    return vmap_jaxpr(body_j, in, c.size, cb);
  });
  std::vector<bool> cin = batched_flags(ins, 0, ncc);
  cin.insert(cin.end(), carry.begin(), carry.end());
  BatchedJaxpr cond_b = vmap_jaxpr(cond_j, cin, c.size);
  if (cond_b.out_batched[0]) return std::nullopt;
  std::vector<Atom> args;
  for (size_t k = 0; k < ins.size(); ++k)
    args.push_back(k >= ncc + nbc && carry[k - ncc - nbc] ? c.batched(ins[k]) : ins[k].atom);
  Params p = e.params;
  p.set("cond_jaxpr", std::make_shared<const Jaxpr>(std::move(cond_b.jaxpr)));
  p.set("body_jaxpr", std::make_shared<const Jaxpr>(std::move(body.jaxpr)));
  std::vector<Var> outs = c.e.emit(Prim::while_, std::move(args), std::move(p));
  std::vector<BVal> r;
  for (size_t k = 0; k < outs.size(); ++k) r.push_back({outs[k], carry[k]});
  return r;
}

// linear_solve: the right-hand sides and the solutions batched; each of its jaxprs batched
// alike (consts as they come), so that its derivatives stay linear solves.
std::optional<std::vector<BVal>> linear_solve(BatchCtx& c, const Eqn& e,
                                              const std::vector<BVal>& ins) {
  const size_t nc = LinearSolveParams::of(e).num_consts;
  std::vector<bool> flags = batched_flags(ins, 0, nc);
  flags.resize(ins.size(), true);
  const std::vector<bool> force(ins.size() - nc, true);
  Params p = e.params;
  for (const char* name : {"solve_jaxpr", "matvec_jaxpr", "vecmat_jaxpr", "transpose_solve_jaxpr"})
    if (const JaxprPtr* j = std::get_if<JaxprPtr>(e.params.find(name)); j && *j)
      p.set(name, std::make_shared<const Jaxpr>(vmap_jaxpr(**j, flags, c.size, force).jaxpr));
  std::vector<Atom> args;
  for (size_t k = 0; k < ins.size(); ++k) args.push_back(k < nc ? ins[k].atom : c.batched(ins[k]));
  std::vector<BVal> r;
  for (Var v : c.e.emit(Prim::linear_solve, std::move(args), std::move(p))) r.push_back({v, true});
  return r;
}

}  // namespace

void register_control_batch_rules(BatchRuleTable& t) {
  t.set(Prim::linear_solve, linear_solve);
  t.set(Prim::jit, jit);
  t.set(Prim::scan, scan);
  t.set(Prim::cond, cond);
  t.set(Prim::while_, while_loop);
}

BatchedJaxpr vmap_jaxpr(const Jaxpr& jaxpr_in, const std::vector<bool>& in_batched, int64_t size,
                        const std::vector<bool>& force_out) {
  std::optional<Jaxpr> plain;  // a derived program's decisions, written out
  const Jaxpr& jaxpr = plain_decisions(jaxpr_in, plain);
  if (in_batched.size() != jaxpr.invars.size())
    throw Error(fmt::format("vmap: {} batching flags for {} inputs", in_batched.size(),
                            jaxpr.invars.size()));
  JaxprBuilder b;
  std::unordered_map<uint32_t, BVal> env;
  auto val = [&](const Atom& a) -> BVal {
    if (!is_var(a)) return {a, false};
    return env.at(as_var(a).id);
  };
  for (Var v : jaxpr.constvars)
    env[v.id] = {b.add_constvar(jaxpr.type_of(v), jaxpr.info(v).name), false};
  for (size_t k = 0; k < jaxpr.invars.size(); ++k) {
    const Var v = jaxpr.invars[k];
    const Type t = in_batched[k] ? with_batch(jaxpr.type_of(v), size) : jaxpr.type_of(v);
    env[v.id] = {b.add_invar(t, jaxpr.info(v).name), static_cast<bool>(in_batched[k])};
  }
  BatchCtx ctx{Emitter(b), size, jaxpr, ""};
  for (size_t i = 0; i < jaxpr.eqns.size(); ++i) {
    const Eqn& e = jaxpr.eqns[i];
    std::vector<BVal> ins;
    bool any = e.prim == Prim::new_ref;  // refs made inside are batched (vmap_rules.cpp)
    for (const Atom& a : e.ins) {
      ins.push_back(val(a));
      any = any || ins.back().batched;
    }
    std::vector<BVal> outs;
    if (!any) {
      std::vector<Atom> args;
      for (const BVal& v : ins) args.push_back(v.atom);
      for (Var o : ctx.e.copy_eqn(jaxpr, e, std::move(args))) outs.push_back({o, false});
    } else {
      ctx.where = describe_eqn(e, i);
      std::optional<std::vector<BVal>> r;
      if (const BatchRule* rule = batch_rules().find(e.prim)) r = (*rule)(ctx, e, ins);
      outs = r ? std::move(*r) : per_example_scan(ctx, e, ins);
    }
    for (size_t k = 0; k < e.outs.size(); ++k) env[e.outs[k].id] = outs.at(k);
  }
  BatchedJaxpr out;
  std::vector<Atom> results;
  for (size_t k = 0; k < jaxpr.outvars.size(); ++k) {
    BVal v = val(jaxpr.outvars[k]);
    if (!v.batched && k < force_out.size() && force_out[k]) v = {ctx.batched(v), true};
    results.push_back(v.atom);
    out.out_batched.push_back(v.batched);
  }
  b.set_outvars(std::move(results));
  out.jaxpr = b.finish();
  return out;
}

}  // namespace refjit
