#include "refjit/ir/use_def.h"

namespace refjit {

UseDef::UseDef(const Jaxpr& jaxpr) : jaxpr_(jaxpr) {
  const size_t n = jaxpr.vars.size();
  def_.assign(n, -1);
  // Counting sort of the reads by variable: count, then place.
  std::vector<size_t> count(n, 0);
  auto each_read = [&](auto&& f) {
    for (size_t i = 0; i < jaxpr.eqns.size(); ++i) {
      const std::vector<Atom>& ins = jaxpr.eqns[i].ins;
      for (size_t k = 0; k < ins.size(); ++k)
        if (is_var(ins[k])) f(as_var(ins[k]).id, Use{i, k});
    }
    for (size_t k = 0; k < jaxpr.outvars.size(); ++k)
      if (is_var(jaxpr.outvars[k])) f(as_var(jaxpr.outvars[k]).id, Use{kOutput, k});
  };
  each_read([&](uint32_t id, Use) { ++count.at(id); });
  first_.assign(n + 1, 0);
  for (size_t v = 0; v < n; ++v) first_[v + 1] = first_[v] + count[v];
  uses_.resize(first_[n]);
  std::vector<size_t> next(first_.begin(), first_.end() - 1);
  each_read([&](uint32_t id, Use u) { uses_[next[id]++] = u; });
  for (size_t i = 0; i < jaxpr.eqns.size(); ++i)
    for (Var o : jaxpr.eqns[i].outs) def_.at(o.id) = static_cast<int64_t>(i);
}

const Eqn* UseDef::def(const Atom& a) const {
  if (!is_var(a)) return nullptr;
  const int64_t i = def_index(as_var(a));
  return i < 0 ? nullptr : &jaxpr_.eqns[static_cast<size_t>(i)];
}

int64_t UseDef::def_index(Var v) const { return v.id < def_.size() ? def_[v.id] : -1; }

std::span<const UseDef::Use> UseDef::uses(Var v) const {
  if (v.id + 1 >= first_.size()) return {};
  return {uses_.data() + first_[v.id], first_[v.id + 1] - first_[v.id]};
}

bool UseDef::is_output(Var v) const {
  const std::span<const Use> u = uses(v);
  return !u.empty() && u.back().is_output();
}

std::vector<int32_t> UseDef::readers(Var v) const {
  std::vector<int32_t> out;
  for (const Use& u : uses(v))
    if (!u.is_output()) out.push_back(static_cast<int32_t>(u.eqn));
  return out;
}

}  // namespace refjit
