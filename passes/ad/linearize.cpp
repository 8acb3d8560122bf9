#include "passes/ad/linearize.h"

#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "passes/ad/jvp.h"
#include "passes/ad/linearize_rules.h"
#include "passes/ad/remat.h"
#include "passes/jaxpr_util.h"
#include "passes/plain_decisions.h"
#include "passes/simplify/dce.h"
#include "passes/simplify/inline.h"
#include "refjit/ir/error.h"

namespace refjit {

Linearized linearize_jaxpr(const Jaxpr& f_in, std::vector<bool> differentiated) {
  std::vector<std::string> policies;  // per eqn of f: its remat policy (passes/ad/remat.h)
  std::optional<Jaxpr> plain;         // a derived program's decisions, written out
  const Jaxpr f = inline_jit(plain_decisions(f_in, plain), policies);
  JvpResult jr = jvp_jaxpr_general(f, differentiated, {}, /*for_linearize=*/true);
  Jaxpr& j = jr.jaxpr;
  const size_t n_in = f.invars.size(), n_out = f.outvars.size();

  // Partial evaluation: tangent inputs are unknown; an eqn is staged into the linear part if
  // it is tangent work or reads an unknown value.
  std::unordered_set<uint32_t> unknown;
  for (size_t i = n_in; i < j.invars.size(); ++i) unknown.insert(j.invars[i].id);
  std::vector<const Eqn*> known_eqns, staged_eqns;
  std::vector<size_t> staged_at;  // per staged eqn: its position in j
  std::unordered_map<uint32_t, size_t> known_producer;
  std::deque<Eqn> split_eqns;  // the halves of split scans (stable addresses)
  for (size_t k = 0; k < j.eqns.size(); ++k) {
    const Eqn& e = j.eqns[k];
    bool staged = jr.tangent_eqn[k];
    for (const Atom& a : e.ins) staged |= is_var(a) && unknown.count(as_var(a).id);
    if (!staged) {
      known_eqns.push_back(&e);
      for (Var o : e.outs) known_producer[o.id] = k;
      continue;
    }
    staged_at.push_back(k);
    if (const PartialEvalRule* split = partial_eval_rules().find(e.prim)) {
      EqnSplit s = split->fn(
          j, e, [&](const Atom& a) { return is_var(a) && unknown.count(as_var(a).id) > 0; });
      split_eqns.push_back(std::move(s.known));
      known_eqns.push_back(&split_eqns.back());
      split_eqns.push_back(std::move(s.staged));
      staged_eqns.push_back(&split_eqns.back());
      for (Var o : split_eqns.back().outs) unknown.insert(o.id);
      continue;
    }
    staged_eqns.push_back(&e);
    for (Var o : e.outs) unknown.insert(o.id);
  }

  // Rematerialisation: a known eqn under a checkpoint policy that does not save it is copied
  // into the linear part when the linear part reads its result; its operands are needed in
  // turn (passes/ad/remat.h).
  std::vector<bool> recompute(j.eqns.size(), false);
  std::function<void(const Atom&)> need = [&](const Atom& a) {
    if (!is_var(a) || unknown.count(as_var(a).id)) return;
    auto it = known_producer.find(as_var(a).id);
    if (it == known_producer.end() || recompute[it->second]) return;
    const size_t k = it->second;
    if (f.eqns.empty() || !recomputed_by_remat(j, j.eqns[k], policies.at(jr.source_eqn.at(k))))
      return;
    recompute[k] = true;
    for (const Atom& x : j.eqns[k].ins) need(x);
  };
  for (const Eqn* e : staged_eqns)
    for (const Atom& a : e->ins) need(a);
  for (size_t i = n_out; i < j.outvars.size(); ++i) need(j.outvars[i]);
  // The linear part's eqns, in program order: recomputed and staged ones.
  std::vector<const Eqn*> linear_eqns;
  std::unordered_set<uint32_t> recomputed_vars;
  for (size_t k = 0, s = 0; k < j.eqns.size(); ++k) {
    if (recompute[k]) {
      linear_eqns.push_back(&j.eqns[k]);
      for (Var o : j.eqns[k].outs) recomputed_vars.insert(o.id);
    }
    while (s < staged_eqns.size() && staged_at[s] == k) linear_eqns.push_back(staged_eqns[s++]);
  }

  // Known vars read by the linear part become residuals (in order of first use).
  std::vector<Var> residuals;
  std::unordered_set<uint32_t> seen;
  auto maybe_residual = [&](const Atom& a) {
    if (!is_var(a) || unknown.count(as_var(a).id) || recomputed_vars.count(as_var(a).id) ||
        !seen.insert(as_var(a).id).second)
      return;
    residuals.push_back(as_var(a));
  };
  for (const Eqn* e : linear_eqns)
    for (const Atom& a : e->ins) maybe_residual(a);
  for (size_t i = n_out; i < j.outvars.size(); ++i) maybe_residual(j.outvars[i]);

  // The linear jaxpr: shares j's variable table (each jaxpr has its own copy).
  Jaxpr lin;
  lin.vars = j.vars;
  lin.invars = residuals;
  lin.invars.insert(lin.invars.end(), j.invars.begin() + static_cast<long>(n_in), j.invars.end());
  for (const Eqn* e : linear_eqns) lin.eqns.push_back(*e);
  lin.outvars.assign(j.outvars.begin() + static_cast<long>(n_out), j.outvars.end());
  lin = dce(lin);

  // Keep only the residuals the linear part still reads after DCE.
  std::unordered_set<uint32_t> used;
  for (const Eqn& e : lin.eqns)
    for (const Atom& a : e.ins)
      if (is_var(a)) used.insert(as_var(a).id);
  for (const Atom& a : lin.outvars)
    if (is_var(a)) used.insert(as_var(a).id);
  // Value residuals come out of the primal jaxpr. A ref can only be a residual when it is
  // one of f's own ref binders (a plumbing ref shared with a custom_vjp bwd): the caller
  // passes it to the linear part again.
  std::vector<Var> kept, kept_refs;
  std::vector<int> ref_sources;
  for (Var r : residuals) {
    if (!used.count(r.id)) continue;
    if (!lin.type_of(r).is_ref) {
      kept.push_back(r);
      continue;
    }
    int src = -1;
    for (size_t k = 0; k < j.constvars.size(); ++k)
      if (j.constvars[k] == r) src = static_cast<int>(k);
    for (size_t k = 0; k < n_in; ++k)
      if (j.invars[k] == r) src = static_cast<int>(j.constvars.size() + k);
    if (src < 0)
      throw Error(
          "linearize: the linear part would need a ref created inside the function; "
          "only the function's own ref arguments can be shared with the backward pass");
    kept_refs.push_back(r);
    ref_sources.push_back(src);
  }
  lin.invars.erase(lin.invars.begin(), lin.invars.begin() + static_cast<long>(residuals.size()));
  lin.invars.insert(lin.invars.begin(), kept_refs.begin(), kept_refs.end());
  lin.invars.insert(lin.invars.begin(), kept.begin(), kept.end());
  for (Var r : kept) lin.vars[r.id].dropped = false;

  Jaxpr primal;
  primal.vars = j.vars;
  primal.constvars = j.constvars;
  primal.invars.assign(j.invars.begin(), j.invars.begin() + static_cast<long>(n_in));
  for (const Eqn* e : known_eqns) primal.eqns.push_back(*e);
  primal.outvars.assign(j.outvars.begin(), j.outvars.begin() + static_cast<long>(n_out));
  primal.outvars.insert(primal.outvars.end(), kept.begin(), kept.end());
  primal = dce(primal);

  Linearized out;
  out.primal = std::move(primal);
  out.linear = std::move(lin);
  out.num_residuals = static_cast<int>(kept.size());
  out.ref_residuals = std::move(ref_sources);
  out.differentiated = std::move(differentiated);
  return out;
}

}  // namespace refjit
