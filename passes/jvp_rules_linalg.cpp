// JVP rules of the matrix decompositions, JAX's rules (jax/_src/lax/linalg.py) written with
// refjit's primitives: the primal work (the decomposition and the factors built from it) on
// the primal emitter, products with the tangent on the tangent emitter, so reverse mode
// transposes those products and nothing else.
#include <fmt/format.h>

#include "passes/jvp_rules.h"
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

  // x @ y, either transposed first.
  Atom matmul(Atom x, Atom y, bool transpose_x = false, bool transpose_y = false) {
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
};

// eigh: with a = v diag(w) v^T, M = v^T da v, dw = diag(M) and dv = v (F * M), where
// F[i][j] = 1 / (w[j] - w[i]) off the diagonal and 0 on it.
Tangents eigh_jvp(JvpCtx& c, JvpArgs& a) {
  if (!a.tangents[0]) return Tangents(2);
  const ArrayType at = c.p.array_type_of(a.primals[0]);
  const int64_t n = at.shape.back();
  Matrices p{c.p, at.dtype, Shape(at.shape.begin(), at.shape.end() - 2)};
  Matrices t{c.t, at.dtype, p.batch};
  const Atom v = a.primal_outs[0], w = a.primal_outs[1];
  const Atom eye = p.eye(n);
  const Atom gaps = p.e.sub(p.e.add(eye, p.rows_of(w, n, n)), p.columns_of(w, n, n));
  const Atom f = p.e.sub(p.e.div(p.e.full(at, 1.0), gaps), eye);
  const Atom m = t.matmul(t.matmul(v, *a.tangents[0], /*transpose_x=*/true), v);
  const Atom dv = t.matmul(v, t.e.mul(f, m));
  const Atom dw = t.diagonal(m, n);
  return {dv, dw};
}

// svd: JAX's rule, from the reduced decomposition a = u diag(s) vt (k = min(m, n)).
Tangents svd_jvp(JvpCtx& c, JvpArgs& a) {
  const ArrayType at = c.p.array_type_of(a.primals[0]);
  const bool compute_uv = a.eqn.outs.size() == 3;
  const bool full = a.eqn.params.get_or<bool>("full_matrices", true);
  const int64_t m = at.shape[at.rank() - 2], n = at.shape.back(), k = std::min(m, n);
  if (!a.tangents[0]) {
    std::vector<Type> types;
    for (const Var& o : a.eqn.outs) types.push_back(c.src->type_of(o));
    a.primal_outs = c.p.copy_eqn(a.eqn, a.primals, types);
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
  const Atom da = *a.tangents[0];
  const Atom ds_mat = t.matmul(t.matmul(u, da, /*transpose_x=*/true), vt, false, true);
  const Atom ds = t.diagonal(ds_mat, k);
  if (!compute_uv) return {ds};

  const Atom s_row = p.rows_of(s, k, k), s_col = p.columns_of(s, k, k);  // s[j], s[i]
  const Atom eye = p.eye(k);
  const ArrayType kk{at.dtype, p.shape({k, k})};
  const Atom s_diffs = p.e.mul(p.e.add(s_row, s_col), p.e.sub(s_row, s_col));
  const Atom f = p.e.sub(p.e.div(p.e.full(kk, 1.0), p.e.add(s_diffs, eye)), eye);
  // 1/s, and 0 where s is 0.
  const ArrayType kt{at.dtype, p.shape({k})};
  const Atom s_zero = p.e.convert(p.e.emit1(Prim::eq, {s, p.e.zeros(kt)}), at.dtype);
  const Atom s_inv = p.e.sub(p.e.div(p.e.full(kt, 1.0), p.e.add(s, s_zero)), s_zero);
  const Atom s_inv_mat = p.diagonal_matrix(s_inv, k);

  const Atom dss = t.e.mul(s_row, ds_mat);  // dS diag(s)
  const Atom sds = t.e.mul(s_col, ds_mat);  // diag(s) dS
  const Atom du_dv_diag =
      t.e.mul(t.e.mul(t.e.sub(ds_mat, t.T(ds_mat)), t.e.scalar(at.dtype, 0.5)), s_inv_mat);
  Atom du = t.matmul(u, t.e.add(t.e.mul(f, t.e.add(dss, t.T(dss))), du_dv_diag));
  Atom dv = t.matmul(vt, t.e.mul(f, t.e.add(sds, t.T(sds))), /*transpose_x=*/true);
  if (m > n) {
    const Atom dav = t.matmul(da, vt, false, true);
    const Atom projected = t.matmul(u, t.matmul(u, dav, /*transpose_x=*/true));
    du = t.e.add(du, t.e.div(t.e.sub(dav, projected), p.rows_of(s, m, k)));
  }
  if (n > m) {
    const Atom dau = t.matmul(da, u, /*transpose_x=*/true);
    const Atom projected = t.matmul(vt, t.matmul(vt, dau), /*transpose_x=*/true);
    dv = t.e.add(dv, t.e.div(t.e.sub(dau, projected), p.rows_of(s, n, k)));
  }
  return {ds, du, t.T(dv)};
}

}  // namespace

void register_linalg_jvp_rules(JvpRuleTable& t) {
  t.set(Prim::eigh, {eigh_jvp});
  t.set(Prim::svd, {svd_jvp, /*emits_primal=*/true});
}

}  // namespace refjit
