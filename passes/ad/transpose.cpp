#include "passes/ad/transpose.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "passes/ad/transpose_rules.h"
#include "passes/jaxpr_util.h"
#include "passes/plain_decisions.h"
#include "passes/simplify/dce.h"
#include "passes/simplify/inline.h"
#include "refjit/ir/error.h"

namespace refjit {

const TransposeRuleTable& transpose_rules() {
  static const TransposeRuleTable table = [] {
    TransposeRuleTable t;
    register_elementwise_transpose_rules(t);
    register_shape_transpose_rules(t);
    register_window_transpose_rules(t);
    register_ref_transpose_rules(t);
    register_control_transpose_rules(t);
    register_collective_transpose_rules(t);
    register_linalg_transpose_rules(t);
    LazyCotangentTable unused;
    register_scan_transpose_rules(t, unused);
    register_aliasing_transpose_rules(t, unused);
    return t;
  }();
  return table;
}

const LazyCotangentTable& lazy_cotangent_rules() {
  static const LazyCotangentTable table = [] {
    TransposeRuleTable unused;
    LazyCotangentTable lazy;
    register_scan_transpose_rules(unused, lazy);
    register_aliasing_transpose_rules(unused, lazy);
    return lazy;
  }();
  return table;
}

namespace {

// Which linear values can carry a cotangent to a wanted input: those computed from a wanted
// input or a ref. Accumulators of the others are DontWant, so rules skip their work.
std::unordered_map<uint32_t, bool> wanted_values(const Jaxpr& lin, size_t nn,
                                                 const std::vector<AccumKind>& kinds) {
  std::unordered_map<uint32_t, bool> w;
  for (size_t i = nn; i < lin.invars.size(); ++i) {
    Var v = lin.invars[i];
    w[v.id] = kinds[i - nn] != AccumKind::dont_want || lin.type_of(v).is_ref;
  }
  for (const Eqn& e : lin.eqns) {
    bool lin_eqn = e.prim == Prim::new_ref, any = false;
    for (const Atom& a : e.ins)
      if (is_var(a) && w.count(as_var(a).id)) {
        lin_eqn = true;
        any |= w[as_var(a).id];
      }
    if (!lin_eqn) continue;
    for (Var o : e.outs) w[o.id] = any || lin.type_of(o).is_ref;
  }
  return w;
}

// The state of one transposition: non-linear values of the result, and an accumulator per
// linear value of the linear jaxpr.
class Transposer final : public LinearProgram {
 public:
  Transposer(const Jaxpr& lin, size_t nn, const std::vector<AccumKind>& kinds,
             std::vector<int> held)
      : lin_(lin), nn_(nn), kinds_(kinds), e_(b_), held_(std::move(held)) {
    held_.resize(lin_.outvars.size(), -1);
  }

  Jaxpr run() {
    bind_inputs();
    forward();
    for (size_t i = 0; i < lin_.outvars.size(); ++i)
      if (held_[i] < 0 && is_linear(lin_.outvars[i]))
        accum(lin_.outvars[i]).add(e_, Atom(*ct_in_[i]));
    hold_outputs();
    backward();
    // Held inputs whose accumulator does not already live in their ref: read them now (a
    // read of another held ref must precede that ref's overwrite), write them after.
    std::vector<std::pair<size_t, MaybeAtom>> writes;
    for (const auto& [li, r] : held_ref_) {
      Accum& acc = accum(lin_.invars[nn_ + li]);
      if (!acc.holds_in(r)) writes.emplace_back(li, acc.freeze(e_));
    }
    std::vector<Atom> outs;
    for (size_t i = nn_; i < lin_.invars.size(); ++i)
      if (kinds_[i - nn_] == AccumKind::value)
        outs.push_back(accum(lin_.invars[i]).freeze_instantiated(e_));
    for (auto& [li, v] : writes) {
      const ArrayType t = lin_.type_of(lin_.invars[nn_ + li]).array;
      e_.swap(held_ref_.at(li), v ? *v : e_.zeros(t), Indexer{}, {});  // dense fallback
    }
    b_.set_outvars(std::move(outs));
    return dce(b_.finish());
  }

 private:
  const Eqn* definition(const Atom& a) const override {
    auto it = is_var(a) ? def_.find(as_var(a).id) : def_.end();
    return it == def_.end() ? nullptr : it->second;
  }
  Accum* accumulator(const Atom& a) override { return is_linear(a) ? &accum(a) : nullptr; }
  Atom value(const Atom& a) const override { return read(a); }
  std::span<const Eqn> eqns() const override { return lin_.eqns; }

  bool is_linear(const Atom& a) const { return is_var(a) && acc_.count(as_var(a).id); }
  Accum& accum(const Atom& a) { return *acc_.at(as_var(a).id); }
  Atom read(const Atom& a) const { return is_var(a) ? env_.at(as_var(a).id) : a; }
  void give(Var v, Accum a) {
    storage_.push_back(std::move(a));
    acc_[v.id] = &storage_.back();
  }

  // Residuals, accumulator refs, then output cotangents.
  void bind_inputs() {
    for (Var v : lin_.constvars) env_[v.id] = b_.add_constvar(lin_.type_of(v), lin_.info(v).name);
    for (size_t i = 0; i < nn_; ++i)
      env_[lin_.invars[i].id] =
          b_.add_invar(lin_.type_of(lin_.invars[i]), lin_.info(lin_.invars[i]).name);
    for (size_t i = nn_; i < lin_.invars.size(); ++i) {
      Var v = lin_.invars[i];
      const Type t = lin_.type_of(v);
      const AccumKind k = kinds_[i - nn_];
      if (t.is_ref && k == AccumKind::value)
        throw RefError("E5", fmt::format("linear input {} is Ref-typed ({}): its cotangent must "
                                         "be accumulated into a ref; pass a ref accumulator or "
                                         "DontWant, not a value accumulator",
                                         i - nn_, t.str()));
      const bool held =
          std::find(held_.begin(), held_.end(), static_cast<int>(i - nn_)) != held_.end();
      if (held && k != AccumKind::ref)
        throw Error("internal: a held cotangent needs a ref accumulator");
      if (held) {
        // Starts empty: on entry the ref holds an output's cotangent, not this input's.
        held_ref_.emplace(i - nn_, b_.add_invar(Type::ref(t.array)));
        give(v, Accum::value(t.array));
      } else if (k == AccumKind::ref)
        give(v, Accum::into_ref(t.array, b_.add_invar(Type::ref(t.array))));
      else if (t.is_ref)
        give(v, Accum::for_ref_value(t.array));  // cotangent state, discarded at the end
      else
        give(v, k == AccumKind::value ? Accum::value(t.array) : Accum::dont_want(t.array));
    }
    for (size_t i = 0; i < lin_.outvars.size(); ++i)
      ct_in_.push_back(held_[i] < 0
                           ? std::optional<Var>(b_.add_invar(lin_.type_of(lin_.outvars[i])))
                           : std::nullopt);
  }

  // A held output's accumulator becomes its ref (no read) when nothing else was given to it
  // yet; otherwise (an output repeated, or that is an input with another accumulator) the
  // ref's contents are added densely.
  void hold_outputs() {
    std::unordered_set<uint32_t> taken;
    for (size_t k = 0; k < lin_.outvars.size(); ++k) {
      if (held_[k] < 0 || !is_linear(lin_.outvars[k])) continue;
      const Atom r = held_ref_.at(static_cast<size_t>(held_[k]));
      Var o = as_var(lin_.outvars[k]);
      Accum& cur = accum(o);
      if (!cur.wanted()) continue;
      if (cur.is_empty() && cur.can_alias() && taken.insert(o.id).second)
        give(o, Accum::held_in(cur.type(), r));
      else
        cur.add(e_, e_.get(r, Indexer{}, {}));
    }
  }

  // Evaluates non-linear eqns now; gives linear eqns' outputs accumulators.
  void forward() {
    const auto wanted = wanted_values(lin_, nn_, kinds_);
    for (const Eqn& q : lin_.eqns) {
      for (Var o : q.outs) def_[o.id] = &q;
      // Every ref made inside a linear jaxpr is a tangent ref, even one initialised with a
      // constant (the tangent twin of new_ref(0.0)): its contents are cotangent state.
      bool l = q.prim == Prim::new_ref;
      for (const Atom& a : q.ins) l |= is_linear(a);
      if (!l) {
        std::vector<Atom> ins;
        for (const Atom& a : q.ins) ins.push_back(read(a));
        std::vector<Var> outs = e_.copy_eqn(lin_, q, ins);
        for (size_t i = 0; i < outs.size(); ++i) env_[q.outs[i].id] = outs[i];
        continue;
      }
      linear_eqns_.push_back(&q);
      for (Var o : q.outs) {
        const Type t = lin_.type_of(o);
        auto w = wanted.find(o.id);
        const bool want = w != wanted.end() && w->second;
        give(o, t.is_ref ? Accum::for_ref_value(t.array)
                         : (want ? Accum::value(t.array) : Accum::dont_want(t.array)));
      }
    }
  }

  // The core loop: each linear eqn, last first, hands its output cotangents to its
  // operands' accumulators through its transpose rule.
  void backward() {
    for (auto it = linear_eqns_.rbegin(); it != linear_eqns_.rend(); ++it) {
      const Eqn& q = **it;
      TransposeArgs args{q, {}, {}, {}, {}, this};
      bool any_ct = false;
      // Lazy rules get the output accumulators unfrozen (they may alias them).
      const bool lazy = lazy_cotangent_rules().find(q.prim) != nullptr;
      for (Var o : q.outs) {
        Accum& a = accum(o);
        args.out_acc.push_back(&a);
        if (lazy) {
          args.ct.push_back(std::nullopt);
          any_ct |= !a.is_empty();
          continue;
        }
        args.ct.push_back(lin_.type_of(o).is_ref ? std::nullopt : a.freeze(e_));
        any_ct |= args.ct.back().has_value();
      }
      for (const Atom& a : q.ins) {
        args.acc.push_back(is_linear(a) ? &accum(a) : nullptr);
        args.val.push_back(is_linear(a) ? a : read(a));
      }
      if (!any_ct && !touches_refs(lin_, q)) continue;  // a zero cotangent costs nothing
      const TransposeRule* rule = transpose_rules().find(q.prim);
      if (!rule && q.prim == Prim::while_)
        throw ReverseModeError(
            "reverse-mode differentiation of a while loop is not supported: its number of "
            "iterations is known only at run time; write the loop as scan or fori_loop with "
            "static bounds, or use forward mode (jvp, linearize)");
      if (!rule)
        throw Error(
            fmt::format("transpose: `{}` (eqn {} of the linear jaxpr) is not linear in "
                        "its differentiated operands or has no transpose rule",
                        prim_name(q.prim), &q - lin_.eqns.data()));
      (*rule)(e_, args);
    }
  }

  const Jaxpr& lin_;
  const size_t nn_;
  const std::vector<AccumKind>& kinds_;
  JaxprBuilder b_;
  Emitter e_;
  std::unordered_map<uint32_t, Atom> env_;        // non-linear values
  std::unordered_map<uint32_t, Accum*> acc_;      // linear values
  std::unordered_map<uint32_t, const Eqn*> def_;  // every value an eqn of lin_ defines
  std::deque<Accum> storage_;                     // stable addresses
  std::vector<int> held_;                         // per output: held input, or -1
  std::map<size_t, Atom> held_ref_;               // held linear input -> its ref argument
  std::vector<std::optional<Var>> ct_in_;         // per output (none when held)
  std::vector<const Eqn*> linear_eqns_;
};

}  // namespace

Jaxpr transpose_jaxpr(const Jaxpr& linear_in, int num_nonlinear,
                      const std::vector<AccumKind>& kinds) {
  std::optional<Jaxpr> plain;  // a derived program's decisions, written out
  const Jaxpr lin = inline_jit(plain_decisions(linear_in, plain));
  const size_t nn = static_cast<size_t>(num_nonlinear);
  if (num_nonlinear < 0 || nn > lin.invars.size() || kinds.size() != lin.invars.size() - nn)
    throw Error(fmt::format("transpose: {} accumulator kinds given for {} linear inputs",
                            kinds.size(), lin.invars.size() - std::min(nn, lin.invars.size())));
  return Transposer(lin, nn, kinds, {}).run();
}

Jaxpr transpose_jaxpr_holding(const Jaxpr& linear_in, int num_nonlinear,
                              const std::vector<AccumKind>& kinds, const std::vector<int>& held) {
  std::optional<Jaxpr> plain;
  const Jaxpr lin = inline_jit(plain_decisions(linear_in, plain));
  const size_t nn = static_cast<size_t>(num_nonlinear);
  if (num_nonlinear < 0 || nn > lin.invars.size() || kinds.size() != lin.invars.size() - nn ||
      held.size() != lin.outvars.size())
    throw Error("internal: transpose_jaxpr_holding given inconsistent kinds/held");
  return Transposer(lin, nn, kinds, held).run();
}

}  // namespace refjit
