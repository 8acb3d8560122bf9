// JAX's `cholesky` and `triangular_solve`, read as scans over the rows (jax_rewrites.h).
//
// Each step works on whole rows or columns with refjit's primitives (a dynamic slice, a
// batched product, a dynamic update of the carry), so every autodiff mode, vmap and the
// native backend take them as they take any scan: the derivative is the algorithm's own,
// which is the factorization's (JAX's rules are the closed forms of the same). Batch dims
// (`[..., n, n]`) are flattened into one for the loop and restored after. Real floats only.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <numeric>

#include "ir/jax_rewrite_support.h"

namespace refjit::text {

namespace {

Atom index0() { return Literal::of(DType::i32, 0.0); }

// A batched product: x [B, p] times y [B, p, q] -> [B, q] (contracting p), or x [B, n, p]
// times y [B, p] -> [B, n].
Atom batched_matvec(Emit& e, const Atom& x, const Atom& y, int64_t x_contract, int64_t y_contract) {
  return e.op(Prim::dot_general, {x, y},
              Params{{"dimension_numbers", DotDims{{x_contract}, {y_contract}, {0}, {0}}},
                     {"precision", NoneParam{}},
                     {"preferred_element_type", NoneParam{}}});
}

// Row `i` of x [B, n, k] as [B, k].
Atom row(Emit& e, const Atom& x, const Atom& i) {
  const ArrayType t = e.type(x);
  const int64_t b = t.shape[0], k = t.shape[2];
  return e.reshape(e.op(Prim::dynamic_slice, {x, index0(), i, index0()},
                        Params{{"slice_sizes", IntList{b, 1, k}}}),
                   Shape{b, k});
}

// x [B, n] where mask [B, n] holds, zero elsewhere.
Atom keep_where(Emit& e, const Atom& mask, const Atom& x) {
  const ArrayType t = e.type(x);
  return e.op(Prim::select_n, {mask, e.broadcast(Literal::of(t.dtype, 0.0), t.shape, {}), x});
}

// A scan of `length` steps over the step index (i32 iota), with `consts` and one carry.
Atom scan_steps(
    Emit& e, int64_t length, bool reverse, const std::vector<Atom>& consts, const Atom& init,
    const std::function<Atom(Emit&, const std::vector<Atom>&, const Atom&, const Atom&)>& step) {
  JaxprBuilder body;
  std::vector<Atom> cs;
  for (const Atom& c : consts) cs.push_back(body.add_invar(Type(e.type(c))));
  Var carry = body.add_invar(Type(e.type(init)));
  Var i = body.add_invar(Type(ArrayType{DType::i32, {}}));
  Emit be{body};
  Atom out = step(be, cs, carry, i);
  if (!is_var(out)) out = be.op(Prim::copy, {out});
  body.set_outvars({out});
  Params p = scan_params(std::make_shared<const Jaxpr>(body.finish()), length, 1, reverse);
  p.set("num_consts", static_cast<int64_t>(consts.size()));
  Atom steps =
      e.op(Prim::iota, {},
           Params{{"dimension", int64_t{0}}, {"dtype", DType::i32}, {"shape", IntList{length}}});
  std::vector<Atom> ins = consts;
  ins.push_back(init);
  ins.push_back(steps);
  return Atom(e.b.add_eqn(Prim::scan, ins, std::move(p))[0]);
}

// The square matrices of `x` ([..., n, n]) and their batch shape; fails on other operands.
Shape square_batch(std::string_view prim, const ArrayType& x) {
  if (x.rank() < 2 || x.shape[x.rank() - 1] != x.shape[x.rank() - 2])
    fail(prim,
         fmt::format("operand 0 has type {}; square matrices [..., n, n] are needed", x.str()));
  if (!is_float(x.dtype))
    fail(prim, fmt::format("operand 0 has type {}; refjit factors real float matrices", x.str()));
  return Shape(x.shape.begin(), x.shape.end() - 2);
}

int64_t product(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
}

// cholesky x: the lower factor L of the symmetric positive definite x (JAX symmetrizes x and
// masks L's upper triangle around the primitive). Column j, left-looking:
// v = x[:, j] - L L[j, :]^T (L's columns from j on are still zero), L[j:, j] = v[j:] / sqrt(v[j]).
std::vector<Atom> cholesky(RewriteArgs& a) {
  constexpr std::string_view prim = "cholesky";
  expect_operands(a, prim, 1);
  const ArrayType xt = array_of(a, prim, 0);
  const Shape batch = square_batch(prim, xt);
  const int64_t n = xt.shape.back(), b = product(batch);
  Emit e{a.b};
  if (n == 0) return {a.ins[0]};
  const Atom x = e.reshape(a.ins[0], Shape{b, n, n});
  const Atom zero = e.broadcast(Literal::of(xt.dtype, 0.0), Shape{b, n, n}, {});
  Atom l = scan_steps(
      e, n, false, {x}, zero,
      [&](Emit& s, const std::vector<Atom>& cs, const Atom& l, const Atom& j) {
        const Atom column = s.reshape(s.op(Prim::dynamic_slice, {cs[0], index0(), index0(), j},
                                           Params{{"slice_sizes", IntList{b, n, 1}}}),
                                      Shape{b, n});
        const Atom v = s.op(Prim::sub, {column, batched_matvec(s, l, row(s, l, j), 2, 1)});
        const Atom pivot =
            s.op(Prim::dynamic_slice, {v, index0(), j}, Params{{"slice_sizes", IntList{b, 1}}});
        const Atom root = s.broadcast(s.op(Prim::sqrt, {pivot}), Shape{b, n}, {0, 1});
        const Atom below = s.op(Prim::ge, {s.op(Prim::iota, {},
                                                Params{{"dimension", int64_t{1}},
                                                       {"dtype", DType::i32},
                                                       {"shape", IntList{b, n}}}),
                                           s.broadcast(j, Shape{b, n}, {})});
        const Atom col = keep_where(s, below, s.op(Prim::div, {v, root}));
        return s.op(Prim::dynamic_update_slice,
                    {l, s.reshape(col, Shape{b, n, 1}), index0(), index0(), j});
      });
  return {e.reshape(l, xt.shape)};
}

// triangular_solve[left_side lower transpose_a conjugate_a unit_diagonal] a b: x with
// op(a) x = b (left_side) or x op(a) = b, op(a) = a or a^T, reading only a's lower (upper)
// triangle. Every form becomes "lower or upper A, A x = y" on [B, n, m]: a transposed a flips
// the triangle, and a right-side solve is the left-side solve of the transposes. Row i (in
// order for lower, reversed for upper): x_i = (y_i - A[i, others] x) / A[i, i], the rows not
// solved yet being zero in the carry.
std::vector<Atom> triangular_solve(RewriteArgs& a) {
  constexpr std::string_view prim = "triangular_solve";
  expect_operands(a, prim, 2);
  const ArrayType at = array_of(a, prim, 0), bt = array_of(a, prim, 1);
  const Shape batch = square_batch(prim, at);
  const int64_t n = at.shape.back();
  if (bt.dtype != at.dtype || bt.rank() != at.rank() ||
      !std::equal(batch.begin(), batch.end(), bt.shape.begin()))
    fail(prim, fmt::format("operand 1 has type {}; a {}[{}..., rows, columns] right-hand side "
                           "is needed for operand 0 {}",
                           bt.str(), short_name(at.dtype), fmt::join(batch, ", "), at.str()));
  const bool left = a.params.get<bool>("left_side");
  bool lower = a.params.get<bool>("lower");
  const bool transpose_a = a.params.get<bool>("transpose_a");
  const bool unit = a.params.get<bool>("unit_diagonal");
  const int64_t solved_dim = left ? bt.rank() - 2 : bt.rank() - 1;
  if (bt.shape[solved_dim] != n)
    fail(prim, fmt::format("operand 1 has type {}; its dim {} must have operand 0's {} rows",
                           bt.str(), solved_dim, n));
  const int64_t bsz = product(batch), m = bt.shape[left ? bt.rank() - 1 : bt.rank() - 2];
  Emit e{a.b};
  if (n == 0 || m == 0) return {a.ins[1]};
  const IntList swap_last{0, 2, 1};
  Atom mat = e.reshape(a.ins[0], Shape{bsz, n, n});
  if (transpose_a != !left) {  // op(a)^T for a right-side solve, a^T for a transposed left one
    mat = e.transpose(mat, swap_last);
    lower = !lower;
  }
  Atom rhs = e.reshape(a.ins[1], left ? Shape{bsz, n, m} : Shape{bsz, m, n});
  if (!left) rhs = e.transpose(rhs, swap_last);
  // Only the strict triangle multiplies the solved rows; the diagonal divides.
  const Atom rows =
      e.op(Prim::iota, {},
           Params{{"dimension", int64_t{1}}, {"dtype", DType::i32}, {"shape", IntList{bsz, n, n}}});
  const Atom cols =
      e.op(Prim::iota, {},
           Params{{"dimension", int64_t{2}}, {"dtype", DType::i32}, {"shape", IntList{bsz, n, n}}});
  const Atom strict = keep_where(e, e.op(lower ? Prim::lt : Prim::gt, {cols, rows}), mat);
  const Atom zero = e.broadcast(Literal::of(at.dtype, 0.0), Shape{bsz, n, m}, {});
  Atom x = scan_steps(e, n, /*reverse=*/!lower, {strict, mat, rhs}, zero,
                      [&](Emit& s, const std::vector<Atom>& cs, const Atom& x, const Atom& i) {
                        const Atom known = batched_matvec(s, row(s, cs[0], i), x, 1, 1);  // [B, m]
                        Atom r = s.op(Prim::sub, {row(s, cs[2], i), known});
                        if (!unit) {
                          const Atom diag =
                              s.op(Prim::dynamic_slice, {row(s, cs[1], i), index0(), i},
                                   Params{{"slice_sizes", IntList{bsz, 1}}});
                          r = s.op(Prim::div, {r, s.broadcast(diag, Shape{bsz, m}, {0, 1})});
                        }
                        return s.op(Prim::dynamic_update_slice,
                                    {x, s.reshape(r, Shape{bsz, 1, m}), index0(), i, index0()});
                      });
  if (!left) x = e.transpose(x, swap_last);
  return {e.reshape(x, bt.shape)};
}

}  // namespace

void add_linalg_rewrites(std::vector<JaxRewrite>& table) {
  table.push_back({"cholesky", {}, {"symmetrize_input"}, cholesky});
  table.push_back({"triangular_solve",
                   {{"left_side", K::boolean},
                    {"lower", K::boolean},
                    {"transpose_a", K::boolean},
                    {"unit_diagonal", K::boolean}},
                   {"conjugate_a"},
                   triangular_solve});
}

}  // namespace refjit::text
