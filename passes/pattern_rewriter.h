// The rewrite framework: a pass that simplifies a program locally is a list of named
// patterns, and one driver applies them.
//
// A pattern matches one eqn (by its primitive, or any eqn) and rewrites it: in place (new
// operands or params; the driver then offers the eqn to the patterns again), or by replacing
// its results (with atoms already defined, or with new eqns it emits). The driver walks the
// program forward, once, in order (a pattern sees the rewritten program before the eqn, and
// the original after it):
//   - operands are read through the replacements made so far;
//   - eqns a pattern emits are offered to the patterns first (a pattern need not check
//     whether what it emits is itself simplifiable, or already computed);
//   - the bodies of scan, jit and cond eqns are rewritten the same way, with the same patterns;
//   - use counts are kept current as it goes (Rewriter::use_count), so that a pattern may ask
//     whether it holds the only read of a value;
//   - at the end, pure eqns (is_pure) nobody reads are removed.
// Every application counts under the pattern's name (RewriteStats), which the pipeline prints
// after the pass (`refjit dump --emit=canonicalize`). Follows MLIR's greedy pattern driver,
// kept to what SSA eqn lists need.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "passes/jaxpr_util.h"
#include "refjit/ir/jaxpr.h"

namespace refjit {

// What a pattern did to the eqn it was given.
enum class Rewritten {
  no,        // nothing (and it emitted nothing)
  in_place,  // changed the eqn's operands or params; its results keep their meaning
  replaced,  // every result was replaced (Rewriter::replace) or is defined by an emitted eqn
};

class Rewriter;

struct RewritePattern {
  std::string_view name;     // kebab-case, as printed and in docs/pipeline.md
  std::optional<Prim> root;  // the primitive it matches; none: any eqn, after the others
  Rewritten (*apply)(Eqn& eqn, Rewriter& rewriter);
};

// How many times each pattern applied.
class RewriteStats {
 public:
  void add(std::string_view pattern) { ++counts_[std::string(pattern)]; }
  int count(std::string_view pattern) const;
  int total() const;
  // "name N, name N, ..." by name; empty when nothing applied.
  std::string summary() const;

 private:
  std::map<std::string, int, std::less<>> counts_;
};

// Whether an eqn computes values and nothing else: no ref effects or ref operands, no
// sub-jaxprs, no communication (every rank must run the same collectives), no host call.
// Such an eqn may be removed when nobody reads it, or share the results of an equal one.
bool is_pure(const Jaxpr& jaxpr, const Eqn& eqn);

// Removes the pure eqns (is_pure) of `jaxpr`'s own eqns whose results nobody reads, last first
// (so a chain feeding only removed eqns goes too); returns how many it removed. The dead-eqn
// pruning of the pattern driver and of the passes that rewrite by hand.
int remove_unread_pure_eqns(Jaxpr& jaxpr);

// What a pattern sees of the program and the changes it may make.
class Rewriter {
 public:
  const Jaxpr& jaxpr() const { return j_; }
  Type type_of(const Atom& a) const { return j_.type_of(a); }
  const ArrayType& array_type(const Atom& a) const;

  // The eqn defining `a` (already rewritten), or nullptr for a literal or a binder.
  const Eqn* def(const Atom& a) const;
  // How many operands and outvars read `a` now (0 for a literal).
  int64_t use_count(const Atom& a) const;

  Var new_var(Type type) { return j_.new_var(std::move(type)); }
  // From now on `result` (a result of the eqn being rewritten) reads as `with`. Returns false,
  // and changes nothing, when their types differ.
  bool replace(Var result, const Atom& with);
  // Adds `eqn` to the program before the eqn being rewritten; the patterns see it first.
  void emit(Eqn eqn);

  // The eqns kept after `kept` (an eqn def() returned), in order: those that run between it
  // and the eqn being rewritten.
  std::span<const Eqn> kept_after(const Eqn& kept) const;

  // An earlier pure eqn with the same primitive, operands, params and result types as
  // `eqn`, or nullptr.
  const Eqn* earlier_equal(const Eqn& eqn) const;

 private:
  friend int apply_patterns(Jaxpr&, std::span<const RewritePattern>, RewriteStats*);
  Rewriter(Jaxpr& j, std::span<const RewritePattern> patterns, RewriteStats* stats);
  int run();
  void process(Eqn eqn, int depth);
  void keep(Eqn eqn);
  void count_reads(const std::vector<Atom>& ins, int64_t delta);
  void prune_unread();

  Jaxpr& j_;
  std::span<const RewritePattern> patterns_;
  std::vector<std::vector<const RewritePattern*>> by_prim_;  // indexed by Prim
  std::vector<const RewritePattern*> any_prim_;
  RewriteStats* stats_;
  Substitution subst_;
  std::vector<int64_t> uses_;                  // per var id
  std::unordered_map<uint32_t, size_t> defs_;  // var id -> index in j_.eqns
  // For earlier_equal: pure kept eqns by primitive and operands, indexed on its first call.
  mutable std::unordered_map<std::string, std::vector<size_t>> pure_by_key_;
  mutable bool pure_indexed_ = false;
  std::vector<Eqn> emitted_;                     // by the pattern now running
  mutable std::deque<ArrayType> literal_types_;  // array_type() of literals
  int changes_ = 0;
};

// Applies `patterns` to `jaxpr` and its bodies; returns how many rewrites were made.
int apply_patterns(Jaxpr& jaxpr, std::span<const RewritePattern> patterns,
                   RewriteStats* stats = nullptr);

// A pattern pass's entry point: `jaxpr` with `patterns` applied (`jaxpr` itself when none
// applied).
Jaxpr with_patterns(const Jaxpr& jaxpr, std::span<const RewritePattern> patterns,
                    RewriteStats* stats = nullptr);

}  // namespace refjit
