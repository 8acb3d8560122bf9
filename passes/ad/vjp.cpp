#include "passes/ad/vjp.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "passes/emitter.h"
#include "passes/jaxpr_util.h"
#include "passes/simplify/dce.h"
#include "refjit/ir/error.h"

namespace refjit {

VjpJaxprs vjp_jaxpr(const Jaxpr& f, const std::vector<bool>& differentiated,
                    const std::vector<AccumKind>& kinds) {
  Linearized lin = linearize_jaxpr(f, differentiated);
  VjpJaxprs out;
  out.backward = transpose_jaxpr(lin.linear, lin.num_nonlinear(), kinds);
  out.forward = std::move(lin.primal);
  out.num_residuals = lin.num_residuals;
  out.ref_residuals = lin.ref_residuals;
  return out;
}

Jaxpr grad_jaxpr(const Jaxpr& f, const std::vector<int>& wrt, int num_aux) {
  const int num_out = static_cast<int>(f.outvars.size());
  if (num_aux < 0 || num_aux >= std::max(num_out, 1))
    throw Error(
        fmt::format("grad: {} auxiliary output(s) asked for, but the function has {} "
                    "output(s) and the first is the one differentiated",
                    num_aux, num_out));
  if (num_out != 1 + num_aux || !f.type_of(f.outvars[0]).array.is_scalar() ||
      !is_inexact(f.type_of(f.outvars[0]).dtype()) || f.type_of(f.outvars[0]).is_ref) {
    std::vector<std::string> types;
    for (const Atom& o : f.outvars) types.push_back(f.type_of(o).str());
    throw Error(
        fmt::format("grad: the function must have exactly one float or complex scalar output{}; "
                    "its outputs are ({})",
                    num_aux == 0 ? "" : fmt::format(" (then {} auxiliary ones)", num_aux),
                    fmt::join(types, ", ")));
  }
  for (int k = 1; k < num_out; ++k)
    if (f.type_of(f.outvars[k]).is_ref)
      throw Error(fmt::format("grad: auxiliary output {} is a ref", k - 1));
  std::vector<bool> diff(f.invars.size(), false);
  for (int w : wrt) {
    if (w < 0 || w >= static_cast<int>(f.invars.size()))
      throw Error(
          fmt::format("grad: wrt position {} is out of range (the function has {} "
                      "arguments)",
                      w, f.invars.size()));
    const Type& t = f.type_of(f.invars[w]);
    if (t.is_ref)
      throw RefError("E2", fmt::format("grad: argument {} is Ref-typed ({}); the gradient of a "
                                       "ref must be accumulated into a ref: use vjp and bind a "
                                       "gradient ref with with_refs (ref arguments not "
                                       "differentiated are plumbing and are fine)",
                                       w, t.long_str()));
    if (!is_inexact(t.dtype()))
      throw Error(
          fmt::format("grad: argument {} has type {}, which is not a float or complex; only "
                      "those arguments can be differentiated",
                      w, t.long_str()));
    if (diff[w]) throw Error(fmt::format("grad: wrt position {} is given twice", w));
    diff[w] = true;
  }
  std::vector<AccumKind> kinds;
  for (bool d : diff)
    if (d) kinds.push_back(AccumKind::value);
  VjpJaxprs v = vjp_jaxpr(f, diff, kinds);

  JaxprBuilder b;
  std::vector<Atom> args;
  for (Var c : f.constvars) args.push_back(b.add_constvar(f.type_of(c), f.info(c).name));
  for (Var c : f.invars) args.push_back(b.add_invar(f.type_of(c), f.info(c).name));
  std::vector<Atom> fwd = inline_call(b, v.forward, args);
  std::vector<Atom> bwd_args(fwd.begin() + num_out, fwd.end());  // residuals
  for (int r : v.ref_residuals) bwd_args.push_back(args[r]);
  bwd_args.push_back(Literal::of(f.type_of(f.outvars[0]).dtype(), 1.0));
  // Auxiliary outputs are returned, not differentiated: their cotangents are zero.
  Emitter e(b);
  for (int k = 1; k < num_out; ++k) bwd_args.push_back(e.zeros(f.type_of(f.outvars[k]).array));
  std::vector<Atom> grads = inline_call(b, v.backward, bwd_args);
  // Gradients come in input order; return them in wrt order.
  std::vector<int> sorted = wrt;
  std::sort(sorted.begin(), sorted.end());
  std::vector<Atom> outs(fwd.begin(), fwd.begin() + num_out);
  for (int w : wrt)
    outs.push_back(grads[std::find(sorted.begin(), sorted.end(), w) - sorted.begin()]);
  b.set_outvars(std::move(outs));
  return dce(b.finish());
}

}  // namespace refjit
