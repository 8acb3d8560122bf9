// Where each variable of a jaxpr is defined and read: the index a pass builds before it
// rewrites (one level: a sub-jaxpr held by an eqn's params has variables of its own, and
// needs a UseDef of its own).
//
// A snapshot: it describes the jaxpr it was built from, and goes stale as soon as the jaxpr's
// eqns change. A pass that rewrites as it walks keeps its counts up to date itself (the
// pattern driver, passes/pattern_rewriter.h, does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

class UseDef {
 public:
  // A read of a variable: operand `operand` of eqn `eqn`, or, when `eqn` is kOutput, the
  // jaxpr's outvars[operand].
  struct Use {
    size_t eqn;
    size_t operand;
    bool is_output() const { return eqn == kOutput; }
  };
  static constexpr size_t kOutput = std::numeric_limits<size_t>::max();

  explicit UseDef(const Jaxpr& jaxpr);

  // The eqn that defines `a`, or nullptr for a literal, a constvar or an invar.
  const Eqn* def(const Atom& a) const;
  // Its index in the jaxpr's eqns, or -1.
  int64_t def_index(Var v) const;

  // Every read of `v`, in program order (eqns first, then outvars).
  std::span<const Use> uses(Var v) const;
  size_t use_count(Var v) const { return uses(v).size(); }
  // Whether `v` is one of the jaxpr's outvars.
  bool is_output(Var v) const;
  // Whether `v` is read exactly once, by an eqn (and not returned): a value a rewrite or a
  // fused lowering may consume.
  bool read_once(Var v) const { return use_count(v) == 1 && !is_output(v); }
  // The eqns reading `v`, one entry per operand read (an eqn reading it twice is listed
  // twice), in program order; the outvars are not listed.
  std::vector<int32_t> readers(Var v) const;

 private:
  const Jaxpr& jaxpr_;
  std::vector<int64_t> def_;   // per var id: defining eqn or -1
  std::vector<size_t> first_;  // per var id + 1: where its uses start in uses_
  std::vector<Use> uses_;      // grouped by var id
};

}  // namespace refjit
