#include "refjit/ir/verifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "refjit/ir/error.h"

namespace refjit {

namespace {

// Checks one jaxpr against its own variable table; `where` prefixes every message so a nested
// error reads "eqn 2 (scan), param 'jaxpr': eqn 0 (add): ...".
class Verifier {
 public:
  // `ref_inputs_may_pass_through`: the jaxpr may return its own ref invars (custom_vjp's
  // fwd_jaxpr passing a ref argument on as a residual).
  Verifier(const Jaxpr& j, std::string where, bool ref_inputs_may_pass_through = false)
      : j_(j), where_(std::move(where)), ref_inputs_may_pass_through_(ref_inputs_may_pass_through) {
    bound_.assign(j.vars.size(), false);
  }

  void run() {
    for (size_t k = 0; k < j_.constvars.size(); ++k)
      bind(j_.constvars[k], fmt::format("constvar {}", k));
    for (size_t k = 0; k < j_.invars.size(); ++k) bind(j_.invars[k], fmt::format("invar {}", k));
    for (size_t e = 0; e < j_.eqns.size(); ++e) check_eqn(e, j_.eqns[e]);
    check_started_sums();
    for (size_t k = 0; k < j_.outvars.size(); ++k) {
      const Atom& a = j_.outvars[k];
      std::string what = fmt::format("output {}", k);
      if (is_var(a)) use(as_var(a), what);
      Type t = j_.type_of(a);
      if (t.is_ref && !(ref_inputs_may_pass_through_ && is_input(a)))
        throw RefError("E9", fmt::format("{}{} has type {}{}; a jaxpr cannot return a ref (return "
                                         "the value read from it with get or freeze, or write "
                                         "into a ref passed in as an argument)",
                                         where_, what, t.str(), origin(a)));
    }
  }

 private:
  bool is_input(const Atom& a) const {
    return is_var(a) && std::find(j_.invars.begin(), j_.invars.end(), as_var(a)) != j_.invars.end();
  }

  // "`c`" for a var with a parsed name, else "#7" (its index in the variable table).
  std::string var_text(Var v) const {
    const std::string& name = j_.info(v).name;
    return name.empty() ? fmt::format("#{}", v.id) : fmt::format("`{}`", name);
  }

  // Where a returned ref comes from, for the E9 message.
  std::string origin(const Atom& a) const {
    if (!is_var(a)) return "";
    Var v = as_var(a);
    for (size_t k = 0; k < j_.invars.size(); ++k)
      if (j_.invars[k] == v) return fmt::format(" (it is input {})", k);
    for (size_t k = 0; k < j_.constvars.size(); ++k)
      if (j_.constvars[k] == v) return fmt::format(" (it is constvar {})", k);
    for (size_t e = 0; e < j_.eqns.size(); ++e)
      for (Var o : j_.eqns[e].outs)
        if (o == v) return fmt::format(" (created by eqn {} ({}))", e, prim_name(j_.eqns[e].prim));
    return "";
  }

  // A psum_start's buffer is written until its psum_wait: that wait, in the same jaxpr, is
  // the one reader of its result.
  void check_started_sums() const {
    std::map<uint32_t, size_t> started;  // result var -> the psum_start's eqn
    std::map<uint32_t, int> waits;
    for (size_t e = 0; e < j_.eqns.size(); ++e) {
      const Eqn& eqn = j_.eqns[e];
      for (size_t k = 0; k < eqn.ins.size(); ++k) {
        if (!is_var(eqn.ins[k])) continue;
        auto it = started.find(as_var(eqn.ins[k]).id);
        if (it == started.end()) continue;
        if (eqn.prim != Prim::psum_wait || ++waits[it->first] > 1)
          throw TypeError(fmt::format(
              "{}eqn {} ({}) reads {}, the result of eqn {} (psum_start), which only one "
              "psum_wait may read: the sum is being written into it until then",
              where_, e, prim_name(eqn.prim), var_text(as_var(eqn.ins[k])), it->second));
      }
      if (eqn.prim == Prim::psum_start) started[eqn.outs.at(0).id] = e;
    }
    for (const auto& [var, eqn] : started)
      if (!waits.count(var))
        throw TypeError(fmt::format(
            "{}the result of eqn {} (psum_start) is never waited for: a psum_wait in the same "
            "jaxpr must read it (returning it would return a sum still being written)",
            where_, eqn));
  }

  void check_var(Var v, const std::string& what) const {
    if (v.id >= j_.vars.size())
      throw TypeError(fmt::format("{}{} refers to variable #{} but the jaxpr has only {} variables",
                                  where_, what, v.id, j_.vars.size()));
  }

  void bind(Var v, const std::string& what) {
    check_var(v, what);
    if (bound_[v.id])
      throw TypeError(
          fmt::format("{}{} binds variable {} ({}) a second time; every variable is "
                      "bound exactly once",
                      where_, what, var_text(v), j_.type_of(v).str()));
    bound_[v.id] = true;
  }

  void use(Var v, const std::string& what) const {
    check_var(v, what);
    if (!bound_[v.id])
      throw TypeError(
          fmt::format("{}{} uses variable {} ({}) before it is bound (sub-jaxprs see "
                      "only their own binders)",
                      where_, what, var_text(v), j_.type_of(v).str()));
  }

  void check_eqn(size_t index, const Eqn& eqn) {
    std::string here = fmt::format("eqn {} ({})", index, prim_name(eqn.prim));
    std::vector<Type> in_types;
    for (size_t k = 0; k < eqn.ins.size(); ++k) {
      if (is_var(eqn.ins[k])) {
        Var v = as_var(eqn.ins[k]);
        use(v, fmt::format("{} operand {}", here, k));
        if (auto it = frozen_at_.find(v.id); it != frozen_at_.end())
          throw RefError(
              "E12", fmt::format("{}{} operand {} uses ref {} ({}) after eqn {} froze or "
                                 "freed it; such a ref cannot be used again (read it "
                                 "before freezing, or use the frozen value)",
                                 where_, here, k, var_text(v), j_.type_of(v).str(), it->second));
      }
      in_types.push_back(j_.type_of(eqn.ins[k]));
    }
    verify_subjaxprs(eqn, here);
    std::vector<Type> inferred;
    try {
      inferred = infer_types(eqn.prim, in_types, eqn.params);
    } catch (const RefError& e) {
      throw RefError(e.code(), fmt::format("{}{}: {}", where_, here, without_prim(eqn, e)));
    } catch (const TypeError& e) {
      throw TypeError(fmt::format("{}{}: {}", where_, here, without_prim(eqn, e)));
    }
    if (inferred.size() != eqn.outs.size())
      throw TypeError(fmt::format("{}{} has {} outputs but the primitive gives {}", where_, here,
                                  eqn.outs.size(), inferred.size()));
    if (prim_info(eqn.prim).effect == RefEffect::consume && !eqn.ins.empty() && is_var(eqn.ins[0]))
      frozen_at_[as_var(eqn.ins[0]).id] = index;
    for (size_t k = 0; k < eqn.outs.size(); ++k) {
      bind(eqn.outs[k], fmt::format("{} output {}", here, k));
      const Type& declared = j_.type_of(eqn.outs[k]);
      if (declared != inferred[k])
        throw TypeError(fmt::format("{}{} output {} is declared {} but the type rule gives {}",
                                    where_, here, k, declared.str(), inferred[k].str()));
    }
  }

  // A type rule's message starts with "prim: ", which `here` already says.
  static std::string_view without_prim(const Eqn& eqn, const std::exception& e) {
    std::string_view msg = e.what();
    std::string prefix = fmt::format("{}: ", prim_name(eqn.prim));
    if (msg.starts_with(prefix)) msg.remove_prefix(prefix.size());
    return msg;
  }

  void verify_subjaxprs(const Eqn& eqn, const std::string& here) const {
    for (const auto& [name, value] : eqn.params.entries()) {
      if (const auto* j = std::get_if<JaxprPtr>(&value)) {
        bool fwd = eqn.prim == Prim::custom_vjp_call && name == "fwd_jaxpr";
        if (*j) Verifier(**j, fmt::format("{}{}, param '{}': ", where_, here, name), fwd).run();
      } else if (const auto* list = std::get_if<JaxprList>(&value)) {
        for (size_t b = 0; b < list->size(); ++b)
          if ((*list)[b])
            Verifier(*(*list)[b], fmt::format("{}{}, param '{}' [{}]: ", where_, here, name, b))
                .run();
      }
    }
  }

  const Jaxpr& j_;
  std::string where_;
  bool ref_inputs_may_pass_through_;
  std::vector<bool> bound_;
  std::map<uint32_t, size_t> frozen_at_;  // ref var id -> index of the eqn that froze it
};

}  // namespace

void verify(const Jaxpr& jaxpr) { Verifier(jaxpr, "").run(); }

}  // namespace refjit
