// JAX's `cholesky`, `triangular_solve` and `lu`, read as scans over the rows, and
// `custom_linear_solve` as calls of its solve (jax_rewrites.h).
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

// lu x: x [..., m, n] = P L U with partial pivoting, as LAPACK's getrf computes it; returns
// the packed factors (L's unit diagonal implied), `pivots` [..., min(m, n)] (row j was
// swapped with row pivots[j]) and `permutation` [..., m] (row i of P^T x is row
// permutation[i] of x). Step j picks the largest |x[i, j]|, i >= j (the first on ties, as
// LAPACK's i?amax), swaps rows j and p, scales the column below the pivot by 1 / pivot (not
// when the pivot is zero: the column is then zero, and LAPACK leaves it) and updates the
// trailing block. Swaps are selects and masked sums, so every value moves exactly (a one-hot
// product would turn an inf into NaN), and the derivative is the factors' for the pivots
// chosen, which is JAX's rule.
std::vector<Atom> lu(RewriteArgs& a) {
  constexpr std::string_view prim = "lu";
  expect_operands(a, prim, 1);
  const ArrayType xt = array_of(a, prim, 0);
  if (xt.rank() < 2)
    fail(prim, fmt::format("operand 0 has type {}; matrices [..., m, n] are needed", xt.str()));
  if (!is_float(xt.dtype))
    fail(prim, fmt::format("operand 0 has type {}; refjit factors real float matrices", xt.str()));
  const Shape batch(xt.shape.begin(), xt.shape.end() - 2);
  const int64_t m = xt.shape[xt.rank() - 2], n = xt.shape.back(), k = std::min(m, n);
  const int64_t b = product(batch);
  Shape pivots_shape = batch, perm_shape = batch;
  pivots_shape.push_back(k);
  perm_shape.push_back(m);
  Emit e{a.b};
  const Shape bmn{b, m, n}, bm{b, m};
  const Atom perm0 = iota_along(e, 1, bm);
  const Atom pivots0 = e.broadcast(Literal::of(DType::i32, 0.0), Shape{b, k}, {});
  if (k == 0) return {a.ins[0], e.reshape(pivots0, pivots_shape), e.reshape(perm0, perm_shape)};
  const Atom x = e.reshape(a.ins[0], bmn);
  Atoms factors = scan_steps(
      e, k, false, {}, {x, pivots0, perm0},
      [&](Emit& s, const Atoms&, const Atoms& carry, const Atom& j) {
        const Atom &lu = carry[0], &pivots = carry[1], &perm = carry[2];
        const DType f = xt.dtype;
        auto column = [&](const Atom& mat) {
          return s.reshape(s.op(Prim::dynamic_slice, {mat, index0(), index0(), j},
                                Params{{"slice_sizes", IntList{b, m, 1}}}),
                           bm);
        };
        auto over_rows = [&](const Atom& v) { return s.broadcast(v, bmn, {0, 2}); };  // [B, n]
        auto over_cols = [&](const Atom& v) { return s.broadcast(v, bmn, {0, 1}); };  // [B, m]
        const Atom rows = iota_along(s, 1, bm);
        const Atom jm = s.broadcast(j, bm, {});
        // The pivot row p: the largest magnitude at or below the diagonal.
        const Atom candidates = s.op(
            Prim::select_n, {s.op(Prim::ge, {rows, jm}), s.broadcast(Literal::of(f, -1.0), bm, {}),
                             s.op(Prim::abs, {column(lu)})});
        const Atom p = s.op(Prim::argmax, {candidates},
                            Params{{"axes", IntList{1}}, {"index_dtype", DType::i32}});
        const Atom is_p = s.op(Prim::eq, {rows, s.broadcast(p, bm, {0})});
        const Atom is_j = s.op(Prim::eq, {rows, jm});
        auto pick_row = [&](const Atom& mask, const Atom& mat, int64_t width) {  // sum of one row
          const ArrayType t = s.type(mat);
          const Atom wide = width == 0 ? mask : over_cols(mask);
          return s.op(Prim::reduce_sum,
                      {s.op(Prim::select_n,
                            {wide, s.broadcast(Literal::of(t.dtype, 0.0), t.shape, {}), mat})},
                      Params{{"axes", IntList{1}}});
        };
        auto swap = [&](const Atom& mat, const Atom& row_j, const Atom& row_p, bool wide) {
          const Atom mj = wide ? over_cols(is_j) : is_j, mp = wide ? over_cols(is_p) : is_p;
          const Atom tj = wide ? over_rows(row_j) : s.broadcast(row_j, bm, {0});
          const Atom tp = wide ? over_rows(row_p) : s.broadcast(row_p, bm, {0});
          return s.op(Prim::select_n, {mj, s.op(Prim::select_n, {mp, mat, tj}), tp});
        };
        const Atom row_j = s.reshape(s.op(Prim::dynamic_slice, {lu, index0(), j, index0()},
                                          Params{{"slice_sizes", IntList{b, 1, n}}}),
                                     Shape{b, n});
        const Atom row_p = pick_row(is_p, lu, 1);
        const Atom swapped = swap(lu, row_j, row_p, true);
        const Atom perm_j = s.reshape(
            s.op(Prim::dynamic_slice, {perm, index0(), j}, Params{{"slice_sizes", IntList{b, 1}}}),
            Shape{b});
        const Atom new_perm = swap(perm, perm_j, pick_row(is_p, perm, 0), false);
        const Atom new_pivots =
            s.op(Prim::dynamic_update_slice, {pivots, s.reshape(p, Shape{b, 1}), index0(), j});
        // Eliminate below the pivot (row_p is now row j).
        const Atom pivot =
            s.broadcast(s.reshape(s.op(Prim::dynamic_slice, {swapped, index0(), j, j},
                                       Params{{"slice_sizes", IntList{b, 1, 1}}}),
                                  Shape{b}),
                        bm, {0});
        const Atom nonzero = s.op(Prim::ne, {pivot, s.broadcast(Literal::of(f, 0.0), bm, {})});
        const Atom below = s.op(Prim::gt, {rows, jm});
        // Divides by 1 where the pivot is zero, so no branch's derivative is infinite.
        const Atom divisor =
            s.op(Prim::select_n, {nonzero, s.broadcast(Literal::of(f, 1.0), bm, {}), pivot});
        const Atom col = column(swapped);
        const Atom multipliers = s.op(Prim::select_n, {s.op(Prim::and_, {below, nonzero}), col,
                                                       s.op(Prim::div, {col, divisor})});
        const Atom cols = iota_along(s, 2, bmn);
        const Atom jmn = s.broadcast(j, bmn, {});
        const Atom below_mn = s.op(Prim::gt, {iota_along(s, 1, bmn), jmn});
        const Atom trailing = s.op(Prim::and_, {below_mn, s.op(Prim::gt, {cols, jmn})});
        const Atom updated =
            s.op(Prim::sub, {swapped, s.op(Prim::mul, {over_cols(multipliers), over_rows(row_p)})});
        Atom out = s.op(Prim::select_n, {trailing, swapped, updated});
        out = s.op(Prim::select_n, {s.op(Prim::and_, {below_mn, s.op(Prim::eq, {cols, jmn})}), out,
                                    over_cols(multipliers)});
        return Atoms{out, new_pivots, new_perm};
      });
  return {e.reshape(factors[0], xt.shape), e.reshape(factors[1], pivots_shape),
          e.reshape(factors[2], perm_shape)};
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

// qr[full_matrices pivoting use_magma] x: x [..., m, n] = Q R by Householder reflections, as
// LAPACK's geqrf and orgqr compute them (JAX's CPU backend calls those), so Q and R carry the
// same signs. Step j reflects rows j.. of column j onto beta e_j with
//   beta = -sign(alpha) |x[j:, j]|  (sign(0) = +),  tau = (beta - alpha) / beta,
//   v = x[j:, j] / (alpha - beta) with v_j = 1,
// and no reflection (tau = 0) when x[j+1:, j] is zero, as dlarfg. Q = H_0 H_1 ... applied to
// the first columns of the identity, last reflector first. The derivative is the one of
// those formulas, which is the factors' (JAX's rule) for a full-rank x; guarded divisions keep
// the branch not taken finite.
std::vector<Atom> qr(RewriteArgs& a) {
  constexpr std::string_view prim = "qr";
  expect_operands(a, prim, 1);
  if (a.params.get<bool>("pivoting"))
    fail(prim, "pivoting=True (jax.scipy.linalg.qr with pivoting) is not supported");
  const ArrayType xt = array_of(a, prim, 0);
  if (xt.rank() < 2)
    fail(prim, fmt::format("operand 0 has type {}; matrices [..., m, n] are needed", xt.str()));
  if (!is_float(xt.dtype))
    fail(prim, fmt::format("operand 0 has type {}; refjit factors real float matrices", xt.str()));
  const bool full = a.params.get<bool>("full_matrices");
  const Shape batch(xt.shape.begin(), xt.shape.end() - 2);
  const int64_t m = xt.shape[xt.rank() - 2], n = xt.shape.back(), k = std::min(m, n);
  const int64_t b = product(batch), q_cols = full ? m : k;
  const DType f = xt.dtype;
  Emit e{a.b};
  const Shape bmn{b, m, n}, bm{b, m}, bmq{b, m, q_cols};
  auto zeros = [&](Emit& s, const Shape& shape) {
    return s.broadcast(Literal::of(f, 0.0), shape, {});
  };
  auto ones = [&](Emit& s, const Shape& shape) {
    return s.broadcast(Literal::of(f, 1.0), shape, {});
  };
  // v^T y for v [B, m] and y [B, m, c], then y - tau v (v^T y).
  auto reflect = [&](Emit& s, const Atom& y, const Atom& v, const Atom& tau) {
    const ArrayType yt = s.type(y);
    const Atom vty = batched_matvec(s, v, y, 1, 1);  // [B, c]
    const Atom scaled = s.op(Prim::mul, {s.broadcast(tau, Shape{b, m}, {0}), v});
    return s.op(Prim::sub, {y, s.op(Prim::mul, {s.broadcast(scaled, yt.shape, {0, 1}),
                                                s.broadcast(vty, yt.shape, {0, 2})})});
  };
  const Atom x = e.reshape(a.ins[0], bmn);
  Atom r = x, vs = zeros(e, Shape{b, k, m}), taus = zeros(e, Shape{b, k});
  if (k > 0) {
    Atoms factored = scan_steps(
        e, k, false, {}, {x, vs, taus},
        [&](Emit& s, const Atoms&, const Atoms& carry, const Atom& j) {
          const Atom &rr = carry[0], &vs = carry[1], &taus = carry[2];
          const Atom rows = iota_along(s, 1, bm);
          const Atom jm = s.broadcast(j, bm, {});
          const Atom column = s.reshape(s.op(Prim::dynamic_slice, {rr, index0(), index0(), j},
                                             Params{{"slice_sizes", IntList{b, m, 1}}}),
                                        bm);
          const Atom below = s.op(Prim::gt, {rows, jm});
          const Atom tail = keep_where(s, below, column);
          const Atom alpha = s.reshape(s.op(Prim::dynamic_slice, {column, index0(), j},
                                            Params{{"slice_sizes", IntList{b, 1}}}),
                                       Shape{b});
          const Atom tail_sq =
              s.op(Prim::reduce_sum, {s.op(Prim::mul, {tail, tail})}, Params{{"axes", IntList{1}}});
          const Shape bs{b};
          const Atom reflects = s.op(Prim::gt, {tail_sq, zeros(s, bs)});
          // Under no reflection every quantity below is replaced, and sqrt/div see 1s.
          const Atom safe_sq = s.op(Prim::select_n, {reflects, ones(s, bs), tail_sq});
          const Atom norm =
              s.op(Prim::sqrt, {s.op(Prim::add, {s.op(Prim::mul, {alpha, alpha}), safe_sq})});
          const Atom beta = s.op(Prim::select_n, {s.op(Prim::ge, {alpha, zeros(s, bs)}), norm,
                                                  s.op(Prim::neg, {norm})});
          const Atom tau = s.op(
              Prim::select_n,
              {reflects, zeros(s, bs), s.op(Prim::div, {s.op(Prim::sub, {beta, alpha}), beta})});
          const Atom scale =
              s.op(Prim::select_n, {reflects, ones(s, bs), s.op(Prim::sub, {alpha, beta})});
          const Atom is_j = s.op(Prim::eq, {rows, jm});
          const Atom v =
              s.op(Prim::select_n,
                   {is_j, s.op(Prim::div, {tail, s.broadcast(scale, bm, {0})}), ones(s, bm)});
          Atom next = reflect(s, rr, v, tau);
          // Column j becomes exactly (.., beta, 0, ..) as dlarfg leaves it (alpha unchanged
          // without a reflection).
          const Atom cols = iota_along(s, 2, bmn);
          const Atom jmn = s.broadcast(j, bmn, {});
          const Atom in_column = s.op(Prim::eq, {cols, jmn});
          const Atom rows_mn = iota_along(s, 1, bmn);
          const Atom diagonal = s.op(Prim::select_n, {reflects, alpha, beta});
          next = s.op(
              Prim::select_n,
              {s.op(Prim::and_, {in_column, s.op(Prim::gt, {rows_mn, jmn})}), next, zeros(s, bmn)});
          next =
              s.op(Prim::select_n, {s.op(Prim::and_, {in_column, s.op(Prim::eq, {rows_mn, jmn})}),
                                    next, s.broadcast(diagonal, bmn, {0})});
          const Atom new_vs = s.op(Prim::dynamic_update_slice,
                                   {vs, s.reshape(v, Shape{b, 1, m}), index0(), j, index0()});
          const Atom new_taus =
              s.op(Prim::dynamic_update_slice, {taus, s.reshape(tau, Shape{b, 1}), index0(), j});
          return Atoms{next, new_vs, new_taus};
        });
    r = factored[0];
    vs = factored[1];
    taus = factored[2];
  }
  // Q: the reflectors applied to the identity's first q_cols columns, the last one first.
  const Atom identity = e.op(Prim::convert_element_type,
                             {e.op(Prim::eq, {iota_along(e, 1, bmq), iota_along(e, 2, bmq)})},
                             Params{{"new_dtype", f}, {"weak_type", false}});
  Atom q = identity;
  if (k > 0)
    q = scan_steps(e, k, /*reverse=*/true, {vs, taus}, identity,
                   [&](Emit& s, const Atoms& cs, const Atom& q, const Atom& j) {
                     const Atom v = row(s, cs[0], j);
                     const Atom tau = s.reshape(s.op(Prim::dynamic_slice, {cs[1], index0(), j},
                                                     Params{{"slice_sizes", IntList{b, 1}}}),
                                                Shape{b});
                     return reflect(s, q, v, tau);
                   });
  // R: the upper triangle of the first rows (all m when full, else k).
  const int64_t r_rows = full ? m : k;
  Atom upper = e.slice(r, IntList{0, 0, 0}, IntList{b, r_rows, n});
  const Shape brn{b, r_rows, n};
  upper = keep_where(e, e.op(Prim::le, {iota_along(e, 1, brn), iota_along(e, 2, brn)}), upper);
  Shape q_shape = batch, r_shape = batch;
  q_shape.insert(q_shape.end(), {m, q_cols});
  r_shape.insert(r_shape.end(), {r_rows, n});
  return {e.reshape(q, q_shape), e.reshape(upper, r_shape)};
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
  table.push_back({"cholesky", {}, {"symmetrize_input"}, cholesky});
  table.push_back({"lu", {}, {}, lu});
  table.push_back(
      {"qr", {{"full_matrices", K::boolean}, {"pivoting", K::boolean}}, {"use_magma"}, qr});
  table.push_back({"lu_pivots_to_permutation",
                   {{"permutation_size", K::integer}},
                   {},
                   lu_pivots_to_permutation});
  table.push_back({"custom_linear_solve",
                   {{"const_lengths", K::linear_solve_counts}, {"jaxprs", K::linear_solve_jaxprs}},
                   {},
                   custom_linear_solve});
  table.push_back({"triangular_solve",
                   {{"left_side", K::boolean},
                    {"lower", K::boolean},
                    {"transpose_a", K::boolean},
                    {"unit_diagonal", K::boolean}},
                   {"conjugate_a"},
                   triangular_solve});
}

}  // namespace refjit::text
