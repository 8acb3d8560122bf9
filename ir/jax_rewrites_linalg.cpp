// JAX's `lu_pivots_to_permutation`, read as a scan over the pivots, and `custom_linear_solve`
// as calls of its solve (jax_rewrites.h). (cholesky, triangular_solve, lu and qr are
// primitives on LAPACK: ir/type_rules_linalg.cpp.)
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <numeric>

#include "ir/jax_rewrite_support.h"

namespace refjit::text {

namespace {

Atom index0() { return Literal::of(DType::i32, 0.0); }

using Atoms = std::vector<Atom>;

// A scan of `length` steps over the step index (i32 iota), with `consts` and the carries
// `init`; `step(emit, consts, carries, i)` returns the new carries.
Atoms scan_steps(Emit& e, int64_t length, bool reverse, const Atoms& consts, const Atoms& init,
                 const std::function<Atoms(Emit&, const Atoms&, const Atoms&, const Atom&)>& step) {
  JaxprBuilder body;
  Atoms cs, carries;
  for (const Atom& c : consts) cs.push_back(body.add_invar(Type(e.type(c))));
  for (const Atom& c : init) carries.push_back(body.add_invar(Type(e.type(c))));
  Var i = body.add_invar(Type(ArrayType{DType::i32, {}}));
  Emit be{body};
  Atoms outs = step(be, cs, carries, i);
  for (Atom& out : outs)
    if (!is_var(out)) out = be.op(Prim::copy, {out});
  body.set_outvars(outs);
  Params p = scan_params(std::make_shared<const Jaxpr>(body.finish()), length,
                         static_cast<int64_t>(init.size()), reverse);
  p.set("num_consts", static_cast<int64_t>(consts.size()));
  Atom steps =
      e.op(Prim::iota, {},
           Params{{"dimension", int64_t{0}}, {"dtype", DType::i32}, {"shape", IntList{length}}});
  Atoms ins = consts;
  ins.insert(ins.end(), init.begin(), init.end());
  ins.push_back(steps);
  std::vector<Var> results = e.b.add_eqn(Prim::scan, ins, std::move(p));
  return Atoms(results.begin(), results.end());
}

// The one-carry form.
Atom scan_steps(Emit& e, int64_t length, bool reverse, const Atoms& consts, const Atom& init,
                const std::function<Atom(Emit&, const Atoms&, const Atom&, const Atom&)>& step) {
  return scan_steps(e, length, reverse, consts, Atoms{init},
                    [&](Emit& s, const Atoms& cs, const Atoms& carries, const Atom& i) {
                      return Atoms{step(s, cs, carries[0], i)};
                    })[0];
}

Atom iota_along(Emit& e, int64_t dim, const Shape& shape) {
  return e.op(Prim::iota, {},
              Params{{"dimension", dim},
                     {"dtype", DType::i32},
                     {"shape", IntList(shape.begin(), shape.end())}});
}

int64_t product(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
}

// lu_pivots_to_permutation[permutation_size] pivots: the permutation [..., size] the row
// swaps (j, pivots[j]), j = 0, 1, ..., make of the identity, as `lu` returns it.
std::vector<Atom> lu_pivots_to_permutation(RewriteArgs& a) {
  constexpr std::string_view prim = "lu_pivots_to_permutation";
  expect_operands(a, prim, 1);
  const ArrayType pt = array_of(a, prim, 0);
  if (pt.rank() < 1 || pt.dtype != DType::i32)
    fail(prim, fmt::format("operand 0 has type {}; i32 pivots [..., k] are needed", pt.str()));
  const int64_t size = a.params.get<int64_t>("permutation_size");
  const int64_t k = pt.shape.back();
  if (k > size)
    fail(prim, fmt::format("operand 0 has {} pivots, more than permutation_size {}", k, size));
  const Shape batch(pt.shape.begin(), pt.shape.end() - 1);
  const int64_t b = product(batch);
  Shape out_shape = batch;
  out_shape.push_back(size);
  Emit e{a.b};
  const Shape bm{b, size};
  const Atom identity = iota_along(e, 1, bm);
  if (k == 0 || size == 0) return {e.reshape(identity, out_shape)};
  const Atom pivots = e.reshape(a.ins[0], Shape{b, k});
  const Atom perm = scan_steps(
      e, k, false, {pivots}, identity,
      [&](Emit& s, const Atoms& cs, const Atom& perm, const Atom& j) {
        auto entry = [&](const Atom& v, const Atom& at) {
          return s.broadcast(s.reshape(s.op(Prim::dynamic_slice, {v, index0(), at},
                                            Params{{"slice_sizes", IntList{b, 1}}}),
                                       Shape{b}),
                             bm, {0});
        };
        const Atom rows = iota_along(s, 1, bm);
        const Atom is_j = s.op(Prim::eq, {rows, s.broadcast(j, bm, {})});
        const Atom p = entry(cs[0], j);
        const Atom is_p = s.op(Prim::eq, {rows, p});
        const Atom at_p = s.op(Prim::reduce_sum,
                               {s.op(Prim::select_n, {is_p, s.broadcast(index0(), bm, {}), perm})},
                               Params{{"axes", IntList{1}}});
        return s.op(Prim::select_n, {is_j, s.op(Prim::select_n, {is_p, perm, entry(perm, j)}),
                                     s.broadcast(at_p, bm, {0})});
      });
  return {e.reshape(perm, out_shape)};
}

// Whether `j` (or a jaxpr inside it) has a while loop.
bool loops_at_run_time(const Jaxpr& j) {
  for (const Eqn& e : j.eqns) {
    if (e.prim == Prim::while_) return true;
    for (const auto& [name, value] : e.params.entries()) {
      if (const auto* sub = std::get_if<JaxprPtr>(&value); sub && *sub && loops_at_run_time(**sub))
        return true;
      if (const auto* list = std::get_if<JaxprList>(&value))
        for (const JaxprPtr& sub : *list)
          if (sub && loops_at_run_time(*sub)) return true;
    }
  }
  return false;
}

// custom_linear_solve[const_lengths jaxprs] consts... b...: x = solve(b), with the derivative
// of the implicit function: dx = solve(db - dM x), M the matvec (JAX's rule; jnp.linalg.solve
// computes the factors under stop_gradient, so all of dM comes through here). Read as
//   x = solve(b);  r = b - matvec(x);  x + solve(r - stop_gradient(r)).
// The correction is exactly zero in value (r - r, then a solve of zeros), and its tangent is
// solve(db - dM x - M dx) with dx = solve(db), which is the rule's. The transpose of that
// tangent program is the one of the rule, so grad needs no rule of its own. Costs one more
// matvec and solve than JAX's primal (small next to the factorization for a vector b).
std::vector<Atom> custom_linear_solve(RewriteArgs& a) {
  constexpr std::string_view prim = "custom_linear_solve";
  const IntList& counts = a.params.get<IntList>("const_lengths");
  const JaxprList& jaxprs = a.params.get<JaxprList>("jaxprs");
  enum { matvec, vecmat, solve, transpose_solve };
  if (!jaxprs[matvec] || !jaxprs[solve])
    fail(prim, "jaxprs has no matvec or no solve; refjit needs both");
  size_t offsets[5] = {0};
  for (size_t k = 0; k < 4; ++k) offsets[k + 1] = offsets[k] + static_cast<size_t>(counts[k]);
  if (offsets[4] > a.ins.size())
    fail(prim, fmt::format("const_lengths add up to {} but the eqn has {} operand(s)", offsets[4],
                           a.ins.size()));
  const Atoms bs(a.ins.begin() + static_cast<ptrdiff_t>(offsets[4]), a.ins.end());
  auto consts_of = [&](int which) {
    return Atoms(a.ins.begin() + static_cast<ptrdiff_t>(offsets[which]),
                 a.ins.begin() + static_cast<ptrdiff_t>(offsets[which + 1]));
  };
  auto call = [&](int which, const Atoms& args, std::string_view name) {
    Atoms ins = consts_of(which);
    ins.insert(ins.end(), args.begin(), args.end());
    const Jaxpr& j = *jaxprs[which];
    if (j.invars.size() != ins.size() || j.outvars.size() != bs.size())
      fail(prim, fmt::format("its {} jaxpr takes {} input(s) and returns {}, but is given {} "
                             "and must return {}",
                             name, j.invars.size(), j.outvars.size(), ins.size(), bs.size()));
    std::vector<Var> outs = a.b.add_eqn(
        Prim::jit, std::move(ins), Params{{"jaxpr", jaxprs[which]}, {"name", std::string(name)}});
    return Atoms(outs.begin(), outs.end());
  };
  if (loops_at_run_time(*jaxprs[solve])) {
    // An iterative solve (jax.scipy.sparse.linalg.cg, gmres, bicgstab: a while loop) is not
    // linear in its right-hand side, so the correction below would carry the derivative of
    // its iterations, not JAX's (the solver run again on the tangent). Its value is computed;
    // autodiff refuses it (passes/jaxpr_util.h, refuse_missing_custom_rule).
    Atoms ins = consts_of(solve);
    ins.insert(ins.end(), bs.begin(), bs.end());
    std::vector<Var> outs = a.b.add_eqn(Prim::jit, std::move(ins),
                                        Params{{"jaxpr", jaxprs[solve]},
                                               {"name", std::string(prim)},
                                               {"custom_rule_missing", std::string("solve")}});
    return Atoms(outs.begin(), outs.end());
  }
  Emit e{a.b};
  const Atoms x = call(solve, bs, "solve");
  const Atoms mx = call(matvec, x, "matvec");
  Atoms zero_residual;
  for (size_t k = 0; k < bs.size(); ++k) {
    const Atom r = e.op(Prim::sub, {bs[k], mx[k]});
    zero_residual.push_back(e.op(Prim::sub, {r, e.op(Prim::stop_gradient, {r})}));
  }
  const Atoms correction = call(solve, zero_residual, "solve");
  Atoms out;
  for (size_t k = 0; k < bs.size(); ++k) out.push_back(e.op(Prim::add, {x[k], correction[k]}));
  return out;
}

}  // namespace

void add_linalg_rewrites(std::vector<JaxRewrite>& table) {
  table.push_back({"lu_pivots_to_permutation",
                   {{"permutation_size", K::integer}},
                   {},
                   lu_pivots_to_permutation});
  table.push_back({"custom_linear_solve",
                   {{"const_lengths", K::linear_solve_counts}, {"jaxprs", K::linear_solve_jaxprs}},
                   {},
                   custom_linear_solve});
}

}  // namespace refjit::text
