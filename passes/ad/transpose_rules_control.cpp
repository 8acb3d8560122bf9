// Transpose rules of the structured primitives. custom_vjp_call appears in linear jaxprs
// as made by linearize (operands: residuals, then one slot per original operand); its
// transpose runs the user's bwd_jaxpr.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "ir/loop_params.h"
#include "passes/ad/transpose.h"
#include "passes/ad/transpose_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

// cond in a linear jaxpr (as linearize stages it): index and residuals, then linear operands.
// Each branch is transposed with the same accumulator kinds (ref-typed operands pass their
// cotangent ref in, arrays get value or dont_want), and one cond runs the transposed branch.
void cond_transpose(Emitter& e, TransposeArgs& a) {
  const JaxprList& branches = a.eqn.params.get<JaxprList>("branches");
  if (a.linear(0)) throw Error("transpose: the index of a cond is not linear");
  size_t first = 1;
  while (first < a.acc.size() && !a.linear(first)) ++first;
  for (size_t i = first; i < a.acc.size(); ++i)
    if (!a.linear(i))
      throw Error("transpose: cond's non-linear operands must precede its linear ones");
  std::vector<AccumKind> kinds;
  std::vector<Atom> ins(a.val.begin(), a.val.begin() + static_cast<long>(first));
  for (size_t i = first; i < a.acc.size(); ++i) {
    // Ref-typed operands (tangent refs) pass their cotangent ref in; note a.val[i] of a
    // linear operand names a var of the linear jaxpr, so ask the accumulator.
    const bool is_ref = a.acc[i]->is_ref_like();
    kinds.push_back(is_ref ? AccumKind::ref
                           : (a.wants(i) ? AccumKind::value : AccumKind::dont_want));
    if (is_ref) ins.push_back(a.acc[i]->buffer(e));
  }
  JaxprList transposed;
  for (const JaxprPtr& br : branches) {
    const int nn = static_cast<int>(first) - 1;
    transposed.push_back(std::make_shared<const Jaxpr>(transpose_jaxpr(*br, nn, kinds)));
  }
  const std::vector<Type> ct_types = branches[0]->out_types();
  for (size_t k = 0; k < a.ct.size(); ++k)
    ins.push_back(a.ct[k] ? *a.ct[k] : e.zeros(ct_types[k].array));
  std::vector<Var> cts = e.emit(Prim::cond, ins, Params{{"branches", std::move(transposed)}});
  size_t k = 0;
  for (size_t i = first; i < a.acc.size(); ++i)
    if (kinds[i - first] == AccumKind::value) a.acc[i]->add(e, Atom(cts.at(k++)));
}

// linear_solve is linear in its right-hand sides, not in its consts. By JAX's rule the
// cotangent of b is the transposed system solved for the output's cotangent: a linear_solve
// with solve and transpose_solve swapped, and matvec and vecmat.
void linear_solve_transpose(Emitter& e, TransposeArgs& a) {
  const LinearSolveParams solve = LinearSolveParams::of(a.eqn);
  const size_t nc = solve.num_consts;
  for (size_t k = 0; k < nc; ++k)
    if (a.linear(k))
      throw Error(fmt::format(
          "transpose: linear_solve is linear in its right-hand sides only, but its const {} "
          "is linear",
          k));
  bool wanted = false;
  for (size_t k = nc; k < a.acc.size(); ++k) wanted |= a.wants(k);
  if (!wanted) return;
  if (!solve.transpose_solve)
    throw NotDifferentiableError(
        "reverse mode of a linear solve needs its transpose: this custom_linear_solve was "
        "given no transpose_solve (pass transpose_solve=, or symmetric=True for a symmetric "
        "matrix, to jax.lax.custom_linear_solve)");
  Params swapped{{"num_consts", static_cast<int64_t>(nc)},
                 {"solve_jaxpr", solve.transpose_solve},
                 {"transpose_solve_jaxpr", solve.solve}};
  // Without vecmat the transposed solve still runs; only its derivative in the consts needs it.
  if (solve.vecmat) swapped.set("matvec_jaxpr", solve.vecmat);
  if (solve.matvec) swapped.set("vecmat_jaxpr", solve.matvec);
  std::vector<Atom> ins(a.val.begin(), a.val.begin() + static_cast<ptrdiff_t>(nc));
  const std::vector<Type> rhs_types = solve.transpose_solve->out_types();
  for (size_t k = 0; k < a.ct.size(); ++k)
    ins.push_back(a.ct[k] ? *a.ct[k] : e.zeros(rhs_types.at(k).array));
  std::vector<Var> cts = e.emit(Prim::linear_solve, std::move(ins), std::move(swapped));
  for (size_t k = nc; k < a.acc.size(); ++k)
    if (a.wants(k)) a.acc[k]->add(e, Atom(cts.at(k - nc)));
}

}  // namespace

void register_control_transpose_rules(TransposeRuleTable& t) {
  t.set(Prim::linear_solve, linear_solve_transpose);
  t.set(Prim::cond, cond_transpose);
  t.set(Prim::custom_vjp_call, [](Emitter& e, TransposeArgs& a) {
    // No cotangent reaches the outputs: bwd is not run (its operands' cotangents are zero,
    // and what it would write into refs is not written), as JAX's backward pass skips it.
    if (std::none_of(a.ct.begin(), a.ct.end(), [](const MaybeAtom& ct) { return ct.has_value(); }))
      return;
    const size_t n_res = static_cast<size_t>(a.eqn.params.get<int64_t>("num_res"));
    const Jaxpr& bwd = *a.eqn.params.get<JaxprPtr>("bwd_jaxpr");
    std::vector<Atom> args;
    for (size_t i = 0; i < n_res; ++i) {
      if (a.linear(i)) throw Error("transpose: custom_vjp_call residual is linear");
      args.push_back(a.val[i]);
    }
    const std::vector<Type> out_types = bwd.in_types();
    for (size_t k = 0; k < a.ct.size(); ++k)
      args.push_back(a.ct[k] ? *a.ct[k] : e.zeros(out_types.at(n_res + k).array));
    if (bwd_accumulates(bwd, n_res, a.ct.size(), a.acc.size() - n_res)) {
      // bwd adds into the operands' accumulators in place; an operand whose cotangent is not
      // wanted gets a scratch ref that nothing reads.
      for (size_t i = n_res; i < a.acc.size(); ++i)
        args.push_back(a.wants(i) ? a.acc[i]->buffer(e)
                                  : Atom(e.new_ref(e.zeros(out_types.at(args.size()).array))));
      e.inline_jaxpr(bwd, args);
      return;
    }
    std::vector<Atom> cts = e.inline_jaxpr(bwd, args);
    if (cts.size() != a.acc.size() - n_res)
      throw Error(
          fmt::format("transpose: custom_vjp_call's bwd_jaxpr returns {} cotangents for "
                      "{} operands",
                      cts.size(), a.acc.size() - n_res));
    for (size_t i = n_res; i < a.acc.size(); ++i)
      if (a.wants(i)) a.acc[i]->add(e, cts[i - n_res]);
  });
}

}  // namespace refjit
