// Linearize of `scan` (REFS.md 4.2): the JVP scan (primal and tangent binders fused) is
// split by partial evaluation of its body into
//  * a known (primal) scan: the primal consts/carries/xs, every primal ref effect (reads of
//    closed-over refs happen here, once per step), the primal outputs, and per-step
//    residuals as extra stacked ys;
//  * a staged linear scan: the tangent consts (tangent refs stay ref consts), the tangent
//    carries and xs, and the residuals as xs.
// Residuals are only what the linear body reads: a known const binder is passed to the
// linear scan as a const (loop-invariant, not stacked), a known xs binder as the original xs
// (indices such as `rows`/`cols` are not copied), anything else computed per step (an index,
// a read slice, cos x) as a stacked y. Eqns of literals only (zeros), and cheap integer index
// math on known consts/xs (is_index_math), are recomputed in the linear body instead of saved. A
// ref is a residual only when a custom_vjp_call's bwd shares it (a plumbing ref const or scanned
// ref, passed as it is); its reads stay primal. The body's JVP is computed in linearize mode, so a
// cond arrives split into a primal cond (returning every branch's residuals) and a linear cond, and
// a custom_vjp_call into its fwd and a linear custom_vjp_call running bwd when transposed: the
// linear halves are staged whole, their residuals stacked per step like any other.

#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/loop_params.h"
#include "passes/ad/linearize_rules.h"
#include "passes/ad/remat.h"
#include "passes/jaxpr_util.h"
#include "passes/simplify/inline.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

bool any_unknown(const Eqn& q, const std::function<bool(const Atom&)>& is_unk) {
  for (const Atom& a : q.ins)
    if (is_unk(a)) return true;
  return false;
}

// Which values of a (jit-inlined) JVP scan body depend on the tangent inputs, given which
// operands do: a fixpoint over (a) values computed from unknown ones, (b) refs an unknown
// value is written into (tangent refs; their new_ref is staged), (c) carries whose carry-out
// is unknown. A nested scan is classified recursively (its primal outputs stay known).
struct Classified {
  std::vector<bool> in_unk;  // per operand, after the carry fixpoint
  std::vector<bool> out_unk;
  std::unordered_set<uint32_t> unk;
};

Classified classify(const Jaxpr& body, size_t nc, size_t ncar, std::vector<bool> in_unk) {
  Classified c;
  auto is_unk = [&](const Atom& a) { return is_var(a) && c.unk.count(as_var(a).id) > 0; };
  for (;;) {
    c.unk.clear();
    for (size_t i = 0; i < in_unk.size(); ++i)
      if (in_unk[i]) c.unk.insert(body.invars[i].id);
    for (bool changed = true; changed;) {
      changed = false;
      for (const Eqn& q : body.eqns) {
        if (q.prim == Prim::scan && any_unknown(q, is_unk)) {
          const Jaxpr nb = inline_jit(*q.params.get<JaxprPtr>("jaxpr"));
          std::vector<bool> sub(q.ins.size());
          for (size_t i = 0; i < q.ins.size(); ++i) sub[i] = is_unk(q.ins[i]);
          const ScanParams inner = ScanParams::of(q);
          Classified sc = classify(nb, inner.num_consts, inner.num_carry, sub);
          for (size_t i = 0; i < q.outs.size(); ++i)
            if (sc.out_unk[i]) changed |= c.unk.insert(q.outs[i].id).second;
          continue;
        }
        bool u = any_unknown(q, is_unk);
        if (q.prim == Prim::new_ref) u |= is_unk(q.outs[0]);
        if ((q.prim == Prim::swap || q.prim == Prim::addupdate) && is_unk(q.ins[1]) &&
            !is_unk(q.ins[0])) {
          c.unk.insert(as_var(q.ins[0]).id);
          changed = true;
        }
        if (!u) continue;
        for (Var o : q.outs) changed |= c.unk.insert(o.id).second;
      }
    }
    bool grew = false;
    for (size_t k = 0; k < ncar; ++k)
      if (!in_unk[nc + k] && is_unk(body.outvars[k])) in_unk[nc + k] = grew = true;
    if (!grew) break;
  }
  c.in_unk = std::move(in_unk);
  for (size_t i = 0; i < body.outvars.size(); ++i)
    c.out_unk.push_back(i < ncar ? c.in_unk[nc + i] : is_unk(body.outvars[i]));
  return c;
}

// Cheap integer index arithmetic (e.g. `row * w + (col + iota(n))` from a scan's xs): the
// linear body recomputes it from the xs instead of reading a stacked per-step residual. That
// saves the stack (length * |index| entries) and keeps the index's structure visible to the
// transposed body (passes/simplify/unit_run.h: a contiguous run has O(1) range tests, and the
// backend moves it as one block).
bool is_index_math(const Jaxpr& body, const Eqn& q) {
  static const std::unordered_set<Prim> kCheap = {Prim::iota,
                                                  Prim::slice,
                                                  Prim::squeeze,
                                                  Prim::reshape,
                                                  Prim::expand_dims,
                                                  Prim::add,
                                                  Prim::sub,
                                                  Prim::mul,
                                                  Prim::neg,
                                                  Prim::max,
                                                  Prim::min,
                                                  Prim::broadcast_in_dim,
                                                  Prim::convert_element_type};
  if (!kCheap.count(q.prim)) return false;
  for (const Var& o : q.outs) {
    const Type t = body.type_of(o);
    if (t.is_ref || (t.array.dtype != DType::i32 && t.array.dtype != DType::i64) ||
        t.array.num_elements() > (int64_t{1} << 16))
      return false;
  }
  return true;
}

// A broadcast or reshape of one array operand, no larger than its result: its result, if the
// linear body reads it, is remade there from the operand rather than stacked per step. An
// n-body step's 1 / r2 ** 1.5 broadcast over xyz had been stacked three times over.
bool is_reshaping(const Jaxpr& body, const Eqn& q) {
  if (q.prim != Prim::broadcast_in_dim && q.prim != Prim::reshape && q.prim != Prim::expand_dims &&
      q.prim != Prim::squeeze)
    return false;
  if (q.ins.empty() || !is_var(q.ins[0]) || q.outs.size() != 1) return false;
  for (size_t i = 1; i < q.ins.size(); ++i)  // (a reshape's dynamic sizes, if any)
    if (is_var(q.ins[i])) return false;
  const Type in = body.type_of(as_var(q.ins[0])), out = body.type_of(q.outs[0]);
  return !in.is_ref && !out.is_ref && in.array.num_elements() <= out.array.num_elements();
}

}  // namespace

// `e` is a JVP scan eqn of `j`; `outer_unknown` says which of its operands depend on the
// tangent inputs. New vars (the residual stacks) are added to `j`.
EqnSplit split_scan_for_linearize(Jaxpr& j, const Eqn& e,
                                  const std::function<bool(const Atom&)>& outer_unknown) {
  // Jits in the body (the JVP of a jit is one fused jit) are inlined: partial evaluation
  // then sees their primal and tangent eqns separately. A checkpointed one's eqns keep its
  // remat policy (passes/ad/remat.h).
  std::vector<std::string> policies;
  Jaxpr body = inline_jit(*e.params.get<JaxprPtr>("jaxpr"), policies);
  const ScanParams scan_params = ScanParams::of(e);
  const size_t nc = scan_params.num_consts;
  const size_t ncar = scan_params.num_carry;
  const int64_t length = scan_params.length;
  const size_t n = e.ins.size(), nout = e.outs.size();

  std::vector<bool> outer(n);
  for (size_t i = 0; i < n; ++i) outer[i] = outer_unknown(e.ins[i]);
  Classified cl = classify(body, nc, ncar, outer);
  const std::vector<bool>& in_unk = cl.in_unk;
  const std::vector<bool>& out_unk = cl.out_unk;
  auto is_unk = [&](const Atom& a) { return is_var(a) && cl.unk.count(as_var(a).id) > 0; };
  for (size_t i = 0; i < n; ++i)
    if (in_unk[i] && body.type_of(body.invars[i]).is_ref && !outer[i])
      throw Error(
          "linearize: a differentiated value is written into a scan's ref operand that has "
          "no tangent");

  // Each body eqn goes to the known body, the linear body, or (a nested scan) is split into
  // both halves. Known eqns of literals only (no refs) are "replicable": recomputed in the
  // linear body rather than saved.
  const size_t ne = body.eqns.size();
  // Known const and xs binders: the linear scan can be given them as they are (no stacking),
  // so integer index math on them is recomputed there too (see is_index_math).
  std::unordered_set<uint32_t> passed_binders;
  for (size_t i = 0; i < n; ++i)
    if (!in_unk[i] && (i < nc || i >= nc + ncar) && !body.type_of(body.invars[i]).is_ref)
      passed_binders.insert(body.invars[i].id);
  std::vector<std::optional<Eqn>> known_part(ne), staged_part(ne);
  std::unordered_set<uint32_t> replicable;
  // Known results of a broadcast or reshape (is_reshaping): the linear body redoes the op on
  // its operand, which is saved instead. Unlike `replicable`, these do not make the eqns that
  // use them replicable: only the reshaping itself is redone, never arithmetic.
  std::unordered_set<uint32_t> reshaped;
  std::unordered_map<uint32_t, size_t> producer;
  for (size_t k = 0; k < ne; ++k) {
    const Eqn q = body.eqns[k];
    for (Var o : q.outs) producer[o.id] = k;
    const PartialEvalRule* split = partial_eval_rules().find(q.prim);
    if (split && any_unknown(q, is_unk)) {
      EqnSplit sub = split->fn(body, q, is_unk);
      known_part[k] = std::move(sub.known);
      staged_part[k] = std::move(sub.staged);
      continue;
    }
    bool s = any_unknown(q, is_unk);
    for (Var o : q.outs) s |= is_unk(o);
    if (s) {
      // The body was differentiated in linearize mode: an unknown cond is the linear cond
      // (index and residuals, then tangents) and an unknown custom_vjp_call the linear one
      // (residuals, then slots), both staged whole; their known halves stay in the known body.
      staged_part[k] = q;
      continue;
    }
    known_part[k] = q;
    bool rep = !touches_refs(body, q) && !prim_info(q.prim).has_subjaxprs;
    const bool index_math = is_index_math(body, q);
    for (const Atom& a : q.ins)
      rep &= !is_var(a) || replicable.count(as_var(a).id) > 0 ||
             (index_math && passed_binders.count(as_var(a).id) > 0);
    // Under a checkpoint policy that does not save it, the linear body recomputes it from its
    // operands, which are then needed in turn (a step's carry is stacked instead).
    rep |= recomputed_by_remat(body, q, policies[k]);
    if (rep)
      for (Var o : q.outs) replicable.insert(o.id);
    else if (is_reshaping(body, q))
      for (Var o : q.outs) reshaped.insert(o.id);
  }

  // What the linear body reads from the known side.
  std::vector<bool> copy_to_linear(ne, false);  // replicable eqns the linear body recomputes
  std::unordered_set<uint32_t> seen;
  std::vector<Var> needed_order;
  std::function<void(const Atom&)> need = [&](const Atom& a) {
    if (!is_var(a) || is_unk(a) || !seen.insert(as_var(a).id).second) return;
    Var v = as_var(a);
    if (replicable.count(v.id) || reshaped.count(v.id)) {
      size_t k = producer.at(v.id);
      copy_to_linear[k] = true;
      for (const Atom& x : body.eqns[k].ins) need(x);
      return;
    }
    needed_order.push_back(v);
  };
  for (size_t k = 0; k < ne; ++k)
    if (staged_part[k])
      for (const Atom& a : staged_part[k]->ins) need(a);
  for (size_t i = 0; i < nout; ++i)
    if (out_unk[i]) need(body.outvars[i]);

  // Classify residuals: const binder, xs binder, or a stacked per-step value.
  std::unordered_map<uint32_t, size_t> binder;
  for (size_t i = 0; i < n; ++i) binder[body.invars[i].id] = i;
  std::vector<size_t> res_consts, res_xs;
  std::vector<Var> res_stacked;
  for (Var v : needed_order) {
    auto it = binder.find(v.id);
    // A primal ref reaches the linear body only as a custom_vjp_call operand or residual (a
    // plumbing ref its bwd writes): a ref const or scanned ref is passed to the linear scan
    // as it is. A ref made inside the body cannot outlive the step.
    if (body.type_of(v).is_ref &&
        (it == binder.end() || (it->second >= nc && it->second < nc + ncar)))
      throw Error(
          "linearize: the linear part of a scan body would need a ref created inside the "
          "body (shared with a custom_vjp backward pass); only the scan's ref operands can "
          "be shared with the backward pass");
    if (it != binder.end() && it->second < nc)
      res_consts.push_back(it->second);
    else if (it != binder.end() && it->second >= nc + ncar)
      res_xs.push_back(it->second);
    else
      res_stacked.push_back(v);  // a known carry or a value computed in the step
  }

  // --- The known scan.
  Jaxpr kb;
  kb.vars = body.vars;
  std::vector<Atom> k_ins;
  std::vector<Var> k_outs;
  size_t k_nc = 0, k_ncar = 0;
  for (size_t i = 0; i < n; ++i)
    if (!in_unk[i]) {
      kb.invars.push_back(body.invars[i]);
      k_ins.push_back(e.ins[i]);
      k_nc += i < nc;
      k_ncar += i >= nc && i < nc + ncar;
    }
  for (size_t k = 0; k < ne; ++k)
    if (known_part[k]) kb.eqns.push_back(*known_part[k]);
  for (size_t i = 0; i < nout; ++i)
    if (!out_unk[i]) {
      kb.outvars.push_back(body.outvars[i]);
      k_outs.push_back(e.outs[i]);
    }
  std::vector<Var> stacks;
  for (Var v : res_stacked) {
    kb.outvars.push_back(v);
    kb.vars[v.id].dropped = false;
    ArrayType t = body.type_of(v).array;
    t.shape.insert(t.shape.begin(), length);
    stacks.push_back(j.new_var(Type(t)));
    k_outs.push_back(stacks.back());
  }
  // `e` with another body and operands: a scan of the same length and direction.
  auto rescan = [&](Jaxpr b, std::vector<Atom> ins, std::vector<Var> outs, size_t ncon,
                    size_t ncar) {
    Params params = e.params;
    params.set("num_consts", static_cast<int64_t>(ncon));
    params.set("num_carry", static_cast<int64_t>(ncar));
    params.set("linear", NoneParam{});
    params.set("jaxpr", std::make_shared<const Jaxpr>(std::move(b)));
    return Eqn{Prim::scan, std::move(params), std::move(ins), std::move(outs)};
  };
  EqnSplit out;
  out.known = rescan(std::move(kb), std::move(k_ins), std::move(k_outs), k_nc, k_ncar);

  // --- The linear scan: [residual consts, tangent consts], tangent carries,
  // [residual xs, residual stacks, tangent xs].
  Jaxpr lb;
  lb.vars = body.vars;
  std::vector<Atom> l_ins;
  auto take = [&](size_t i) {  // the scan's operand i and its body binder
    lb.invars.push_back(body.invars[i]);
    l_ins.push_back(e.ins[i]);
  };
  for (size_t i : res_consts) take(i);
  size_t l_nc = res_consts.size(), l_ncar = 0;
  for (size_t i = 0; i < nc + ncar; ++i)
    if (in_unk[i]) {
      take(i);
      (i < nc ? l_nc : l_ncar) += 1;
    }
  for (size_t i : res_xs) take(i);
  for (size_t r = 0; r < res_stacked.size(); ++r) {
    lb.invars.push_back(res_stacked[r]);
    lb.vars[res_stacked[r].id].dropped = false;
    l_ins.push_back(stacks[r]);
  }
  for (size_t i = nc + ncar; i < n; ++i)
    if (in_unk[i]) take(i);
  for (size_t k = 0; k < ne; ++k) {
    if (copy_to_linear[k]) lb.eqns.push_back(body.eqns[k]);
    if (staged_part[k]) lb.eqns.push_back(*staged_part[k]);
  }
  std::vector<Var> l_outs;
  for (size_t i = 0; i < nout; ++i)
    if (out_unk[i]) {
      lb.outvars.push_back(body.outvars[i]);
      l_outs.push_back(e.outs[i]);
    }
  out.staged = rescan(std::move(lb), std::move(l_ins), std::move(l_outs), l_nc, l_ncar);
  return out;
}

}  // namespace refjit
