#include "refjit/ir/builder.h"

#include "refjit/ir/error.h"

namespace refjit {

Var JaxprBuilder::add_constvar(Type type, std::string name) {
  Var v = jaxpr_.new_var(std::move(type), false, std::move(name));
  jaxpr_.constvars.push_back(v);
  return v;
}

Var JaxprBuilder::add_invar(Type type, std::string name) {
  Var v = jaxpr_.new_var(std::move(type), false, std::move(name));
  jaxpr_.invars.push_back(v);
  return v;
}

std::vector<Var> JaxprBuilder::add_eqn(Prim prim, std::vector<Atom> ins, Params params) {
  std::vector<Type> in_types;
  in_types.reserve(ins.size());
  for (const Atom& a : ins) in_types.push_back(jaxpr_.type_of(a));
  std::vector<Type> out_types = infer_types(prim, in_types, params);
  std::vector<Var> outs;
  outs.reserve(out_types.size());
  for (Type& t : out_types) outs.push_back(jaxpr_.new_var(std::move(t)));
  jaxpr_.eqns.push_back(Eqn{prim, std::move(params), std::move(ins), outs});
  return outs;
}

Var JaxprBuilder::add_eqn1(Prim prim, std::vector<Atom> ins, Params params) {
  std::vector<Var> outs = add_eqn(prim, std::move(ins), std::move(params));
  if (outs.size() != 1)
    throw TypeError(std::string(prim_name(prim)) + " does not have exactly one output");
  return outs[0];
}

void JaxprBuilder::add_eqn_with_outs(Prim prim, std::vector<Atom> ins, Params params,
                                     std::vector<Var> outs) {
  jaxpr_.eqns.push_back(Eqn{prim, std::move(params), std::move(ins), std::move(outs)});
}

}  // namespace refjit
