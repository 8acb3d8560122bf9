// JVP rules of the matrix decompositions, JAX's rules (jax/_src/lax/linalg.py) written with
// refjit's primitives: the primal work (the decomposition and the factors built from it) on
// the primal emitter, products with the tangent on the tangent emitter, so reverse mode
// transposes those products and nothing else.
#include <fmt/format.h>

#include <numeric>

#include "passes/ad/jvp_rules.h"
#include "refjit/ir/error.h"

namespace refjit {

namespace {

using Tangents = std::vector<MaybeAtom>;

// Helpers over the last two dims of arrays with the same leading (batch) dims.
struct Matrices {
  Emitter& e;
  DType dtype;
  Shape batch;

  Shape shape(std::initializer_list<int64_t> dims) const {
    Shape s = batch;
    s.insert(s.end(), dims.begin(), dims.end());
    return s;
  }
  int64_t nb() const { return static_cast<int64_t>(batch.size()); }
  IntList batch_dims() const {
    IntList d;
    for (int64_t i = 0; i < nb(); ++i) d.push_back(i);
    return d;
  }

  bool complex() const { return is_complex(dtype); }
  Atom conj(Atom x) {
    return complex() ? e.emit1(Prim::conj, {x}, Params{{"input_dtype", dtype}}) : x;
  }
  // The real part of x (x itself for real matrices).
  Atom real(Atom x) { return complex() ? e.emit1(Prim::real, {x}) : x; }
  // A real x as this dtype (complex when the matrices are).
  Atom complexify(Atom x) { return complex() ? e.convert(x, dtype) : x; }

  // x @ y, either adjoint first (conjugate-transposed: every transpose in JAX's rules is).
  Atom matmul(Atom x, Atom y, bool adjoint_x = false, bool adjoint_y = false) {
    if (adjoint_x) x = conj(x);
    if (adjoint_y) y = conj(y);
    const bool transpose_x = adjoint_x, transpose_y = adjoint_y;
    const IntList b = batch_dims();
    const int64_t xc = nb() + (transpose_x ? 0 : 1), yc = nb() + (transpose_y ? 1 : 0);
    // dot_general's result is (batch, x's free dim, y's free dim): x @ y as written.
    return e.emit1(Prim::dot_general, {x, y},
                   Params{{"dimension_numbers", DotDims{{xc}, {yc}, b, b}},
                          {"precision", NoneParam{}},
                          {"preferred_element_type", NoneParam{}}});
  }
  Atom T(Atom x) {
    IntList perm = batch_dims();
    perm.push_back(nb() + 1);
    perm.push_back(nb());
    return e.emit1(Prim::transpose, {x}, Params{{"permutation", perm}});
  }
  // The adjoint (conjugate transpose).
  Atom H(Atom x) { return conj(T(x)); }
  // v[..., k] as a row [..., 1, k] or column [..., k, 1], broadcast to [..., rows, cols].
  Atom rows_of(Atom v, int64_t rows, int64_t cols) {
    IntList dims = batch_dims();
    dims.push_back(nb() + 1);
    return e.broadcast_in_dim(v, shape({rows, cols}), dims);
  }
  Atom columns_of(Atom v, int64_t rows, int64_t cols) {
    IntList dims = batch_dims();
    dims.push_back(nb());
    return e.broadcast_in_dim(v, shape({rows, cols}), dims);
  }
  // The diagonal of each k x k matrix, exactly (a strided slice of the flattened matrix).
  Atom diagonal(Atom x, int64_t k) {
    Atom flat = e.reshape(x, shape({k * k}));
    IntList start(static_cast<size_t>(nb()) + 1, 0), stride(static_cast<size_t>(nb()) + 1, 1);
    IntList limit(batch.begin(), batch.end());
    limit.push_back(k * k);
    stride.back() = k + 1;
    return e.emit1(Prim::slice, {flat},
                   Params{{"start_indices", start}, {"limit_indices", limit}, {"strides", stride}});
  }
  // The k x k matrices with v[..., k] on their diagonals and zeros elsewhere (a pad with k
  // zeros between the elements puts element i at flat position i * (k + 1)).
  Atom diagonal_matrix(Atom v, int64_t k) {
    IntListList cfg(static_cast<size_t>(nb()), IntList{0, 0, 0});
    cfg.push_back({0, 0, k});
    Atom flat = e.emit1(Prim::pad, {v, e.scalar(dtype, 0.0)}, Params{{"padding_config", cfg}});
    return e.reshape(flat, shape({k, k}));
  }
  Atom eye(int64_t k) { return diagonal_matrix(e.full(ArrayType{dtype, shape({k})}, 1.0), k); }

  // The mask of a rows x cols matrix's lower (col - row <= k) or upper (col - row >= k) part.
  Atom triangle_mask(int64_t rows, int64_t cols, bool lower, int64_t k) {
    const Shape s = shape({rows, cols});
    const Atom offset = e.sub(e.iota(s, nb() + 1), e.iota(s, nb()));
    return e.emit1(lower ? Prim::le : Prim::ge, {offset, e.scalar(DType::i32, double(k))});
  }
  // x where `mask` holds, zero elsewhere (a select, so an inf elsewhere does not become NaN).
  Atom keep(Atom mask, Atom x) { return e.select(mask, {e.zeros(e.array_type_of(x)), x}); }
  // x's lower (tril) or upper (triu) part about diagonal k.
  Atom tril(Atom x, int64_t k = 0) { return part(x, true, k); }
  Atom triu(Atom x, int64_t k = 0) { return part(x, false, k); }
  Atom part(Atom x, bool lower, int64_t k) {
    const ArrayType t = e.array_type_of(x);
    return keep(triangle_mask(t.shape[t.rank() - 2], t.shape.back(), lower, k), x);
  }
  // x[..., r0:r1, c0:c1].
  Atom block(Atom x, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    IntList start(static_cast<size_t>(nb()), 0), limit(batch.begin(), batch.end());
    start.push_back(r0);
    start.push_back(c0);
    limit.push_back(r1);
    limit.push_back(c1);
    return e.emit1(
        Prim::slice, {x},
        Params{{"start_indices", start}, {"limit_indices", limit}, {"strides", NoneParam{}}});
  }
  // x with `rows` zero rows below and `cols` zero columns to the right (before: above/left).
  Atom pad(Atom x, int64_t rows_before, int64_t rows_after, int64_t cols_before,
           int64_t cols_after) {
    IntListList cfg(static_cast<size_t>(nb()), IntList{0, 0, 0});
    cfg.push_back({rows_before, rows_after, 0});
    cfg.push_back({cols_before, cols_after, 0});
    return e.emit1(Prim::pad, {x, e.scalar(dtype, 0.0)}, Params{{"padding_config", cfg}});
  }
  Atom concat(Atom x, Atom y, bool along_columns) {
    return e.emit1(Prim::concatenate, {x, y},
                   Params{{"dimension", nb() + (along_columns ? 1 : 0)}});
  }
  // x[..., perm[i], :] for each batch: a gather of the flattened rows (exact).
  Atom permute_rows(Atom x, Atom perm) {
    const ArrayType t = e.array_type_of(x);
    const int64_t m = t.shape[t.rank() - 2], n = t.shape.back();
    int64_t b = 1;
    for (int64_t d : batch) b *= d;
    const Atom offsets = e.mul(e.iota(Shape{b, m}, 0), e.scalar(DType::i32, double(m)));
    const Atom rows =
        e.reshape(e.emit1(Prim::add, {e.reshape(perm, Shape{b, m}), offsets}), Shape{b * m});
    const Atom flat = e.reshape(x, Shape{b * m, n});
    return e.reshape(e.emit1(Prim::gather, {flat, rows}, Params{{"axis", int64_t{0}}}), t.shape);
  }
  // triangular_solve with JAX's params.
  Atom solve(Atom a, Atom b, bool left, bool lower, bool transpose_a = false,
             bool unit_diagonal = false, bool conjugate_a = false) {
    return e.emit1(Prim::triangular_solve, {a, b},
                   Params{{"conjugate_a", conjugate_a},
                          {"left_side", left},
                          {"lower", lower},
                          {"transpose_a", transpose_a},
                          {"unit_diagonal", unit_diagonal}});
  }
};

// eigh: with a = v diag(w) v^H, M = v^H da v, dw = re(diag(M)) and dv = v (F * M), where
// F[i][j] = 1 / (w[j] - w[i]) off the diagonal and 0 on it (w is real).
Tangents eigh_jvp(JvpCtx& c, JvpArgs& a) {
  if (!a.tangents[0]) return Tangents(2);
  const ArrayType at = c.p.array_type_of(a.primals[0]);
  const int64_t n = at.shape.back();
  Matrices p{c.p, at.dtype, Shape(at.shape.begin(), at.shape.end() - 2)};
  Matrices t{c.t, at.dtype, p.batch};
  Matrices r{c.p, real_dtype(at.dtype), p.batch};  // the eigenvalues' arithmetic
  const Atom v = a.primal_outs[0], w = a.primal_outs[1];
  const Atom eye = r.eye(n);
  const Atom gaps = r.e.sub(r.e.add(eye, r.rows_of(w, n, n)), r.columns_of(w, n, n));
  const Atom ones = r.e.full(ArrayType{r.dtype, r.shape({n, n})}, 1.0);
  const Atom f = p.complexify(r.e.sub(r.e.div(ones, gaps), eye));
  const Atom m = t.matmul(t.matmul(v, *a.tangents[0], /*adjoint_x=*/true), v);
  const Atom dv = t.matmul(v, t.e.mul(f, m));
  const Atom dw = t.real(t.diagonal(m, n));
  return {dv, dw};
}

// svd: JAX's rule, from the reduced decomposition a = u diag(s) vt (k = min(m, n)).
Tangents svd_jvp(JvpCtx& c, JvpArgs& a) {
  const ArrayType at = c.p.array_type_of(a.primals[0]);
  const bool compute_uv = a.eqn.outs.size() == 3;
  const bool full = a.eqn.params.get_or<bool>("full_matrices", true);
  const int64_t m = at.shape[at.rank() - 2], n = at.shape.back(), k = std::min(m, n);
  if (!a.tangents[0]) {
    a.primal_outs = c.p.copy_eqn(*c.src, a.eqn, a.primals);
    return Tangents(a.eqn.outs.size());
  }
  if (compute_uv && full && m != n)
    throw Error(fmt::format(
        "{}: the derivative of svd with full_matrices=True of a non-square matrix ({}) is not "
        "defined (JAX does not define it either); use full_matrices=False",
        c.where, at.str()));
  // The primal is the reduced decomposition with singular vectors, as in JAX's rule: the
  // rule needs u and vt, and JAX returns that decomposition's values.
  Params reduced = a.eqn.params;
  reduced.set("full_matrices", false);
  reduced.set("compute_uv", true);
  const std::vector<Var> usv = c.p.emit(Prim::svd, {a.primals[0]}, reduced);
  const Atom s = usv[0], u = usv[1], vt = usv[2];
  a.primal_outs.assign(usv.begin(), usv.begin() + (compute_uv ? 3 : 1));

  Matrices p{c.p, at.dtype, Shape(at.shape.begin(), at.shape.end() - 2)};
  Matrices t{c.t, at.dtype, p.batch};
  Matrices r{c.p, real_dtype(at.dtype), p.batch};  // the singular values' arithmetic
  const Atom da = *a.tangents[0];
  const Atom ds_mat = t.matmul(t.matmul(u, da, /*adjoint_x=*/true), vt, false, true);
  const Atom ds = t.real(t.diagonal(ds_mat, k));
  if (!compute_uv) return {ds};

  const Atom s_row = r.rows_of(s, k, k), s_col = r.columns_of(s, k, k);  // s[j], s[i]
  const Atom eye = r.eye(k);
  const ArrayType kk{r.dtype, r.shape({k, k})};
  const Atom s_diffs = r.e.mul(r.e.add(s_row, s_col), r.e.sub(s_row, s_col));
  const Atom f = p.complexify(r.e.sub(r.e.div(r.e.full(kk, 1.0), r.e.add(s_diffs, eye)), eye));
  // 1/s, and 0 where s is 0.
  const ArrayType kt{r.dtype, r.shape({k})};
  const Atom s_zero = r.e.convert(r.e.emit1(Prim::eq, {s, r.e.zeros(kt)}), r.dtype);
  const Atom s_inv = r.e.sub(r.e.div(r.e.full(kt, 1.0), r.e.add(s, s_zero)), s_zero);
  const Atom s_inv_mat = p.complexify(r.diagonal_matrix(s_inv, k));

  const Atom dss = t.e.mul(p.complexify(s_row), ds_mat);  // dS diag(s)
  const Atom sds = t.e.mul(p.complexify(s_col), ds_mat);  // diag(s) dS
  const Atom du_dv_diag =
      t.e.mul(t.e.mul(t.e.sub(ds_mat, t.H(ds_mat)), t.e.scalar(at.dtype, 0.5)), s_inv_mat);
  Atom du = t.matmul(u, t.e.add(t.e.mul(f, t.e.add(dss, t.H(dss))), du_dv_diag));
  Atom dv = t.matmul(vt, t.e.mul(f, t.e.add(sds, t.H(sds))), /*adjoint_x=*/true);
  if (m > n) {
    const Atom dav = t.matmul(da, vt, false, true);
    const Atom projected = t.matmul(u, t.matmul(u, dav, /*adjoint_x=*/true));
    du = t.e.add(du, t.e.div(t.e.sub(dav, projected), p.complexify(r.rows_of(s, m, k))));
  }
  if (n > m) {
    const Atom dau = t.matmul(da, u, /*adjoint_x=*/true);
    const Atom projected = t.matmul(vt, t.matmul(vt, dau), /*adjoint_x=*/true);
    dv = t.e.add(dv, t.e.div(t.e.sub(dau, projected), p.complexify(r.rows_of(s, n, k))));
  }
  return {ds, du, t.H(dv)};
}

// V^-1 rhs: the LU of V on the primal side, the permutation and two triangular solves of rhs on
// the tangent side (JAX's rule solves with jnp.linalg.solve, the same LU).
Atom solve_general(Matrices& p, Matrices& t, Atom v, Atom rhs) {
  const std::vector<Var> factors = p.e.emit(Prim::lu, {v});
  Atom x = t.permute_rows(rhs, factors[2]);
  x = t.solve(factors[0], x, /*left=*/true, /*lower=*/true, false, /*unit_diagonal=*/true);
  return t.solve(factors[0], x, /*left=*/true, /*lower=*/false);
}

// The eigenvalue and eigenvector tangents of a v = v diag(w) (JAX's _eig_vec_jvp):
// P = v^-1 da v, dw = diag(P), U = v (F * P) with F[i][j] = 1 / (w[j] - w[i]) off the diagonal;
// dv = U + v diag(c), c fixed by LAPACK's normalization (unit norm, the largest-magnitude
// component real): c_j = -re(v_j^H u_j) - i im(u_kj) / re(v_kj), k = argmax_i |v_ij|.
std::pair<Atom, Atom> eig_vector_jvp(Matrices& p, Matrices& t, Atom w, Atom v, Atom da, int64_t n) {
  const Atom eye = p.eye(n);
  const Atom gaps = p.e.sub(p.e.add(eye, p.rows_of(w, n, n)), p.columns_of(w, n, n));
  const Atom f = p.e.sub(p.e.div(p.e.full(ArrayType{p.dtype, p.shape({n, n})}, 1.0), gaps), eye);
  const Atom pm = t.matmul(solve_general(p, t, v, da), v);
  const Atom dw = t.diagonal(pm, n);
  const Atom u = t.matmul(v, t.e.mul(f, pm));
  const Atom largest = p.e.emit1(Prim::argmax, {p.e.unary(Prim::abs, v)},
                                 Params{{"axes", IntList{p.nb()}}, {"index_dtype", DType::i32}});
  const Atom rows = p.e.iota(p.shape({n, n}), p.nb());
  const Atom mask = p.e.convert(p.e.emit1(Prim::eq, {rows, p.rows_of(largest, n, n)}), p.dtype);
  auto column_sums = [&](Emitter& e, Atom x) { return e.reduce_sum(x, {p.nb()}); };
  const Atom c_re = t.e.neg(t.real(column_sums(t.e, t.e.mul(p.conj(v), u))));
  const Atom pivots = p.real(column_sums(p.e, p.e.mul(mask, v)));
  const Atom c_im =
      t.e.div(t.e.neg(t.e.emit1(Prim::imag, {column_sums(t.e, t.e.mul(mask, u))})), pivots);
  const Atom c = t.e.emit1(Prim::complex, {c_re, c_im});
  return {dw, t.e.add(u, t.e.mul(v, p.rows_of(c, n, n)))};
}

// eig: JAX's rule. The eigenvalues' tangent is diag(v^-1 da v); the eigenvectors' tangents
// hold only under assumptions on the matrix no one checks, so, as in JAX, they need
// enable_eigvec_derivs=True. The primal is computed with right eigenvectors, which the rule
// needs.
Tangents eig_jvp(JvpCtx& c, JvpArgs& a) {
  const bool left = a.eqn.params.get_or<bool>("compute_left_eigenvectors", false);
  const bool right = a.eqn.params.get_or<bool>("compute_right_eigenvectors", true);
  if (!a.tangents[0]) {
    a.primal_outs = c.p.copy_eqn(*c.src, a.eqn, a.primals);
    return Tangents(a.eqn.outs.size());
  }
  if ((left || right) && !a.eqn.params.get_or<bool>("enable_eigvec_derivs", false))
    throw Error(fmt::format(
        "{}: the derivatives of eig's eigenvectors hold only under assumptions on the matrix "
        "that cannot be checked (JAX refuses them too); pass enable_eigvec_derivs=True to "
        "jax.lax.linalg.eig to accept them, or differentiate the eigenvalues alone "
        "(jnp.linalg.eigvals)",
        c.where));
  const ArrayType at = c.p.array_type_of(a.primals[0]);
  const int64_t n = at.shape.back();
  Params with_vectors = a.eqn.params;
  with_vectors.set("compute_right_eigenvectors", true);
  const std::vector<Var> outs = c.p.emit(Prim::eig, {a.primals[0]}, with_vectors);
  const Atom w = outs[0], vr = outs.back();
  a.primal_outs.assign(outs.begin(), outs.end() - (right ? 0 : 1));

  const DType complex = complex_dtype(at.dtype);
  Matrices p{c.p, complex, Shape(at.shape.begin(), at.shape.end() - 2)};
  Matrices t{c.t, complex, p.batch};
  const Atom da = at.dtype == complex ? *a.tangents[0] : t.e.convert(*a.tangents[0], complex);
  if (!left && !right) {
    const Atom x = solve_general(p, t, vr, da);
    return {t.e.reduce_sum(t.e.mul(x, p.T(vr)), {p.nb() + 1})};
  }
  auto [dw, dvr] = eig_vector_jvp(p, t, w, vr, da, n);
  Tangents out{dw};
  if (left) out.push_back(eig_vector_jvp(p, t, p.conj(w), outs[1], t.H(da), n).second);
  if (right) out.push_back(dvr);
  return out;
}

// A x for the tridiagonal A of diagonals dl, d, du ([..., m]) and x [..., m, n] (JAX's
// _tridiagonal_product): d x, plus dl[i] x[i - 1] in rows 1.., plus du[i] x[i + 1] in rows
// ..m-2. Linear in the diagonals.
Atom tridiagonal_product(Emitter& e, int64_t nb, Atom dl, Atom d, Atom du, Atom x) {
  const ArrayType xt = e.array_type_of(x);
  const int64_t m = xt.shape[xt.rank() - 2];
  IntList dims(static_cast<size_t>(nb) + 1);
  std::iota(dims.begin(), dims.end(), 0);
  auto over_columns = [&](Atom v) { return e.broadcast_in_dim(v, xt.shape, dims); };
  auto rows = [&](Atom v, int64_t from, int64_t to) {  // v[..., from:to, :] (or of a diagonal)
    const ArrayType t = e.array_type_of(v);
    IntList start(static_cast<size_t>(t.rank()), 0), limit(t.shape.begin(), t.shape.end());
    start[static_cast<size_t>(nb)] = from;
    limit[static_cast<size_t>(nb)] = to;
    return e.emit1(
        Prim::slice, {v},
        Params{{"start_indices", start}, {"limit_indices", limit}, {"strides", NoneParam{}}});
  };
  auto pad_rows = [&](Atom v, int64_t before, int64_t after) {
    IntListList cfg(static_cast<size_t>(xt.rank()), IntList{0, 0, 0});
    cfg[static_cast<size_t>(nb)] = {before, after, 0};
    return e.emit1(Prim::pad, {v, e.scalar(xt.dtype, 0.0)}, Params{{"padding_config", cfg}});
  };
  Atom y = e.mul(over_columns(d), x);
  if (m > 1) {
    Shape part = xt.shape;
    part[static_cast<size_t>(nb)] = m - 1;
    IntList part_dims = dims;
    auto over = [&](Atom v) { return e.broadcast_in_dim(v, part, part_dims); };
    y = e.add(y, pad_rows(e.mul(over(rows(dl, 1, m)), rows(x, 0, m - 1)), 1, 0));
    y = e.add(y, pad_rows(e.mul(over(rows(du, 0, m - 1)), rows(x, 1, m)), 0, 1));
  }
  return y;
}

// tridiagonal_solve: JAX's rule, dx = A^-1 (db - dA x), dA x the tridiagonal product of the
// diagonals' tangents.
Tangents tridiagonal_solve_jvp(JvpCtx& c, JvpArgs& a) {
  const ArrayType bt = c.p.array_type_of(a.primals[3]);
  const int64_t nb = bt.rank() - 2;
  MaybeAtom rhs = a.tangents[3];
  if (a.tangents[0] || a.tangents[1] || a.tangents[2]) {
    const ArrayType dt = c.p.array_type_of(a.primals[1]);
    auto tangent = [&](size_t i) { return instantiate(c.t, a.tangents[i], dt); };
    const Atom product =
        tridiagonal_product(c.t, nb, tangent(0), tangent(1), tangent(2), a.primal_outs[0]);
    rhs = rhs ? c.t.sub(*rhs, product) : c.t.neg(product);
  }
  if (!rhs) return Tangents(1);
  return {c.t.emit1(Prim::tridiagonal_solve, {a.primals[0], a.primals[1], a.primals[2], *rhs},
                    a.eqn.params)};
}

// cholesky: with a = L L^H, dL = L phi(L^-1 da L^-H), phi keeping the lower triangle with its
// diagonal halved.
Tangents cholesky_jvp(JvpCtx& c, JvpArgs& a) {
  if (!a.tangents[0]) return Tangents(1);
  const ArrayType at = c.p.array_type_of(a.primals[0]);
  const int64_t n = at.shape.back();
  Matrices p{c.p, at.dtype, Shape(at.shape.begin(), at.shape.end() - 2)};
  Matrices t{c.t, at.dtype, p.batch};
  const Atom l = a.primal_outs[0];
  const Atom tmp = t.solve(l, *a.tangents[0], /*left=*/false, /*lower=*/true,
                           /*transpose_a=*/true, /*unit_diagonal=*/false, /*conjugate_a=*/true);
  const Atom inner = t.solve(l, tmp, /*left=*/true, /*lower=*/true);
  const Atom halves = p.e.add(p.e.full(ArrayType{at.dtype, p.shape({n, n})}, 1.0), p.eye(n));
  const Atom phi = t.e.div(t.keep(p.triangle_mask(n, n, true, 0), inner), halves);
  return {t.matmul(l, phi)};
}

// triangular_solve: linear in b (the same solve of db); for da, JAX's rule: the solve of
// -op(tri(da)) x, ordered so the cheaper product comes first.
Tangents triangular_solve_jvp(JvpCtx& c, JvpArgs& a) {
  const ArrayType at = c.p.array_type_of(a.primals[0]);
  const ArrayType bt = c.p.array_type_of(a.primals[1]);
  Matrices p{c.p, at.dtype, Shape(at.shape.begin(), at.shape.end() - 2)};
  Matrices t{c.t, at.dtype, p.batch};
  const bool left = a.eqn.params.get_or<bool>("left_side", false);
  const bool lower = a.eqn.params.get_or<bool>("lower", false);
  const bool transpose_a = a.eqn.params.get_or<bool>("transpose_a", false);
  const bool unit = a.eqn.params.get_or<bool>("unit_diagonal", false);
  const bool conjugate_a = a.eqn.params.get_or<bool>("conjugate_a", false);
  const Atom a_mat = a.primals[0], x = a.primal_outs[0];
  auto a_inverse = [&](Atom rhs) {
    return t.solve(a_mat, rhs, left, lower, transpose_a, unit, conjugate_a);
  };
  MaybeAtom out;
  if (a.tangents[1]) out = a_inverse(*a.tangents[1]);
  if (a.tangents[0]) {
    const int64_t n = at.shape.back(), k = unit ? 1 : 0;
    const int64_t rows = bt.shape[bt.rank() - 2], cols = bt.shape.back();
    Atom g = t.keep(p.triangle_mask(n, n, lower, lower ? -k : k), *a.tangents[0]);
    g = t.e.neg(g);
    if (transpose_a) g = t.T(g);
    if (conjugate_a) g = t.conj(g);
    Atom d;
    if (left)
      d = rows > cols ? a_inverse(t.matmul(g, x)) : t.matmul(a_inverse(g), x);
    else
      d = rows < cols ? a_inverse(t.matmul(x, g)) : t.matmul(x, a_inverse(g));
    out = out ? t.e.add(*out, d) : d;
  }
  return {out};
}

// lu: with P^T a = L U, X = L^-1 P^T da U^-1, dL = L tril(X, -1) and dU = triu(X) U, packed
// as one matrix (JAX's rule); pivots and permutation have no tangent.
Tangents lu_jvp(JvpCtx& c, JvpArgs& a) {
  if (!a.tangents[0]) return Tangents(3);
  const ArrayType at = c.p.array_type_of(a.primals[0]);
  const int64_t m = at.shape[at.rank() - 2], n = at.shape.back(), k = std::min(m, n);
  if (m == 0 || n == 0) return {c.t.zeros(at), std::nullopt, std::nullopt};
  Matrices p{c.p, at.dtype, Shape(at.shape.begin(), at.shape.end() - 2)};
  Matrices t{c.t, at.dtype, p.batch};
  const Atom lu = a.primal_outs[0], perm = a.primal_outs[2];
  const Atom l = p.e.add(p.pad(p.tril(p.block(lu, 0, m, 0, k), -1), 0, 0, 0, m - k), p.eye(m));
  Atom u = p.pad(p.triu(p.block(lu, 0, k, 0, n)), 0, n - k, 0, 0);
  if (n > k) u = p.e.add(u, p.pad(p.eye(n - k), k, 0, k, 0));
  const Atom x = t.permute_rows(*a.tangents[0], perm);
  const Atom la = t.solve(l, x, /*left=*/true, /*lower=*/true, false, /*unit_diagonal=*/true);
  const Atom lau = t.solve(u, la, /*left=*/false, /*lower=*/false);
  const Atom l_dot = t.matmul(l, t.keep(p.triangle_mask(m, n, true, -1), lau));
  const Atom u_dot = t.matmul(t.keep(p.triangle_mask(m, n, false, 0), lau), u);
  return {t.e.add(l_dot, u_dot), std::nullopt, std::nullopt};
}

// The derivative of x = q r for m >= n and the reduced q [m, n], r [n, n] (JAX's
// _thin_qr_jvp): with C = q^H dx r^-1 and O = tril(C, -1) - tril(C, -1)^H (plus i im(C) on
// the diagonal for complex matrices), dq = q (O - C) + dx r^-1 and dr = (C - O) r.
std::pair<Atom, Atom> thin_qr_jvp(Matrices& p, Matrices& t, Atom q, Atom r, Atom dx) {
  const ArrayType rt = p.e.array_type_of(r);
  const int64_t n = rt.shape.back();
  const Atom dx_rinv = t.solve(r, dx, /*left=*/false, /*lower=*/false);
  const Atom c = t.matmul(q, dx_rinv, /*adjoint_x=*/true);
  const Atom c_lower = t.keep(p.triangle_mask(n, n, true, -1), c);
  Atom o = t.e.sub(c_lower, t.H(c_lower));
  if (p.complex()) {
    const Atom imaginary = t.e.sub(c, t.complexify(t.real(c)));
    o = t.e.add(o, t.e.mul(p.eye(n), imaginary));
  }
  const Atom dq = t.e.add(t.matmul(q, t.e.sub(o, c)), dx_rinv);
  const Atom dr = t.matmul(t.e.sub(c, o), r);
  return {dq, dr};
}

// qr's tangents (dq, dr).
Tangents qr_jvp_of(JvpCtx& c, JvpArgs& a, bool pivoting) {
  const ArrayType at = c.p.array_type_of(a.primals[0]);
  const int64_t m = at.shape[at.rank() - 2], n = at.shape.back();
  const bool full = a.eqn.params.get_or<bool>("full_matrices", true);
  Matrices p{c.p, at.dtype, Shape(at.shape.begin(), at.shape.end() - 2)};
  Matrices t{c.t, at.dtype, p.batch};
  const Atom q = a.primal_outs[0], r = a.primal_outs[1];
  if (m == 0 || n == 0) {
    return {c.t.zeros(c.p.array_type_of(q)), c.t.zeros(c.p.array_type_of(r))};
  }
  Atom dx = *a.tangents[0];
  if (pivoting) {
    // JAX's wide rule uses the unpivoted x's last columns for x2, which is not the derivative
    // of a pivoted factorization: refjit refuses rather than differ from JAX or copy that.
    if (m < n)
      throw NotDifferentiableError(fmt::format(
          "{}: the derivative of a column-pivoted QR of a wide matrix (m={} < n={}) is not "
          "supported: JAX's rule for it does not permute x, and refjit will not give another "
          "derivative than JAX's",
          c.where, m, n));
    dx = t.H(t.permute_rows(t.H(dx), a.primal_outs[2]));  // dx[..., :, p]
  }
  if (m < n) {
    const Atom x2 = p.block(a.primals[0], 0, m, m, n);
    const Atom r1 = p.block(r, 0, m, 0, m);
    auto [dq, dr1] = thin_qr_jvp(p, t, q, r1, t.block(dx, 0, m, 0, m));
    const Atom dr2 = t.e.add(t.matmul(dq, x2, /*adjoint_x=*/true),
                             t.matmul(q, t.block(dx, 0, m, m, n), /*adjoint_x=*/true));
    return {dq, t.concat(dr1, dr2, /*along_columns=*/true)};
  }
  const Atom q_mn = full ? p.block(q, 0, m, 0, n) : q;
  const Atom r_nn = full ? p.block(r, 0, n, 0, n) : r;
  auto [dq_mn, dr_nn] = thin_qr_jvp(p, t, q_mn, r_nn, dx);
  if (!full || m == n) return {dq_mn, dr_nn};
  // Z^H solves (q_nn - I)^H Z^H = q_pn^H through the LU of q_nn - I (JAX's lu_solve, trans=2).
  const Atom q_nn = p.block(q_mn, 0, n, 0, n), q_pn = p.block(q_mn, n, m, 0, n);
  const Atom q_mp = p.block(q, 0, m, n, m);
  const std::vector<Var> factors = p.e.emit(Prim::lu, {p.e.sub(q_nn, p.eye(n))});
  const Atom lu = factors[0], perm = factors[2];
  Atom z_t = p.solve(lu, p.H(q_pn), /*left=*/true, /*lower=*/false, /*transpose_a=*/true,
                     /*unit_diagonal=*/false, /*conjugate_a=*/true);
  z_t = p.solve(lu, z_t, /*left=*/true, /*lower=*/true, /*transpose_a=*/true,
                /*unit_diagonal=*/true, /*conjugate_a=*/true);
  // Undo the row permutation (row perm[i] of the result is row i of z_t): gather through the
  // inverse permutation, which sorting perm with an iota gives.
  const ArrayType perm_t = p.e.array_type_of(perm);
  const Atom steps = p.e.iota(perm_t.shape, p.nb());
  const std::vector<Var> sorted =
      p.e.emit(Prim::sort, {perm, steps},
               Params{{"dimension", p.nb()}, {"is_stable", true}, {"num_keys", int64_t{1}}});
  z_t = p.permute_rows(z_t, sorted[1]);
  const Atom z = p.H(z_t);
  const Atom dq_nn = t.block(dq_mn, 0, n, 0, n), dq_pn = t.block(dq_mn, n, m, 0, n);
  const Atom rhs = t.e.sub(dq_pn, t.matmul(z, dq_nn));
  const Atom dq_mp =
      t.e.sub(t.matmul(dq_mn, z_t), t.matmul(p.e.add(q_mn, p.matmul(q_mp, z)), rhs, false, true));
  const Atom dq = t.concat(dq_mn, dq_mp, /*along_columns=*/true);
  const Atom dr = t.pad(dr_nn, 0, m - n, 0, 0);
  return {dq, dr};
}

// qr: JAX's rule. Wide matrices (m < n) split x = [x1 x2] with x1 square; full q of a tall
// matrix extends the thin derivative with Z = q_pn (q_nn - I)^-1 (arXiv 2409.13374). With
// pivoting (x[:, p] = q r) the rule applies to dx[:, p], and p's tangent is zero.
Tangents qr_jvp(JvpCtx& c, JvpArgs& a) {
  const bool pivoting = a.eqn.outs.size() == 3;
  if (!a.tangents[0]) return Tangents(a.eqn.outs.size());
  Tangents ts = qr_jvp_of(c, a, pivoting);
  if (pivoting) ts.push_back(std::nullopt);
  return ts;
}

}  // namespace

void register_linalg_jvp_rules(JvpRuleTable& t) {
  t.set(Prim::eigh, {eigh_jvp});
  t.set(Prim::svd, {svd_jvp, /*emits_primal=*/true});
  t.set(Prim::eig, {eig_jvp, /*emits_primal=*/true});
  t.set(Prim::cholesky, {cholesky_jvp});
  t.set(Prim::tridiagonal_solve, {tridiagonal_solve_jvp});
  t.set(Prim::triangular_solve, {triangular_solve_jvp});
  t.set(Prim::lu, {lu_jvp});
  t.set(Prim::qr, {qr_jvp});
}

}  // namespace refjit
