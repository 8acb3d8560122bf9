#include "ir/fused_body.h"

#include <fmt/format.h>

#include <algorithm>

namespace refjit {

namespace {

bool is_reduction(Prim p) {
  return p == Prim::reduce_sum || p == Prim::reduce_max || p == Prim::reduce_min;
}

}  // namespace

bool is_view_eqn(const Jaxpr& j, const Eqn& e) {
  if (e.outs.size() != 1 || e.ins.empty() || !is_var(e.ins[0]) || j.type_of(e.outs[0]).is_ref ||
      j.type_of(as_var(e.ins[0])).is_ref)
    return false;
  if (e.prim == Prim::slice) return e.ins.size() == 1;
  if (e.prim != Prim::pad || e.ins.size() != 2 || j.type_of(e.ins[1]).array.rank() != 0 ||
      j.type_of(e.ins[1]).is_ref)
    return false;
  for (const IntList& c : e.params.get<IntListList>("padding_config"))
    if (c.size() != 3 || c[2] != 0) return false;
  return true;
}

std::string fused_body_problem(const Jaxpr& body) {
  if (!body.constvars.empty()) return "its body has constvars";
  for (Var v : body.invars)
    if (body.type_of(v).is_ref) return "its body takes a ref";
  if (body.eqns.empty()) return "its body has no eqns";
  if (body.outvars.size() != 1 || !is_var(body.outvars[0]) || body.eqns.back().outs.size() != 1 ||
      as_var(body.outvars[0]) != body.eqns.back().outs[0])
    return "its body does not return exactly its last eqn's one result";
  for (size_t i = 0; i < body.eqns.size(); ++i) {
    const Eqn& e = body.eqns[i];
    const bool root = i + 1 == body.eqns.size();
    const bool ok = (prim_info(e.prim).elementwise && e.outs.size() == 1) ||
                    (e.prim == Prim::broadcast_in_dim && e.outs.size() == 1) ||
                    is_view_eqn(body, e) || (root && is_reduction(e.prim));
    if (!ok)
      return fmt::format("eqn {} of its body ({}) is not elementwise, a broadcast, a view{}", i,
                         prim_name(e.prim), root ? " or a reduction" : "");
    for (Var o : e.outs)
      if (body.type_of(o).is_ref) return fmt::format("eqn {} of its body makes a ref", i);
  }
  return "";
}

bool read_at_result_index(const Jaxpr& body, size_t k) {
  if (k >= body.invars.size() || body.eqns.empty() || is_reduction(body.eqns.back().prim))
    return false;
  const Var x = body.invars[k];
  const Type result = body.type_of(body.outvars.at(0));
  if (body.type_of(x).array.shape != result.array.shape) return false;
  for (const Eqn& e : body.eqns)
    for (const Atom& a : e.ins)
      if (is_var(a) && as_var(a) == x &&
          (!prim_info(e.prim).elementwise ||
           body.type_of(e.outs.at(0)).array.shape != result.array.shape))
        return false;
  return true;
}

std::string row_loop_body_problem(const Jaxpr& body) {
  if (!body.constvars.empty()) return "its body has constvars";
  for (Var v : body.invars)
    if (body.type_of(v).is_ref) return "its body takes a ref";
  if (body.eqns.empty() || body.outvars.empty()) return "its body computes nothing";
  for (size_t i = 0; i < body.eqns.size(); ++i) {
    const Eqn& e = body.eqns[i];
    const PrimInfo& info = prim_info(e.prim);
    if (e.outs.size() != 1 || (info.has_subjaxprs && e.prim != Prim::fused) ||
        info.effect != RefEffect::none || info.communicates || info.host_effect)
      return fmt::format(
          "eqn {} of its body ({}) is no row computation (one result, no effect, no body but "
          "a fused eqn's)",
          i, prim_name(e.prim));
  }
  for (const Atom& a : body.outvars) {
    if (!is_var(a) ||
        std::find(body.invars.begin(), body.invars.end(), as_var(a)) != body.invars.end())
      return "its body returns a value it does not compute";
  }
  return "";
}

std::string product_epilogue_body_problem(const Jaxpr& body) {
  if (!body.constvars.empty()) return "its body has constvars";
  for (Var v : body.invars)
    if (body.type_of(v).is_ref) return "its body takes a ref";
  if (body.eqns.size() != 2) return "its body is not a product and its consumer (two eqns)";
  const Eqn& product = body.eqns[0];
  const Eqn& consumer = body.eqns[1];
  auto is_invar = [&](const Atom& a) {
    return is_var(a) &&
           std::find(body.invars.begin(), body.invars.end(), as_var(a)) != body.invars.end();
  };
  if ((product.prim != Prim::dot_general && product.prim != Prim::im2col_dot) ||
      product.outs.size() != 1 || product.ins.size() != 2 || !is_invar(product.ins[0]) ||
      !is_invar(product.ins[1]))
    return "its body's first eqn is not a dot_general or im2col_dot of two of its invars";
  const Var p = product.outs[0];
  if (consumer.outs.size() != 1 || body.outvars.size() != 1 || !is_var(body.outvars[0]) ||
      as_var(body.outvars[0]) != consumer.outs[0])
    return "its body does not return its second eqn's one result";
  if (body.type_of(consumer.outs[0]) != body.type_of(p))
    return "its consumer's result does not have the product's type";
  bool reads = false;
  for (size_t k = 0; k < consumer.ins.size(); ++k) {
    if (!is_var(consumer.ins[k]) || as_var(consumer.ins[k]) != p) continue;
    reads = true;
    if (consumer.prim == Prim::fused) {
      if (!read_at_result_index(*consumer.params.get<JaxprPtr>("jaxpr"), k))
        return "its consumer reads the product at other indices than the result's own";
    } else if (!prim_info(consumer.prim).elementwise) {
      return "its consumer is neither a fused eqn nor elementwise";
    }
  }
  if (!reads) return "its second eqn does not read the product";
  return "";
}

}  // namespace refjit
