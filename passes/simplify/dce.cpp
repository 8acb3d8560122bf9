#include "passes/simplify/dce.h"

#include <algorithm>
#include <memory>
#include <unordered_set>

#include "ir/loop_params.h"
#include "passes/jaxpr_util.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

// One fixpoint round: a reverse walk marking needed eqns and vars. Internal refs become
// needed when a needed eqn uses them; then every eqn touching them is needed, which may
// make earlier writers needed, hence the outer loop.
std::vector<bool> needed_eqns(const Jaxpr& j, const std::vector<bool>& used_outputs) {
  std::unordered_set<uint32_t> needed;
  for (size_t i = 0; i < j.outvars.size(); ++i)
    if (used_outputs[i] && is_var(j.outvars[i])) needed.insert(as_var(j.outvars[i]).id);
  for (Var v : j.constvars)
    if (j.type_of(v).is_ref) needed.insert(v.id);
  for (Var v : j.invars)
    if (j.type_of(v).is_ref) needed.insert(v.id);
  std::vector<bool> keep(j.eqns.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t k = j.eqns.size(); k-- > 0;) {
      if (keep[k]) continue;
      const Eqn& e = j.eqns[k];
      bool need = has_host_effect(e) || checks_processes(e);
      for (Var o : e.outs) need |= needed.count(o.id) > 0;
      for (const Atom& a : e.ins)
        if (is_var(a) && j.type_of(as_var(a)).is_ref && needed.count(as_var(a).id)) need = true;
      if (!need) continue;
      keep[k] = true;
      changed = true;
      for (const Atom& a : e.ins)
        if (is_var(a)) needed.insert(as_var(a).id);
      for (Var o : e.outs)
        if (j.type_of(o).is_ref) needed.insert(o.id);
    }
  }
  return keep;
}

// The vars the kept eqns (`keep`) and the live outputs (`live`) of `j` read.
std::unordered_set<uint32_t> read_vars(const Jaxpr& j, const std::vector<bool>& keep,
                                       const std::vector<bool>& live) {
  std::unordered_set<uint32_t> read;
  for (size_t k = 0; k < j.eqns.size(); ++k)
    if (keep[k])
      for (const Atom& a : j.eqns[k].ins)
        if (is_var(a)) read.insert(as_var(a).id);
  for (size_t i = 0; i < j.outvars.size(); ++i)
    if (live[i] && is_var(j.outvars[i])) read.insert(as_var(j.outvars[i]).id);
  return read;
}

// Which outputs of a scan's body are live: a ys output read after the scan, a carry read
// after the scan or read by the body to compute something live, to a fixpoint. A carry
// nobody reads is only recomputed from itself, and its derivative is dead work too: where
// that derivative is 0 * inf (the norm of zeros) it would put a NaN into live cotangents,
// where JAX's DCE drops it (random program 7418).
std::vector<bool> live_body_outputs(const Eqn& e, const Jaxpr& body,
                                    const std::unordered_set<uint32_t>& used) {
  const ScanParams scan_params = ScanParams::of(e);
  const size_t nc = scan_params.num_carry;
  const size_t ncon = scan_params.num_consts;
  std::vector<bool> live(body.outvars.size());
  for (size_t i = 0; i < live.size(); ++i) live[i] = used.count(e.outs[i].id) > 0;
  for (bool changed = true; changed;) {
    changed = false;
    const std::unordered_set<uint32_t> read = read_vars(body, needed_eqns(body, live), live);
    for (size_t k = 0; k < nc; ++k)
      if (!live[k] && read.count(body.invars[ncon + k].id)) live[k] = changed = true;
  }
  return live;
}

// `e` (a scan) without the body outputs `live` says are dead: a dead carry's operand, output,
// body input and output, a dead ys output, and what the body computed only for them.
void drop_dead_outputs(Eqn& e, const std::vector<bool>& live) {
  const ScanParams scan_params = ScanParams::of(e);
  const size_t nc = scan_params.num_carry;
  const size_t ncon = scan_params.num_consts;
  const Jaxpr& body = *scan_params.body;
  Jaxpr pruned = dce(body, live);
  std::vector<Var> invars;
  std::vector<Atom> ins;
  std::vector<Var> outs;
  IntList linear;
  const IntList* old_linear = std::get_if<IntList>(e.params.find("linear"));
  for (size_t i = 0; i < body.invars.size(); ++i) {
    if (i >= ncon && i < ncon + nc && !live[i - ncon]) continue;
    invars.push_back(body.invars[i]);
    ins.push_back(e.ins[i]);
    if (old_linear && i < old_linear->size()) linear.push_back((*old_linear)[i]);
  }
  for (size_t i = 0; i < e.outs.size(); ++i)
    if (live[i]) outs.push_back(e.outs[i]);
  pruned.invars = std::move(invars);
  e.ins = std::move(ins);
  e.outs = std::move(outs);
  e.params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(pruned)));
  e.params.set("num_carry",
               static_cast<int64_t>(std::count(live.begin(), live.begin() + nc, true)));
  if (old_linear) e.params.set("linear", linear);
}

}  // namespace

Jaxpr dce(const Jaxpr& jaxpr, std::vector<bool> used_outputs) {
  if (used_outputs.empty()) used_outputs.assign(jaxpr.outvars.size(), true);
  if (used_outputs.size() != jaxpr.outvars.size())
    throw Error("dce: used_outputs has " + std::to_string(used_outputs.size()) +
                " entries but the jaxpr has " + std::to_string(jaxpr.outvars.size()) + " outputs");
  Jaxpr out = jaxpr;
  std::vector<bool> keep = needed_eqns(jaxpr, used_outputs);
  const std::unordered_set<uint32_t> used = read_vars(jaxpr, keep, used_outputs);
  out.eqns.clear();
  for (size_t k = 0; k < jaxpr.eqns.size(); ++k) {
    if (!keep[k]) continue;
    Eqn e = jaxpr.eqns[k];
    if (e.prim == Prim::jit) {
      // Prune the body's unused outputs (a dropped ref-free output costs nothing to drop).
      std::vector<bool> sub_used;
      std::vector<Var> outs;
      for (Var o : e.outs) {
        bool u = used.count(o.id) > 0;
        sub_used.push_back(u);
        if (u) outs.push_back(o);
      }
      e.params.set("jaxpr", std::make_shared<const Jaxpr>(dce(jit_body(e), sub_used)));
      if (has_custom_jvp_rule(e)) {  // its outputs: the body's, then their tangents
        std::vector<bool> rule_used = sub_used;
        rule_used.insert(rule_used.end(), sub_used.begin(), sub_used.end());
        const Jaxpr& rule = *e.params.get<JaxprPtr>("jvp_jaxpr");
        e.params.set("jvp_jaxpr", std::make_shared<const Jaxpr>(dce(rule, rule_used)));
      }
      e.outs = outs;
    } else {
      if (e.prim == Prim::scan) {
        const Jaxpr& body = *e.params.get<JaxprPtr>("jaxpr");
        // (Refs are never carries, and a scan's effects on its ref consts stay in the body.)
        const std::vector<bool> live = live_body_outputs(e, body, used);
        if (std::find(live.begin(), live.end(), false) != live.end()) drop_dead_outputs(e, live);
      }
      // A scan's body or a cond's branches keep their signature; what they compute and
      // nobody reads goes (canonicalize leaves the [1, n] broadcast it composed away there).
      rewrite_body(e, [](Jaxpr& body) {
        Jaxpr pruned = dce(body);
        const int removed = static_cast<int>(body.eqns.size() - pruned.eqns.size());
        if (removed > 0) body = std::move(pruned);
        return removed;
      });
    }
    for (Var o : e.outs)
      if (!used.count(o.id) && !out.type_of(o).is_ref) out.vars[o.id].dropped = true;
    out.eqns.push_back(std::move(e));
  }
  out.outvars.clear();
  for (size_t i = 0; i < jaxpr.outvars.size(); ++i)
    if (used_outputs[i]) out.outvars.push_back(jaxpr.outvars[i]);
  return out;
}

}  // namespace refjit
