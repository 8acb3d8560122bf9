// JAX's `lu_pivots_to_permutation`, read as a scan over the pivots, and `custom_linear_solve`
// read as refjit's `linear_solve` (rewrites.h). (cholesky, triangular_solve, lu and qr are
// primitives on LAPACK: ir/type_rules_linalg.cpp.)
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "import/jax/rewrite_support.h"

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

// custom_linear_solve[const_lengths jaxprs] consts... b...: refjit's `linear_solve`, whose
// derivative rules are JAX's (passes/ad/jvp_rules_control.cpp, transpose_rules_control.cpp): the
// tangent and the cotangent are linear solves again, so derivatives of every order are JAX's,
// and an iterative solver (jax.scipy.sparse.linalg.cg: a while loop) is never differentiated
// through. JAX gives each of matvec, vecmat, solve and transpose_solve its own consts; here
// each takes them all (then the vector), so transposing swaps jaxprs and leaves operands be.
std::vector<Atom> custom_linear_solve(RewriteArgs& a) {
  constexpr std::string_view prim = "custom_linear_solve";
  const IntList& counts = a.params.get<IntList>("const_lengths");
  const JaxprList& jaxprs = a.params.get<JaxprList>("jaxprs");
  enum { matvec, vecmat, solve, transpose_solve };
  if (!jaxprs[matvec] || !jaxprs[solve])
    fail(prim, "jaxprs has no matvec or no solve; refjit needs both");
  size_t offsets[5] = {0};
  for (size_t k = 0; k < 4; ++k) offsets[k + 1] = offsets[k] + static_cast<size_t>(counts[k]);
  if (offsets[4] >= a.ins.size())
    fail(prim, fmt::format("const_lengths add up to {} but the eqn has {} operand(s)", offsets[4],
                           a.ins.size()));
  // The operands: each distinct const once (JAX passes the matrix to both matvec and vecmat,
  // the factors to both solves), then the right-hand sides.
  const size_t n_rhs = a.ins.size() - offsets[4];
  std::vector<Atom> operands;
  std::vector<size_t> operand_of(offsets[4]);
  for (size_t k = 0; k < offsets[4]; ++k) {
    auto it = std::find(operands.begin(), operands.end(), a.ins[k]);
    operand_of[k] = static_cast<size_t>(it - operands.begin());
    if (it == operands.end()) operands.push_back(a.ins[k]);
  }
  const size_t n_consts = operands.size();
  operands.insert(operands.end(), a.ins.end() - static_cast<ptrdiff_t>(n_rhs), a.ins.end());
  std::vector<Type> types;
  for (const Atom& x : operands) types.push_back(a.b.type_of(x));
  // The jaxpr of field `which` over (all consts, vector...): one call of JAX's own.
  auto over_all_consts = [&](int which, std::string_view name) -> JaxprPtr {
    const JaxprPtr& own = jaxprs[which];
    if (!own) return nullptr;
    const size_t n_own = static_cast<size_t>(counts[which]) + n_rhs;
    if (own->invars.size() != n_own || own->outvars.size() != n_rhs)
      fail(prim, fmt::format("its {} jaxpr takes {} input(s) and returns {}, but is given {} "
                             "and must return {}",
                             name, own->invars.size(), own->outvars.size(), n_own, n_rhs));
    JaxprBuilder b;
    std::vector<Atom> all;
    for (const Type& t : types) all.push_back(b.add_invar(t));
    std::vector<Atom> args;
    for (size_t k = offsets[which]; k < offsets[which + 1]; ++k) args.push_back(all[operand_of[k]]);
    args.insert(args.end(), all.end() - static_cast<ptrdiff_t>(n_rhs), all.end());
    std::vector<Var> outs =
        b.add_eqn(Prim::jit, std::move(args), Params{{"jaxpr", own}, {"name", std::string(name)}});
    b.set_outvars(std::vector<Atom>(outs.begin(), outs.end()));
    return std::make_shared<const Jaxpr>(b.finish());
  };
  Params params{{"num_consts", static_cast<int64_t>(n_consts)},
                {"solve_jaxpr", over_all_consts(solve, "solve")},
                {"matvec_jaxpr", over_all_consts(matvec, "matvec")}};
  if (JaxprPtr j = over_all_consts(vecmat, "vecmat")) params.set("vecmat_jaxpr", j);
  if (JaxprPtr j = over_all_consts(transpose_solve, "transpose_solve"))
    params.set("transpose_solve_jaxpr", j);
  std::vector<Var> outs = a.b.add_eqn(Prim::linear_solve, std::move(operands), std::move(params));
  return std::vector<Atom>(outs.begin(), outs.end());
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
