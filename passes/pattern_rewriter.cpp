#include "passes/pattern_rewriter.h"

#include <utility>

#include "refjit/ir/error.h"
#include "refjit/ir/use_def.h"

namespace refjit {

namespace {

// Eqns a pattern emits may be rewritten into more eqns, and so on; a chain this deep means
// two patterns undo each other.
constexpr int kMaxDepth = 16;
// Rewrites in place of one eqn, likewise.
constexpr int kMaxInPlace = 16;

// Groups eqns that may compute the same: primitive and operand vars (params and types are
// compared when a candidate is found).
std::string computation_key(const Eqn& e) {
  std::string key = std::to_string(static_cast<int>(e.prim));
  for (const Atom& a : e.ins)
    key += is_var(a) ? "," + std::to_string(as_var(a).id) : std::string(",lit");
  return key;
}

}  // namespace

int RewriteStats::count(std::string_view pattern) const {
  auto it = counts_.find(pattern);
  return it == counts_.end() ? 0 : it->second;
}

int RewriteStats::total() const {
  int n = 0;
  for (const auto& [name, k] : counts_) n += k;
  return n;
}

std::string RewriteStats::summary() const {
  std::string s;
  for (const auto& [name, k] : counts_) {
    if (!s.empty()) s += ", ";
    s += name + " " + std::to_string(k);
  }
  return s;
}

bool is_pure(const Jaxpr& jaxpr, const Eqn& eqn) {
  const PrimInfo& info = prim_info(eqn.prim);
  if (info.effect != RefEffect::none || info.has_subjaxprs || info.communicates ||
      info.host_effect || eqn.outs.empty())
    return false;
  return !touches_refs(jaxpr, eqn);
}

Rewriter::Rewriter(Jaxpr& j, std::span<const RewritePattern> patterns, RewriteStats* stats)
    : j_(j), patterns_(patterns), by_prim_(kNumPrims), stats_(stats) {
  for (const RewritePattern& p : patterns) {
    if (p.root)
      by_prim_[static_cast<size_t>(*p.root)].push_back(&p);
    else
      any_prim_.push_back(&p);
  }
  const UseDef index(j);
  uses_.assign(j.vars.size(), 0);
  for (size_t v = 0; v < j.vars.size(); ++v)
    uses_[v] = static_cast<int64_t>(index.use_count(Var{static_cast<uint32_t>(v)}));
}

const ArrayType& Rewriter::array_type(const Atom& a) const {
  if (const Var* v = std::get_if<Var>(&a)) return j_.type_of(*v).array;
  // A literal's type is made on the spot; kept here so the reference stays valid.
  return literal_types_.emplace_back(std::get<Literal>(a).type());
}

const Eqn* Rewriter::def(const Atom& a) const {
  if (!is_var(a)) return nullptr;
  auto it = defs_.find(as_var(a).id);
  return it == defs_.end() ? nullptr : &j_.eqns[it->second];
}

int64_t Rewriter::use_count(const Atom& a) const {
  if (!is_var(a)) return 0;
  const uint32_t id = as_var(a).id;
  return id < uses_.size() ? uses_[id] : 0;
}

bool Rewriter::replace(Var result, const Atom& with_atom) {
  const Atom with = subst_(with_atom);
  if (j_.type_of(with) != j_.type_of(result)) return false;
  subst_.set(result, with);
  if (result.id < uses_.size()) {
    if (is_var(with)) {
      const uint32_t w = as_var(with).id;
      if (w >= uses_.size()) uses_.resize(j_.vars.size(), 0);
      uses_[w] += uses_[result.id];
    }
    uses_[result.id] = 0;
  }
  return true;
}

void Rewriter::emit(Eqn eqn) {
  for (Atom& a : eqn.ins) a = subst_(a);
  count_reads(eqn.ins, +1);
  emitted_.push_back(std::move(eqn));
}

void Rewriter::count_reads(const std::vector<Atom>& ins, int64_t delta) {
  if (uses_.size() < j_.vars.size()) uses_.resize(j_.vars.size(), 0);
  for (const Atom& a : ins)
    if (is_var(a)) uses_[as_var(a).id] += delta;
}

std::span<const Eqn> Rewriter::kept_after(const Eqn& kept) const {
  const Eqn* begin = j_.eqns.data();
  if (&kept < begin || &kept >= begin + j_.eqns.size())
    throw Error("pattern rewriting: kept_after() of an eqn that is not in the program");
  return std::span(j_.eqns).subspan(static_cast<size_t>(&kept - begin) + 1);
}

const Eqn* Rewriter::earlier_equal(const Eqn& e) const {
  if (!is_pure(j_, e)) return nullptr;
  if (!pure_indexed_) {  // built on first use: passes without a CSE pattern never pay for it
    for (size_t k = 0; k < j_.eqns.size(); ++k)
      if (is_pure(j_, j_.eqns[k])) pure_by_key_[computation_key(j_.eqns[k])].push_back(k);
    pure_indexed_ = true;
  }
  auto it = pure_by_key_.find(computation_key(e));
  if (it == pure_by_key_.end()) return nullptr;
  for (size_t k : it->second) {
    const Eqn& earlier = j_.eqns[k];
    if (earlier.prim != e.prim || earlier.ins != e.ins || earlier.outs.size() != e.outs.size() ||
        earlier.params.entries() != e.params.entries())
      continue;
    bool same_types = true;
    for (size_t i = 0; i < e.outs.size(); ++i)
      same_types &= j_.type_of(earlier.outs[i]) == j_.type_of(e.outs[i]);
    if (same_types) return &earlier;
  }
  return nullptr;
}

void Rewriter::keep(Eqn e) {
  for (Var o : e.outs) defs_[o.id] = j_.eqns.size();
  if (pure_indexed_ && is_pure(j_, e)) pure_by_key_[computation_key(e)].push_back(j_.eqns.size());
  j_.eqns.push_back(std::move(e));
}

void Rewriter::process(Eqn e, int depth) {
  if (depth > kMaxDepth)
    throw Error("pattern rewriting: the patterns keep rewriting what they emit (at " +
                std::string(prim_name(e.prim)) + "); two patterns undo each other");
  for (int round = 0; round <= kMaxInPlace; ++round) {
    // An eqn emitted with this one, or before its rewrite in place, may have been replaced
    // since (its reads were counted on the replacement then).
    for (Atom& a : e.ins) a = subst_(a);
    Rewritten done = Rewritten::no;
    const std::vector<const RewritePattern*>* lists[] = {&by_prim_[static_cast<size_t>(e.prim)],
                                                         &any_prim_};
    for (const auto* list : lists) {
      for (const RewritePattern* p : *list) {
        const std::vector<Atom> ins_before = e.ins;
        done = p->apply(e, *this);
        if (done == Rewritten::no) {
          if (!emitted_.empty())
            throw Error("pattern " + std::string(p->name) + " emitted eqns but rewrote nothing");
          continue;
        }
        if (stats_) stats_->add(p->name);
        ++changes_;
        count_reads(ins_before, -1);
        if (done == Rewritten::in_place) {
          for (Atom& a : e.ins) a = subst_(a);
          count_reads(e.ins, +1);
        }
        std::vector<Eqn> emitted = std::move(emitted_);
        emitted_.clear();
        for (Eqn& x : emitted) process(std::move(x), depth + 1);
        break;
      }
      if (done != Rewritten::no) break;
    }
    if (done == Rewritten::replaced) return;
    if (done == Rewritten::no) break;
    if (round == kMaxInPlace)
      throw Error("pattern rewriting: the patterns keep rewriting an eqn in place (now " +
                  std::string(prim_name(e.prim)) + "); a pattern matches what it made");
  }
  for (Atom& a : e.ins) a = subst_(a);
  changes_ += rewrite_body(e, [&](Jaxpr& body) { return apply_patterns(body, patterns_, stats_); });
  keep(std::move(e));
}

int remove_unread_pure_eqns(Jaxpr& j) {
  const UseDef index(j);
  std::vector<int64_t> uses(j.vars.size(), 0);
  for (size_t v = 0; v < j.vars.size(); ++v)
    uses[v] = static_cast<int64_t>(index.use_count(Var{static_cast<uint32_t>(v)}));
  std::vector<bool> drop(j.eqns.size(), false);
  int dropped = 0;
  for (size_t i = j.eqns.size(); i-- > 0;) {
    const Eqn& e = j.eqns[i];
    if (!is_pure(j, e)) continue;
    bool read = false;
    for (Var o : e.outs) read |= uses[o.id] > 0;
    if (read) continue;
    drop[i] = true;
    ++dropped;
    for (const Atom& a : e.ins)
      if (is_var(a)) --uses[as_var(a).id];
  }
  if (dropped == 0) return 0;
  std::vector<Eqn> kept;
  kept.reserve(j.eqns.size() - dropped);
  for (size_t i = 0; i < j.eqns.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(j.eqns[i]));
  j.eqns = std::move(kept);
  return dropped;
}

void Rewriter::prune_unread() {
  if (remove_unread_pure_eqns(j_) == 0) return;
  defs_.clear();  // indices moved; nothing reads them after the walk
  pure_by_key_.clear();
  pure_indexed_ = false;
}

int Rewriter::run() {
  std::vector<Eqn> in = std::move(j_.eqns);
  j_.eqns.clear();
  j_.eqns.reserve(in.size());
  for (Eqn& e : in) process(std::move(e), 0);
  for (Atom& a : j_.outvars) a = subst_(a);
  if (changes_ > 0) prune_unread();
  return changes_;
}

int apply_patterns(Jaxpr& jaxpr, std::span<const RewritePattern> patterns, RewriteStats* stats) {
  return Rewriter(jaxpr, patterns, stats).run();
}

Jaxpr with_patterns(const Jaxpr& jaxpr, std::span<const RewritePattern> patterns,
                    RewriteStats* stats) {
  return rewritten_copy(
      jaxpr, [&](Jaxpr& j) { return apply_patterns(j, patterns, stats); }, nullptr);
}

}  // namespace refjit
