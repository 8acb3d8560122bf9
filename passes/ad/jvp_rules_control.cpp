// JVP rules of the structured primitives: the body is differentiated recursively and the
// eqn is re-emitted on (primals, nonzero tangents).
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "ir/loop_params.h"
#include "passes/ad/jvp.h"
#include "passes/ad/jvp_rules.h"
#include "passes/ad/linearize.h"
#include "passes/ad/linearize_rules.h"
#include "passes/ad/transpose.h"
#include "passes/jaxpr_util.h"
#include "passes/simplify/inline.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

using Tangents = std::vector<MaybeAtom>;

// Which of `ts` from position `from` on are nonzero.
std::vector<bool> present(const std::vector<MaybeAtom>& ts, size_t from = 0) {
  std::vector<bool> r;
  for (size_t i = from; i < ts.size(); ++i) r.push_back(ts[i].has_value());
  return r;
}

// The JVP of a loop body whose first `ncar` outputs are the carries fed back to its inputs
// [first_carry, first_carry + ncar), for the nonzero input tangents `nz`: a carry whose
// tangent is nonzero after one step is differentiated from the start (a fixpoint, which
// `nz` is updated to).
JvpResult jvp_to_carry_fixpoint(const Jaxpr& body, std::vector<bool>& nz, size_t first_carry,
                                size_t ncar, bool for_linearize) {
  for (;;) {
    std::vector<bool> inst(body.outvars.size(), false);
    for (size_t i = 0; i < ncar; ++i) inst[i] = nz[first_carry + i];
    JvpResult r = jvp_jaxpr_general(body, nz, inst, for_linearize);
    bool changed = false;
    for (size_t i = 0; i < ncar; ++i)
      if (r.nonzero_out[i] && !nz[first_carry + i]) nz[first_carry + i] = changed = true;
    if (!changed) return r;
  }
}

// Emits `p[params] (ins)` whose results are the primal outs then the tangents flagged in
// `nonzero_out`; fills a.primal_outs and returns the tangents.
Tangents emit_fused(JvpCtx& c, JvpArgs& a, Prim p, const std::vector<Atom>& ins, Params params,
                    const std::vector<bool>& nonzero_out) {
  std::vector<Var> outs = c.t.emit(p, ins, std::move(params));
  size_t n = a.eqn.outs.size();
  a.primal_outs.assign(outs.begin(), outs.begin() + static_cast<long>(n));
  Tangents ts(n);
  size_t k = n;
  for (size_t i = 0; i < n; ++i)
    if (nonzero_out[i]) ts[i] = Atom(outs.at(k++));
  return ts;
}

std::vector<Atom> primals_then_tangents(const JvpArgs& a, size_t first = 0) {
  std::vector<Atom> ins(a.primals.begin() + static_cast<long>(first), a.primals.end());
  for (size_t i = first; i < a.tangents.size(); ++i)
    if (a.tangents[i]) ins.push_back(*a.tangents[i]);
  return ins;
}

// Copies the eqns of `j` onto `args` (the values of its invars): `copy(i, eqn, operands)` emits
// eqn i and returns its outputs. Returns the values of j's outvars.
using EqnCopier = std::function<std::vector<Atom>(size_t, const Eqn&, std::vector<Atom>)>;
std::vector<Atom> replay(const Jaxpr& j, const std::vector<Atom>& args, const EqnCopier& copy) {
  std::unordered_map<uint32_t, Atom> env;
  for (size_t k = 0; k < j.invars.size(); ++k) env[j.invars[k].id] = args.at(k);
  auto read = [&](const Atom& x) { return is_var(x) ? env.at(as_var(x).id) : x; };
  for (size_t i = 0; i < j.eqns.size(); ++i) {
    const Eqn& e = j.eqns[i];
    std::vector<Atom> ins;
    for (const Atom& x : e.ins) ins.push_back(read(x));
    const std::vector<Atom> outs = copy(i, e, std::move(ins));
    for (size_t k = 0; k < e.outs.size(); ++k) env[e.outs[k].id] = outs.at(k);
  }
  std::vector<Atom> result;
  for (const Atom& x : j.outvars) result.push_back(read(x));
  return result;
}

// A jit with a custom JVP rule (jax.custom_jvp): the rule's eqns, on the primals and the
// tangents (zeros where there is none), in place of the body's derivative. Each eqn goes to the
// tangent side when it reads a tangent and to the primal side otherwise, so linearize splits
// the rule as it splits the code around it. Plain jits inside the rule are inlined; jits with
// rules of their own are kept, so a second derivative applies theirs.
Tangents custom_jvp_apply(JvpCtx& c, JvpArgs& a, const Jaxpr& rule) {
  std::vector<Atom> args = a.primals;
  // Vars computed from the tangents given to the rule. Asking c.depends_on_tangents of a
  // primal is not enough: a fused eqn on the tangent side (a scan's JVP) marks its primal
  // outputs as tangent-dependent too, and the primal must stay on the primal side.
  std::unordered_set<uint32_t> from_tangents;
  for (size_t k = 0; k < a.tangents.size(); ++k) {
    args.push_back(a.tangents[k] ? *a.tangents[k] : c.p.zeros(c.p.array_type_of(a.primals[k])));
    if (c.depends_on_tangents(a.tangents[k])) from_tangents.insert(as_var(args.back()).id);
  }
  std::function<std::vector<Atom>(const Jaxpr&, const std::vector<Atom>&)> run =
      [&](const Jaxpr& j, const std::vector<Atom>& ins) {
        return replay(j, ins, [&](size_t, const Eqn& e, std::vector<Atom> e_ins) {
          if (e.prim == Prim::jit && !has_custom_jvp_rule(e)) return run(jit_body(e), e_ins);
          bool reads_tangent = false;
          for (const Atom& x : e_ins)
            reads_tangent |= is_var(x) && from_tangents.count(as_var(x).id) > 0;
          Emitter& side = reads_tangent ? c.t : c.p;
          std::vector<Atom> outs;
          for (Var v : side.copy_eqn(j, e, std::move(e_ins))) {
            outs.push_back(v);
            if (reads_tangent) from_tangents.insert(v.id);
          }
          return outs;
        });
      };
  const std::vector<Atom> outs = run(rule, args);
  const size_t n = a.eqn.outs.size();
  a.primal_outs.clear();
  for (size_t k = 0; k < n; ++k)
    a.primal_outs.push_back(is_var(outs[k]) ? as_var(outs[k])
                                            : as_var(c.p.emit1(Prim::copy, {outs[k]})));
  return Tangents(outs.begin() + static_cast<long>(n), outs.end());
}

Tangents jit_rule(JvpCtx& c, JvpArgs& a) {
  for (const auto& t : a.tangents)
    if (t.has_value()) refuse_missing_custom_rule(a.eqn, c.where);
  if (has_custom_jvp_rule(a.eqn))
    return custom_jvp_apply(c, a, *a.eqn.params.get<JaxprPtr>("jvp_jaxpr"));
  const Jaxpr& body = *a.eqn.params.get<JaxprPtr>("jaxpr");
  JvpResult r = jvp_jaxpr_general(body, present(a.tangents),
                                  std::vector<bool>(body.outvars.size(), false), c.for_linearize);
  Params params = a.eqn.params;
  params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(r.jaxpr)));
  return emit_fused(c, a, a.eqn.prim, primals_then_tangents(a), std::move(params), r.nonzero_out);
}

// Under linearize, cond is split like the function around it: each branch is linearized;
// the primal cond returns every branch's residuals (zeros for the other branches' ones) and
// the staged linear cond's branches take all residuals and use their own.
Tangents cond_linearize(JvpCtx& c, JvpArgs& a) {
  const JaxprList& branches = a.eqn.params.get<JaxprList>("branches");
  // A tangent that does not depend on the tangent inputs is zero: don't pass it, so every
  // tangent operand of the linear cond is linear (its transpose relies on it).
  for (size_t i = 1; i < a.tangents.size(); ++i)
    if (!c.depends_on_tangents(a.tangents[i])) a.tangents[i].reset();
  const std::vector<bool> nz = present(a.tangents, 1);
  std::vector<Linearized> lins;
  std::vector<Type> res_types;  // all branches' residuals, branch by branch
  std::vector<size_t> res_start;
  for (const JaxprPtr& br : branches) {
    lins.push_back(linearize_jaxpr(*br, nz));
    if (!lins.back().ref_residuals.empty())
      throw Error(
          fmt::format("linearize: {}: a cond branch shares a ref with a custom_vjp "
                      "backward pass; not supported yet",
                      c.where));
    res_start.push_back(res_types.size());
    const Jaxpr& l = lins.back().linear;
    for (int k = 0; k < lins.back().num_residuals; ++k) res_types.push_back(l.type_of(l.invars[k]));
  }
  const size_t n_out = a.eqn.outs.size();
  JaxprList primal_branches, linear_branches;
  for (size_t b = 0; b < branches.size(); ++b) {
    // Primal branch: outputs, then every branch's residual slot.
    JaxprBuilder pb;
    pb.jaxpr() = lins[b].primal;
    Emitter pe(pb);
    std::vector<Atom> outs(pb.jaxpr().outvars.begin(),
                           pb.jaxpr().outvars.begin() + static_cast<long>(n_out));
    for (size_t k = 0; k < res_types.size(); ++k) {
      size_t own = k - res_start[b];
      bool mine = k >= res_start[b] && own < static_cast<size_t>(lins[b].num_residuals);
      outs.push_back(mine ? pb.jaxpr().outvars[n_out + own] : pe.zeros(res_types[k].array));
    }
    pb.set_outvars(outs);
    primal_branches.push_back(std::make_shared<const Jaxpr>(pb.finish()));
    // Linear branch: every residual slot, then the tangents.
    Jaxpr l = lins[b].linear;
    std::vector<Var> invars;
    for (size_t k = 0; k < res_types.size(); ++k) {
      size_t own = k - res_start[b];
      bool mine = k >= res_start[b] && own < static_cast<size_t>(lins[b].num_residuals);
      invars.push_back(mine ? l.invars[own] : l.new_var(res_types[k]));
    }
    invars.insert(invars.end(), l.invars.begin() + lins[b].num_residuals, l.invars.end());
    l.invars = std::move(invars);
    linear_branches.push_back(std::make_shared<const Jaxpr>(std::move(l)));
  }
  std::vector<Var> pouts =
      c.p.emit(Prim::cond, a.primals, Params{{"branches", std::move(primal_branches)}});
  a.primal_outs.assign(pouts.begin(), pouts.begin() + static_cast<long>(n_out));
  std::vector<Atom> ins{a.primals[0]};
  ins.insert(ins.end(), pouts.begin() + static_cast<long>(n_out), pouts.end());
  for (size_t i = 1; i < a.tangents.size(); ++i)
    if (a.tangents[i]) ins.push_back(*a.tangents[i]);
  std::vector<Var> touts =
      c.t.emit(Prim::cond, ins, Params{{"branches", std::move(linear_branches)}});
  return Tangents(touts.begin(), touts.end());
}

Tangents cond_rule(JvpCtx& c, JvpArgs& a) {
  const JaxprList& branches = a.eqn.params.get<JaxprList>("branches");
  const std::vector<bool> nz = present(a.tangents, 1);
  std::vector<bool> out_nz(a.eqn.outs.size(), false);
  for (const JaxprPtr& br : branches) {
    JvpResult r = jvp_jaxpr_general(*br, nz, out_nz);
    for (size_t i = 0; i < out_nz.size(); ++i) out_nz[i] = out_nz[i] || r.nonzero_out[i];
  }
  JaxprList new_branches;
  for (const JaxprPtr& br : branches)
    new_branches.push_back(std::make_shared<const Jaxpr>(jvp_jaxpr_general(*br, nz, out_nz).jaxpr));
  Params params = a.eqn.params;
  params.set("branches", std::move(new_branches));
  std::vector<Atom> ins{a.primals[0]};
  for (const Atom& x : primals_then_tangents(a, 1)) ins.push_back(x);
  return emit_fused(c, a, a.eqn.prim, ins, std::move(params), out_nz);
}

// scan: tangents of carries are found by a fixpoint (a carry whose tangent is nonzero after
// one iteration must be differentiated from the start). Under linearize the body is
// differentiated in linearize mode too (its conds split per branch, its custom_vjp_calls
// split into fwd and a bwd-carrying linear eqn), so linearize_scan.cpp can split the body.
Tangents scan_rule(JvpCtx& c, JvpArgs& a) {
  const ScanParams scan_params = ScanParams::of(a.eqn);
  const Jaxpr& body = *scan_params.body;
  const size_t nc = scan_params.num_consts;
  const size_t ncar = scan_params.num_carry;
  const size_t nin = a.primals.size(), nout = a.eqn.outs.size();
  std::vector<bool> nz = present(a.tangents);
  JvpResult r = jvp_to_carry_fixpoint(body, nz, nc, ncar, c.for_linearize);
  // Reorder the JVP body's binders into scan's layout: consts, carry, xs (primal then tangent
  // within each group); outputs: carry, carry tangents, ys, y tangents.
  Jaxpr jb = std::move(r.jaxpr);
  std::vector<Var> prim_in(jb.invars.begin(), jb.invars.begin() + static_cast<long>(nin));
  std::vector<Var> tan_in(jb.invars.begin() + static_cast<long>(nin), jb.invars.end());
  std::vector<Var> groups[3][2];
  size_t k = 0;
  for (size_t i = 0; i < nin; ++i) {
    int g = i < nc ? 0 : (i < nc + ncar ? 1 : 2);
    groups[g][0].push_back(prim_in[i]);
    if (nz[i]) groups[g][1].push_back(tan_in[k++]);
  }
  jb.invars.clear();
  for (auto& g : groups)
    for (auto& h : g) jb.invars.insert(jb.invars.end(), h.begin(), h.end());
  std::vector<Atom> prim_out(jb.outvars.begin(), jb.outvars.begin() + static_cast<long>(nout));
  std::vector<Atom> tan_out(jb.outvars.begin() + static_cast<long>(nout), jb.outvars.end());
  std::vector<Atom> new_out;
  new_out.insert(new_out.end(), prim_out.begin(), prim_out.begin() + static_cast<long>(ncar));
  k = 0;
  std::vector<bool> out_nz = r.nonzero_out;
  for (size_t i = 0; i < ncar; ++i)
    if (out_nz[i]) new_out.push_back(tan_out[k++]);
  new_out.insert(new_out.end(), prim_out.begin() + static_cast<long>(ncar), prim_out.end());
  for (size_t i = ncar; i < nout; ++i)
    if (out_nz[i]) new_out.push_back(tan_out[k++]);
  jb.outvars = std::move(new_out);

  std::vector<Atom> ins;
  size_t n_ct = 0, n_cart = 0;
  for (int g = 0; g < 3; ++g) {
    size_t lo = g == 0 ? 0 : (g == 1 ? nc : nc + ncar),
           hi = g == 0 ? nc : (g == 1 ? nc + ncar : nin);
    for (size_t i = lo; i < hi; ++i) ins.push_back(a.primals[i]);
    for (size_t i = lo; i < hi; ++i) {
      if (!nz[i]) continue;
      ins.push_back(instantiate(c.t, a.tangents[i], c.p.array_type_of(a.primals[i])));
      if (g == 0) ++n_ct;
      if (g == 1) ++n_cart;
    }
  }
  Params params = a.eqn.params;
  params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(jb)));
  params.set("num_consts", static_cast<int64_t>(nc + n_ct));
  params.set("num_carry", static_cast<int64_t>(ncar + n_cart));
  params.set("linear", NoneParam{});
  std::vector<Var> outs = c.t.emit(Prim::scan, ins, std::move(params));
  // outs: carry, carry tangents, ys, y tangents.
  a.primal_outs.clear();
  Tangents ts(nout);
  k = 0;
  for (size_t i = 0; i < ncar; ++i) a.primal_outs.push_back(outs[k++]);
  for (size_t i = 0; i < ncar; ++i)
    if (out_nz[i]) ts[i] = Atom(outs[k++]);
  for (size_t i = ncar; i < nout; ++i) a.primal_outs.push_back(outs[k++]);
  for (size_t i = ncar; i < nout; ++i)
    if (out_nz[i]) ts[i] = Atom(outs[k++]);
  return ts;
}

// while: like scan's carries, a carry whose tangent becomes nonzero in the body is
// differentiated from the start (a fixpoint). The JVP loop carries (primals, tangents); its
// condition reads only the primals (extra, unused inputs for the tangents). Reverse mode
// (grad and vjp, which transpose the linear part) is refused as in JAX: the number of
// iterations is known only at run time, so there is no static tape; scan or fori_loop with
// static bounds differentiate.
//
// `primal_loop_first` (linearize's rule): a primal-only loop gives the primal outputs now; the
// JVP loop, which computes the primal carries again with the tangents, is then staged whole
// into the linear part (JAX's partial evaluation of while). That part is linear in the
// tangents but is no tape: transposing it (grad, vjp) is refused there.
Tangents while_loop_jvp(JvpCtx& c, JvpArgs& a, bool primal_loop_first) {
  const WhileParams while_params = WhileParams::of(a.eqn);
  const Jaxpr& cond = *while_params.cond;
  const Jaxpr& body = *while_params.body;
  const size_t nc = while_params.cond_nconsts;
  const size_t nb = while_params.body_nconsts;
  const size_t nin = a.primals.size(), ncar = nin - nc - nb;
  // nz over the body's inputs: body consts, then carries.
  std::vector<bool> nz = present(a.tangents, nc);
  JvpResult r = jvp_to_carry_fixpoint(body, nz, nb, ncar, c.for_linearize);
  size_t n_bt = 0, n_ct = 0;
  for (size_t i = 0; i < nb; ++i) n_bt += nz[i];
  for (size_t i = 0; i < ncar; ++i) n_ct += nz[nb + i];
  if (n_bt + n_ct == 0) {
    std::vector<Var> outs = c.p.emit(Prim::while_, a.primals, a.eqn.params);
    a.primal_outs.assign(outs.begin(), outs.end());
    return Tangents(ncar);
  }
  std::vector<Var> primal_outs;
  if (primal_loop_first) primal_outs = c.p.emit(Prim::while_, a.primals, a.eqn.params);
  // Body binders: (body consts, carries, body const tangents, carry tangents) -> reorder to
  // (body consts, body const tangents, carries, carry tangents).
  Jaxpr jb = std::move(r.jaxpr);
  std::vector<Var> prim_in(jb.invars.begin(), jb.invars.begin() + static_cast<long>(nb + ncar));
  std::vector<Var> tan_in(jb.invars.begin() + static_cast<long>(nb + ncar), jb.invars.end());
  jb.invars.assign(prim_in.begin(), prim_in.begin() + static_cast<long>(nb));
  jb.invars.insert(jb.invars.end(), tan_in.begin(), tan_in.begin() + static_cast<long>(n_bt));
  jb.invars.insert(jb.invars.end(), prim_in.begin() + static_cast<long>(nb), prim_in.end());
  jb.invars.insert(jb.invars.end(), tan_in.begin() + static_cast<long>(n_bt), tan_in.end());
  // The condition takes the carry tangents too, and ignores them.
  Jaxpr jc = cond;
  // The primal loop above already made the primal computation's host calls.
  if (primal_loop_first) {
    drop_host_calls(jb);
    drop_host_calls(jc);
  }
  for (size_t i = 0; i < ncar; ++i)
    if (nz[nb + i]) jc.invars.push_back(jc.new_var(jc.type_of(cond.invars[nc + i])));

  std::vector<Atom> ins(a.primals.begin(), a.primals.begin() + static_cast<long>(nc + nb));
  for (size_t i = 0; i < nb; ++i)
    if (nz[i]) ins.push_back(*a.tangents[nc + i]);
  ins.insert(ins.end(), a.primals.begin() + static_cast<long>(nc + nb), a.primals.end());
  for (size_t i = 0; i < ncar; ++i)
    if (nz[nb + i])
      ins.push_back(
          instantiate(c.t, a.tangents[nc + nb + i], c.p.array_type_of(a.primals[nc + nb + i])));
  Params params = a.eqn.params;
  params.set("cond_jaxpr", std::make_shared<const Jaxpr>(std::move(jc)));
  params.set("body_jaxpr", std::make_shared<const Jaxpr>(std::move(jb)));
  params.set("body_nconsts", static_cast<int64_t>(nb + n_bt));
  std::vector<Var> outs = c.t.emit(Prim::while_, ins, std::move(params));
  if (primal_loop_first)
    a.primal_outs.assign(primal_outs.begin(), primal_outs.end());
  else
    a.primal_outs.assign(outs.begin(), outs.begin() + static_cast<long>(ncar));
  Tangents ts(ncar);
  size_t k = ncar;
  for (size_t i = 0; i < ncar; ++i)
    if (nz[nb + i]) ts[i] = Atom(outs[k++]);
  return ts;
}

Tangents while_rule(JvpCtx& c, JvpArgs& a) { return while_loop_jvp(c, a, false); }
Tangents while_linearize(JvpCtx& c, JvpArgs& a) { return while_loop_jvp(c, a, true); }

// The forward map of a staged custom_vjp_call: (residuals, slots) -> output tangents. bwd is
// linear in its cotangents, so its transpose (residuals non-linear) is the linear map whose
// transpose bwd is: with a correct bwd it is the JVP, so running the linear jaxpr forward
// (check_ad, linearize's f_lin) agrees with forward mode. When bwd cannot be transposed (it
// touches refs, e.g. writes a plumbing ref; a slot is a ref; it is not linear in its
// cotangents) no forward map is known: the result is a placeholder of zeros and `known` is
// set false, and the eqn is marked so that running it forward is refused (reverse mode
// never runs it).
JaxprPtr custom_lin_forward(const Jaxpr& bwd, size_t n_res, const std::vector<Type>& in_types,
                            const std::vector<Type>& out_types, bool& known) {
  known = true;
  bool transposable = bwd.constvars.empty() && bwd.invars.size() == n_res + out_types.size() &&
                      bwd.outvars.size() + n_res == in_types.size();
  for (size_t i = 0; transposable && i < bwd.invars.size(); ++i) {
    const Type t = bwd.type_of(bwd.invars[i]);
    transposable = !t.is_ref && t == (i < n_res ? in_types[i] : out_types[i - n_res]);
  }
  for (size_t k = 0; transposable && k < bwd.outvars.size(); ++k)
    transposable =
        !in_types[n_res + k].is_ref && bwd.type_of(bwd.outvars[k]) == in_types[n_res + k];
  for (size_t k = 0; transposable && k < bwd.eqns.size(); ++k)
    transposable = !touches_refs(bwd, bwd.eqns[k]);
  if (transposable) {
    try {
      Jaxpr l = transpose_jaxpr(bwd, static_cast<int>(n_res),
                                std::vector<AccumKind>(out_types.size(), AccumKind::value));
      if (l.constvars.empty()) return std::make_shared<const Jaxpr>(std::move(l));
    } catch (const Error&) {
      // Not linear in its cotangents: no forward map (below).
    }
  }
  known = false;
  JaxprBuilder lb;
  for (const Type& t : in_types) lb.add_invar(t);
  Emitter le(lb);
  std::vector<Atom> zeros;
  for (const Type& t : out_types) zeros.push_back(le.zeros(t.array));
  lb.set_outvars(zeros);
  return std::make_shared<const Jaxpr>(lb.finish());
}

// Under linearize, custom_vjp_call runs fwd_jaxpr on the primal side and stages
//   custom_vjp_call[call_jaxpr=L bwd_jaxpr=bwd num_res=n] residuals..., slots...
// with one slot per original operand: its tangent, or for an operand without one its
// primal ref (a plumbing ref) or zeros. Like JAX's custom_lin this eqn is meant to be
// transposed (its transpose runs bwd); L is bwd's transpose (custom_lin_forward).
Tangents custom_vjp_linearize(JvpCtx& c, JvpArgs& a) {
  const Jaxpr& fwd = *a.eqn.params.get<JaxprPtr>("fwd_jaxpr");
  const size_t n_out = a.eqn.outs.size();
  std::vector<Atom> fouts = c.p.inline_jaxpr(fwd, a.primals);
  a.primal_outs.clear();
  for (size_t i = 0; i < n_out; ++i) {
    // A fwd output may be a literal or an input; give every primal output its own var.
    if (is_var(fouts[i]) && !c.p.type_of(fouts[i]).is_ref &&
        std::find(a.primals.begin(), a.primals.end(), fouts[i]) == a.primals.end()) {
      a.primal_outs.push_back(as_var(fouts[i]));
    } else {
      a.primal_outs.push_back(as_var(c.p.emit1(Prim::copy, {fouts[i]})));
    }
  }
  std::vector<Atom> ins(fouts.begin() + static_cast<long>(n_out), fouts.end());
  const size_t n_res = ins.size();
  for (size_t i = 0; i < a.primals.size(); ++i) {
    const Type t = c.p.type_of(a.primals[i]);
    if (a.tangents[i])
      ins.push_back(*a.tangents[i]);
    else if (t.is_ref)
      ins.push_back(a.primals[i]);
    else
      ins.push_back(c.t.zeros(t.array));
  }
  std::vector<Type> in_types, out_types;
  for (const Atom& x : ins) in_types.push_back(c.t.type_of(x));
  for (Var o : a.eqn.outs) out_types.push_back(c.src->type_of(o));
  const JaxprPtr& bwd = a.eqn.params.get<JaxprPtr>("bwd_jaxpr");
  bool forward_known = true;
  Params params{{"call_jaxpr", custom_lin_forward(*bwd, n_res, in_types, out_types, forward_known)},
                {"bwd_jaxpr", bwd},
                {"num_res", static_cast<int64_t>(n_res)}};
  if (!forward_known) params.set(kForwardUnknown, true);
  std::vector<Var> touts = c.t.emit(Prim::custom_vjp_call, ins, std::move(params));
  return Tangents(touts.begin(), touts.end());
}

// custom_vjp_call: forward mode differentiates the primal function (call_jaxpr).
Tangents custom_vjp_rule(JvpCtx& c, JvpArgs& a) {
  const Jaxpr& body = *a.eqn.params.get<JaxprPtr>("call_jaxpr");
  JvpResult r =
      jvp_jaxpr_general(body, present(a.tangents), std::vector<bool>(body.outvars.size(), false));
  Params params{{"name", std::string("custom_vjp_jvp")},
                {"jaxpr", std::make_shared<const Jaxpr>(std::move(r.jaxpr))}};
  return emit_fused(c, a, Prim::jit, primals_then_tangents(a), std::move(params), r.nonzero_out);
}

// Under linearize: custom_vjp_call with a differentiated operand, a fwd and a bwd is split
// (custom_vjp_linearize); without them it is differentiated as in forward mode.
Tangents custom_vjp_linearize_rule(JvpCtx& c, JvpArgs& a) {
  const JaxprPtr* fwd =
      a.eqn.params.find("fwd_jaxpr") ? &a.eqn.params.get<JaxprPtr>("fwd_jaxpr") : nullptr;
  const JaxprPtr* bwd =
      a.eqn.params.find("bwd_jaxpr") ? &a.eqn.params.get<JaxprPtr>("bwd_jaxpr") : nullptr;
  const bool any = std::any_of(a.tangents.begin(), a.tangents.end(),
                               [](const MaybeAtom& t) { return t.has_value(); });
  if (any && fwd && *fwd && bwd && *bwd) return custom_vjp_linearize(c, a);
  return custom_vjp_rule(c, a);
}

// The eqns of a JVP (jvp_jaxpr_general's result) on `args` (primals, present tangents), each
// on the side it belongs to: tangent work to c.t, the rest to c.p. Returns its outputs.
std::vector<Atom> inline_split(JvpCtx& c, const JvpResult& r, const std::vector<Atom>& args) {
  return replay(r.jaxpr, args, [&](size_t i, const Eqn& e, std::vector<Atom> ins) {
    Emitter& side = r.tangent_eqn.at(i) ? c.t : c.p;
    const std::vector<Var> outs = side.copy_eqn(r.jaxpr, e, std::move(ins));
    return std::vector<Atom>(outs.begin(), outs.end());
  });
}

// linear_solve, by JAX's rule for custom_linear_solve: x = solve(b) and, M the matvec in its
// consts, dx = solve(db - dM x), dM x being matvec's tangent in the consts at x. The tangent
// is a linear_solve on the primal consts (linear in its right-hand side), so differentiating
// it again or transposing it gives solves too.
Tangents linear_solve_rule(JvpCtx& c, JvpArgs& a) {
  const LinearSolveParams solve = LinearSolveParams::of(a.eqn);
  const size_t nc = solve.num_consts;
  std::vector<Var> xs = c.p.emit(Prim::linear_solve, a.primals, a.eqn.params);
  a.primal_outs = xs;
  const size_t n = xs.size();
  std::vector<MaybeAtom> rhs(a.tangents.begin() + static_cast<ptrdiff_t>(nc), a.tangents.end());
  const std::vector<bool> nonzero = present(a.tangents);
  if (std::any_of(nonzero.begin(), nonzero.begin() + static_cast<ptrdiff_t>(nc),
                  [](bool b) { return b; })) {
    if (!solve.matvec)
      throw NotDifferentiableError(fmt::format(
          "{}: cannot differentiate this linear solve in its matrix: it carries no matvec (a "
          "transposed solve made from a custom_linear_solve without vecmat)",
          c.where));
    // Linearize differentiates jit-free programs (it inlines them first); so is this one.
    const Jaxpr matvec = inline_jit(*solve.matvec);
    std::vector<bool> flags(nonzero.begin(), nonzero.begin() + static_cast<ptrdiff_t>(nc));
    flags.resize(nc + n, false);  // x is held fixed
    JvpResult r = jvp_jaxpr_general(matvec, flags, std::vector<bool>(n, false), c.for_linearize);
    std::vector<Atom> args(a.primals.begin(), a.primals.begin() + static_cast<ptrdiff_t>(nc));
    args.insert(args.end(), xs.begin(), xs.end());
    for (size_t k = 0; k < nc; ++k)
      if (a.tangents[k]) args.push_back(*a.tangents[k]);
    const std::vector<Atom> outs = inline_split(c, r, args);
    size_t next = n;
    for (size_t k = 0; k < n; ++k) {
      if (!r.nonzero_out[k]) continue;
      const Atom dmx = outs.at(next++);
      rhs[k] = rhs[k] ? c.t.emit1(Prim::sub, {*rhs[k], dmx}) : c.t.emit1(Prim::neg, {dmx});
    }
  }
  if (std::none_of(rhs.begin(), rhs.end(), [](const MaybeAtom& t) { return t.has_value(); }))
    return Tangents(n);
  std::vector<Atom> ins(a.primals.begin(), a.primals.begin() + static_cast<ptrdiff_t>(nc));
  for (size_t k = 0; k < n; ++k) ins.push_back(instantiate(c.t, rhs[k], c.p.array_type_of(xs[k])));
  std::vector<Var> dxs = c.t.emit(Prim::linear_solve, std::move(ins), a.eqn.params);
  return Tangents(dxs.begin(), dxs.end());
}

}  // namespace

void register_control_jvp_rules(JvpRuleTable& t) {
  t.set(Prim::jit, {jit_rule, true});
  t.set(Prim::cond, {cond_rule, true});
  t.set(Prim::scan, {scan_rule, true});
  t.set(Prim::while_, {while_rule, true});
  t.set(Prim::custom_vjp_call, {custom_vjp_rule, true});
  t.set(Prim::linear_solve, {linear_solve_rule, true});
}

void register_control_linearize_rules(JvpRuleTable& t) {
  t.set(Prim::cond, {cond_linearize, true});
  t.set(Prim::while_, {while_linearize, true});
  t.set(Prim::custom_vjp_call, {custom_vjp_linearize_rule, true});
}

}  // namespace refjit
