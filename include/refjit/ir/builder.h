// JaxprBuilder: appends binders and eqns to a Jaxpr, inferring output types from the
// primitive registry. Used by the tracer, the parser and every pass.
#pragma once

#include <string>
#include <vector>

#include "refjit/ir/jaxpr.h"

namespace refjit {

class JaxprBuilder {
 public:
  JaxprBuilder() = default;

  Var add_constvar(Type type, std::string name = {});
  Var add_invar(Type type, std::string name = {});

  // Appends `outs = prim[params] ins`; output types come from the type rule (which throws
  // TypeError on a mismatch). Returns the new output vars.
  std::vector<Var> add_eqn(Prim prim, std::vector<Atom> ins, Params params = {});
  // The same for a primitive with exactly one output.
  Var add_eqn1(Prim prim, std::vector<Atom> ins, Params params = {});
  // Appends an eqn with the given outputs (created by new_var), no inference.
  void add_eqn_with_outs(Prim prim, std::vector<Atom> ins, Params params, std::vector<Var> outs);

  Var new_var(Type type, bool dropped = false) { return jaxpr_.new_var(std::move(type), dropped); }
  Type type_of(const Atom& a) const { return jaxpr_.type_of(a); }

  void set_outvars(std::vector<Atom> outs) { jaxpr_.outvars = std::move(outs); }

  const Jaxpr& jaxpr() const { return jaxpr_; }
  Jaxpr& jaxpr() { return jaxpr_; }
  // Hands the jaxpr over; the builder is empty afterwards.
  Jaxpr finish() { return std::move(jaxpr_); }

 private:
  Jaxpr jaxpr_;
};

}  // namespace refjit
