"""JAX's cholesky and triangular_solve (jnp.linalg.cholesky, jax.scipy.linalg.cho_solve and
solve_triangular, a Gaussian-process likelihood) against JAX: values on both backends, every
form of triangular_solve, gradients and forward mode."""

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
