"""JAX's cholesky, triangular_solve, lu, qr and custom_linear_solve (jnp.linalg.cholesky,
solve, inv, det, slogdet, qr, jax.scipy.linalg.cho_solve, lu_factor and solve_triangular, a
Gaussian-process likelihood) against JAX: values on both backends, every form of
triangular_solve, pivots, gradients and forward mode."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_tree_close
from jax.lax.linalg import triangular_solve

import refjit


@pytest.fixture
def spd(rng):
    a = rng.standard_normal((2, 5, 5)).astype(np.float32)
    return a @ a.transpose(0, 2, 1) + 5 * np.eye(5, dtype=np.float32)


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_cholesky_and_cho_solve(backend, spd, rng):
    b = rng.standard_normal((2, 5, 3)).astype(np.float32)
    def cho_solve(s, b):
        return jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(s), True), b)

    assert_tree_close(refjit.jit(jnp.linalg.cholesky, backend=backend)(spd),
                      jnp.linalg.cholesky(spd), rtol=1e-5, atol=1e-6)
    assert_tree_close(refjit.jit(cho_solve, backend=backend)(spd, b), cho_solve(spd, b),
                      rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("left,lower,transpose_a,unit",
                         list(itertools.product([True, False], repeat=4)))
def test_every_triangular_solve(left, lower, transpose_a, unit, spd, rng):
    # The other triangle holds NaNs: only the named one may be read.
    ones = np.ones((5, 5))
    other = np.triu(ones, 1) if lower else np.tril(ones, -1)
    a = (np.where(other == 1, np.nan, spd)).astype(np.float32)
    b = rng.standard_normal((2, 5, 3) if left else (2, 3, 5)).astype(np.float32)
    f = lambda a, b: triangular_solve(a, b, left_side=left, lower=lower,  # noqa: E731
                                      transpose_a=transpose_a, unit_diagonal=unit)
    expected = f(a, b)
    assert np.all(np.isfinite(expected))
    for backend in ("native", "interpreter"):
        assert_tree_close(refjit.jit(f, backend=backend)(a, b), expected, rtol=1e-4, atol=1e-5)


def test_gaussian_process_likelihood_gradient(rng):
    x = np.linspace(0, 1, 6, dtype=np.float32)
    y = np.sin(6 * x).astype(np.float32)

    def negative_log_likelihood(params):
        length, noise = jnp.exp(params[0]), jnp.exp(params[1])
        k = jnp.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / length ** 2)
        k = k + (noise + 1e-3) * jnp.eye(6)
        chol = jnp.linalg.cholesky(k)
        alpha = jax.scipy.linalg.cho_solve((chol, True), y)
        return 0.5 * y @ alpha + jnp.sum(jnp.log(jnp.diag(chol)))

    params = np.array([-1.0, -2.0], np.float32)
    assert_tree_close(refjit.jit(negative_log_likelihood)(params),
                      negative_log_likelihood(params), rtol=1e-4)
    assert_tree_close(refjit.grad(negative_log_likelihood)(params),
                      jax.grad(negative_log_likelihood)(params), rtol=1e-3, atol=1e-4)
    t = np.array([0.3, -0.7], np.float32)
    assert_tree_close(refjit.jvp(negative_log_likelihood, (params,), (t,)),
                      jax.jvp(negative_log_likelihood, (params,), (t,)), rtol=1e-3, atol=1e-4)


@pytest.fixture
def general(rng):
    # Not symmetric, and its first column's largest entry is not on the diagonal, so the
    # factorization must pivot.
    a = rng.standard_normal((5, 5))
    a[3, 0] = 4.0
    return a


@pytest.mark.parametrize("backend", ["native", "interpreter"])
@pytest.mark.parametrize("shape", [(5, 5), (5, 3), (3, 5), (2, 4, 4)])
def test_lu_factors_pivots_and_permutation(backend, shape, rng):
    x = rng.standard_normal(shape)
    x[..., -1, 0] = 6.0  # pivoting moves the last row up
    with jax.enable_x64():
        got = refjit.jit(jax.lax.linalg.lu, backend=backend)(x)
        want = jax.lax.linalg.lu(x)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])
    assert_tree_close(got[0], want[0], rtol=1e-12, atol=1e-12)


def test_lu_of_a_singular_matrix_leaves_the_zero_column(rng):
    x = rng.standard_normal((4, 4))
    x[:, 1] = 0.0  # no pivot in column 1: LAPACK neither divides nor fails
    with jax.enable_x64():
        got = refjit.jit(jax.lax.linalg.lu)(x)
        want = jax.lax.linalg.lu(x)
    assert np.all(np.isfinite(got[0]))
    assert_tree_close(got, want, rtol=1e-12, atol=1e-12)


LINALG_FUNCTIONS = {
    "solve": lambda a, b: jnp.linalg.solve(a, b),
    "solve_matrix_rhs": lambda a, b: jnp.linalg.solve(a, jnp.outer(b, b[:3])),
    "inv": lambda a, b: jnp.linalg.inv(a) @ b,
    "det": lambda a, b: jnp.linalg.det(a) * b,
    "slogdet": lambda a, b: jnp.linalg.slogdet(a)[1] * b,
    "lu_solve": lambda a, b: jax.scipy.linalg.lu_solve(jax.scipy.linalg.lu_factor(a), b),
    "qr": lambda a, b: jnp.linalg.qr(a)[0] @ b + jnp.linalg.qr(a)[1] @ b,
    "qr_least_squares": lambda a, b: jax.scipy.linalg.solve_triangular(
        jnp.linalg.qr(a[:, :3])[1], jnp.linalg.qr(a[:, :3])[0].T @ b),
}


@pytest.mark.parametrize("name", LINALG_FUNCTIONS)
def test_linear_algebra_values_and_derivatives_match_jax(name, general, rng):
    f = LINALG_FUNCTIONS[name]
    b = rng.standard_normal(5)
    loss = lambda a, b: jnp.sum(jnp.sin(f(a, b)))  # noqa: E731
    ta, tb = rng.standard_normal((5, 5)), rng.standard_normal(5)
    with jax.enable_x64():
        for backend in ("native", "interpreter"):
            assert_tree_close(refjit.jit(f, backend=backend)(general, b), f(general, b),
                              rtol=1e-11, atol=1e-12)
        # The derivative with respect to the matrix comes from custom_linear_solve's rule
        # (jnp.linalg.solve factors a under stop_gradient): a dropped rule would give zeros.
        assert_tree_close(refjit.grad(loss, argnums=(0, 1))(general, b),
                          jax.grad(loss, argnums=(0, 1))(general, b), rtol=1e-9, atol=1e-11)
        assert_tree_close(refjit.jvp(f, (general, b), (ta, tb)),
                          jax.jvp(f, (general, b), (ta, tb)), rtol=1e-9, atol=1e-11)
        # And against finite differences, independently of JAX.
        eps = 1e-6
        fd = (loss(general + eps * ta, b) - loss(general - eps * ta, b)) / (2 * eps)
        ga = refjit.grad(loss)(general, b)
        np.testing.assert_allclose(np.sum(ga * ta), fd, rtol=1e-6, atol=1e-8)


def test_solve_in_float32_and_batched(rng):
    a = rng.standard_normal((3, 4, 4)).astype(np.float32) + 4 * np.eye(4, dtype=np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    f = lambda a, b: jnp.linalg.solve(a, b[..., None])[..., 0]  # noqa: E731
    assert_tree_close(refjit.jit(f)(a, b), f(a, b), rtol=1e-5, atol=1e-6)
    loss = lambda a, b: jnp.sum(f(a, b) ** 2) + jnp.sum(jnp.linalg.inv(a))  # noqa: E731
    assert_tree_close(refjit.grad(loss, argnums=(0, 1))(a, b),
                      jax.grad(loss, argnums=(0, 1))(a, b), rtol=1e-4, atol=1e-5)



@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_lu_pivots_to_permutation(backend):
    pivots = np.array([[3, 3, 4], [0, 2, 2]], np.int32)
    f = lambda p: jax.lax.linalg.lu_pivots_to_permutation(p, 5)  # noqa: E731
    np.testing.assert_array_equal(refjit.jit(f, backend=backend)(pivots), f(pivots))


@pytest.mark.parametrize("backend", ["native", "interpreter"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 5, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr_has_lapacks_signs(backend, shape, mode, rng):
    x = rng.standard_normal(shape)
    f = lambda x: jnp.linalg.qr(x, mode=mode)  # noqa: E731
    with jax.enable_x64():
        assert_tree_close(refjit.jit(f, backend=backend)(x), f(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 5, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_column_pivoted_qr_is_lapacks_geqp3(shape, dtype, full_matrices, rng):
    x = rng.standard_normal(shape).astype(dtype)
    if dtype == np.complex128:
        x = x + 1j * rng.standard_normal(shape)
    f = lambda x: jax.lax.linalg.qr(x, pivoting=True,  # noqa: E731
                                    full_matrices=full_matrices)
    with jax.enable_x64():
        for backend in ("native", "interpreter"):
            assert_tree_close(tuple(refjit.jit(f, backend=backend)(x)), tuple(f(x)), rtol=1e-10,
                              atol=1e-12)
        scipy_qr = lambda x: jax.scipy.linalg.qr(x, pivoting=True)  # noqa: E731
        if len(shape) == 2:
            assert_tree_close(tuple(refjit.jit(scipy_qr)(x)), tuple(scipy_qr(x)), rtol=1e-10,
                              atol=1e-12)


@pytest.mark.parametrize("full_matrices", [True, False])
def test_column_pivoted_qr_derivatives_are_jaxs_where_jaxs_rule_holds(full_matrices, rng):
    x, t = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    f = lambda x: jax.lax.linalg.qr(x, pivoting=True,  # noqa: E731
                                    full_matrices=full_matrices)[:2]
    loss = lambda x: jnp.sum(jnp.sin(f(x)[0])) + jnp.sum(f(x)[1] ** 2)  # noqa: E731
    with jax.enable_x64():
        assert_tree_close(refjit.jvp(f, (x,), (t,)), jax.jvp(f, (x,), (t,)), rtol=1e-9,
                          atol=1e-11)
        assert_tree_close(refjit.grad(loss)(x), jax.grad(loss)(x), rtol=1e-9, atol=1e-11)
        # JAX's rule for a wide matrix does not permute x: refjit refuses it.
        wide = rng.standard_normal((3, 5))
        with pytest.raises(refjit.Error, match="column-pivoted QR of a wide matrix"):
            refjit.grad(loss)(wide)


def test_qr_of_a_rank_deficient_matrix_reflects_as_lapack_does():
    # Column 1's part below the diagonal is zero at its step: no reflection there (tau = 0).
    x = np.zeros((3, 3))
    x[0, 0], x[2, 1] = 1.0, 2.0
    with jax.enable_x64():
        got, want = refjit.jit(jnp.linalg.qr)(x), jnp.linalg.qr(x)
    assert_tree_close(tuple(got), tuple(want), rtol=0, atol=1e-15)


@pytest.mark.parametrize("solver", ["cg", "bicgstab", "gmres"])
def test_an_iterative_linear_solve_is_differentiated_as_jax_does(solver, rng):
    # jax.scipy.sparse.linalg.cg is a custom_linear_solve whose solve is a while loop. JAX
    # differentiates it by solving again on the tangent (and the transposed system for the
    # cotangent), never through the iterations; so does refjit's linear_solve. Three
    # iterations do not converge, so differentiating the loop would give other numbers.
    a = rng.standard_normal((6, 6))
    a = a @ a.T + 6 * np.eye(6)
    b = rng.standard_normal(6)
    ta, tb = rng.standard_normal((6, 6)), rng.standard_normal(6)
    solve = getattr(jax.scipy.sparse.linalg, solver)
    f = lambda a, b: solve(lambda v: a @ v, b, maxiter=3)[0]  # noqa: E731
    loss = lambda a, b: jnp.sum(jnp.sin(f(a, b)))  # noqa: E731
    with jax.enable_x64():
        for backend in ("native", "interpreter"):
            assert_tree_close(refjit.jit(f, backend=backend)(a, b), f(a, b), rtol=1e-12,
                              atol=1e-12)
        assert_tree_close(refjit.jvp(f, (a, b), (ta, tb)), jax.jvp(f, (a, b), (ta, tb)),
                          rtol=1e-9, atol=1e-11)
        assert_tree_close(refjit.grad(loss, argnums=(0, 1))(a, b),
                          jax.grad(loss, argnums=(0, 1))(a, b), rtol=1e-9, atol=1e-11)
        assert_tree_close(jax.vmap(refjit.grad(loss, argnums=1), in_axes=(None, 0))(
            a, np.stack([b, 2 * b])), jax.vmap(jax.grad(loss, argnums=1), in_axes=(None, 0))(
            a, np.stack([b, 2 * b])), rtol=1e-9, atol=1e-11)


def test_a_linear_solve_without_transpose_solve_refuses_reverse_mode(rng):
    a = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal(3)
    f = lambda a, b: jax.lax.custom_linear_solve(  # noqa: E731
        lambda v: a @ v, b, lambda mv, r: jnp.linalg.solve(a, r))
    with jax.enable_x64():
        assert_tree_close(refjit.jvp(f, (a, b), (a, b)), jax.jvp(f, (a, b), (a, b)),
                          rtol=1e-10, atol=1e-12)
        with pytest.raises(refjit.Error, match="needs its transpose"):
            refjit.grad(lambda a, b: jnp.sum(f(a, b)))(a, b)


def test_second_derivatives_through_a_solve_are_jaxs(rng):
    # linear_solve's tangent and cotangent are linear solves too, so refjit's derivatives of
    # solve, inv, det and slogdet are JAX's to every order, however they are nested.
    a = rng.standard_normal((4, 4)) + 4 * np.eye(4)
    t = rng.standard_normal((4, 4))
    b = rng.standard_normal(4)
    logdet = lambda a: jnp.linalg.slogdet(a)[1]  # noqa: E731
    with jax.enable_x64():
        want = jax.grad(lambda a: jnp.sum(jax.grad(logdet)(a) * t))(a)
        for inner in (refjit.grad, jax.grad):
            for outer in (refjit.grad, jax.grad):
                g = lambda a: jnp.sum(inner(logdet)(a) * t)  # noqa: E731
                assert_tree_close(outer(g)(a), want, rtol=1e-9, atol=1e-11,
                                  numpy_result=outer is refjit.grad)
        solve_loss = lambda a, b: jnp.sum(jnp.linalg.solve(a, b) ** 3)  # noqa: E731
        for argnums in (0, 1):
            assert_tree_close(refjit.jvp(refjit.grad(solve_loss, argnums=argnums), (a, b),
                                         (t, b)), jax.jvp(jax.grad(solve_loss, argnums=argnums),
                                                          (a, b), (t, b)),
                              rtol=1e-8, atol=1e-10)
        det3 = lambda a: jnp.linalg.det(a)  # noqa: E731
        third = refjit.jvp(lambda a: refjit.jvp(lambda a: refjit.grad(det3)(a), (a,), (t,))[1],
                           (a,), (t,))[1]
        want = jax.jvp(lambda a: jax.jvp(lambda a: jax.grad(det3)(a), (a,), (t,))[1],
                       (a,), (t,))[1]
        assert_tree_close(third, want, rtol=1e-8, atol=1e-10)
        # Against finite differences of JAX's gradient, independently of JAX's second order.
        eps = 1e-6
        fd = (jax.grad(logdet)(a + eps * t) - jax.grad(logdet)(a - eps * t)) / (2 * eps)
        np.testing.assert_allclose(refjit.jvp(refjit.grad(logdet), (a,), (t,))[1], fd,
                                   rtol=1e-6, atol=1e-8)


# The factorizations are LAPACK calls with JAX's derivative rules: every rule against JAX's,
# forward and reverse, on shapes that take each branch of the rules.

def _well_conditioned_triangle(rng, n, lower):
    a = rng.standard_normal((n, n)) + 4 * np.eye(n)
    return np.tril(a) if lower else np.triu(a)


@pytest.mark.parametrize("left,lower,transpose_a,unit",
                         list(itertools.product([True, False], repeat=4)))
@pytest.mark.parametrize("other", [2, 7])  # b's other dim below and above a's order 5
def test_triangular_solve_derivatives_match_jax(left, lower, transpose_a, unit, other, rng):
    a = _well_conditioned_triangle(rng, 5, lower)
    b = rng.standard_normal((5, other) if left else (other, 5))
    ta, tb = rng.standard_normal(a.shape), rng.standard_normal(b.shape)
    f = lambda a, b: triangular_solve(a, b, left_side=left, lower=lower,  # noqa: E731
                                      transpose_a=transpose_a, unit_diagonal=unit)
    loss = lambda a, b: jnp.sum(jnp.sin(f(a, b)))  # noqa: E731
    with jax.enable_x64():
        assert_tree_close(refjit.jvp(f, (a, b), (ta, tb)), jax.jvp(f, (a, b), (ta, tb)),
                          rtol=1e-10, atol=1e-12)
        assert_tree_close(refjit.grad(loss, argnums=(0, 1))(a, b),
                          jax.grad(loss, argnums=(0, 1))(a, b), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
def test_cholesky_derivatives_match_jax_and_finite_differences(shape, rng):
    x = rng.standard_normal(shape)
    s = x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])
    t = rng.standard_normal(shape)
    t = t + np.swapaxes(t, -1, -2)
    loss = lambda s: jnp.sum(jnp.sin(jnp.linalg.cholesky(s)))  # noqa: E731
    with jax.enable_x64():
        assert_tree_close(refjit.jvp(jnp.linalg.cholesky, (s,), (t,)),
                          jax.jvp(jnp.linalg.cholesky, (s,), (t,)), rtol=1e-10, atol=1e-12)
        g = refjit.grad(loss)(s)
        assert_tree_close(g, jax.grad(loss)(s), rtol=1e-10, atol=1e-12)
        eps = 1e-6
        fd = (loss(s + eps * t) - loss(s - eps * t)) / (2 * eps)
        np.testing.assert_allclose(np.sum(g * t), fd, rtol=1e-6)


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_nan_as_in_jax(backend):
    s = np.array([[[4.0, 2.0], [2.0, 5.0]], [[1.0, 2.0], [2.0, 1.0]]], np.float32)
    got = refjit.jit(jnp.linalg.cholesky, backend=backend)(s)
    want = jnp.linalg.cholesky(s)
    assert np.isnan(want[1, 1, 1]) and np.all(np.isfinite(want[0]))
    # NaN for the lower triangle that failed (the upper is masked to zero around the call).
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=0)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 4, 3)])
def test_lu_derivatives_match_jax(shape, rng):
    x = rng.standard_normal(shape) + np.eye(*shape[-2:])
    t = rng.standard_normal(shape)
    factors = lambda x: jax.lax.linalg.lu(x)[0]  # noqa: E731
    loss = lambda x: jnp.sum(jnp.sin(factors(x)))  # noqa: E731
    with jax.enable_x64():
        assert_tree_close(refjit.jvp(factors, (x,), (t,)), jax.jvp(factors, (x,), (t,)),
                          rtol=1e-10, atol=1e-12)
        assert_tree_close(refjit.grad(loss)(x), jax.grad(loss)(x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 5, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_derivatives_match_jax(shape, mode, rng):
    # A tall complete QR takes JAX's full-matrices rule (an LU solve of q_nn - I), a wide one
    # the split [x1 x2] rule.
    x = rng.standard_normal(shape)
    t = rng.standard_normal(shape)
    f = lambda x: jnp.linalg.qr(x, mode=mode)  # noqa: E731
    loss = lambda x: sum(jnp.sum(jnp.sin(y)) for y in f(x))  # noqa: E731
    with jax.enable_x64():
        assert_tree_close(refjit.jvp(f, (x,), (t,)), jax.jvp(f, (x,), (t,)), rtol=1e-9,
                          atol=1e-11)
        assert_tree_close(refjit.grad(loss)(x), jax.grad(loss)(x), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_factorizations_under_vmap(backend, spd, rng):
    # One matrix for every right-hand side (an unbatched operand), and a batch of each.
    b = rng.standard_normal((4, 5, 2)).astype(np.float32)
    one_matrix = lambda b: jax.scipy.linalg.cho_solve(  # noqa: E731
        (jnp.linalg.cholesky(spd[0]), True), b)
    each = lambda s: jnp.linalg.qr(jnp.linalg.cholesky(s))[1]  # noqa: E731
    assert_tree_close(refjit.jit(jax.vmap(one_matrix), backend=backend)(b),
                      jax.vmap(one_matrix)(b), rtol=1e-4, atol=1e-5)
    assert_tree_close(refjit.jit(jax.vmap(each), backend=backend)(spd), jax.vmap(each)(spd),
                      rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(5, 2), (3, 4, 1), (1, 3)])
def test_tridiagonal_solve_values_and_derivatives_match_jax(shape, rng):
    # jax.lax.linalg.tridiagonal_solve: LAPACK's gtsv, JAX's JVP (dx = A^-1 (db - dA x)) and
    # transpose (the solve with the transposed matrix), with respect to every operand.
    m = shape[-2]
    diag_shape = shape[:-1]
    dl, du = rng.standard_normal(diag_shape), rng.standard_normal(diag_shape)
    d = rng.standard_normal(diag_shape) + 4.0
    b = rng.standard_normal(shape)
    args = (dl, d, du, b)
    tangents = tuple(rng.standard_normal(x.shape) for x in args)
    f = jax.lax.linalg.tridiagonal_solve
    loss = lambda *a: jnp.sum(jnp.sin(f(*a)))  # noqa: E731
    with jax.enable_x64():
        for backend in ("native", "interpreter"):
            assert_tree_close(refjit.jit(f, backend=backend)(*args), f(*args), rtol=1e-12,
                              atol=1e-12)
        assert_tree_close(refjit.jvp(f, args, tangents), jax.jvp(f, args, tangents),
                          rtol=1e-10, atol=1e-12)
        assert_tree_close(refjit.grad(loss, argnums=(0, 1, 2, 3))(*args),
                          jax.grad(loss, argnums=(0, 1, 2, 3))(*args), rtol=1e-10, atol=1e-12)
    assert m == shape[-2]


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_tridiagonal_solve_of_a_singular_matrix_is_nan_as_in_jax(backend):
    zeros = np.zeros(3, np.float32)
    b = np.ones((3, 1), np.float32)
    f = jax.lax.linalg.tridiagonal_solve
    want = f(zeros, zeros, zeros, b)
    assert np.all(np.isnan(want))
    np.testing.assert_array_equal(refjit.jit(f, backend=backend)(zeros, zeros, zeros, b), want)
