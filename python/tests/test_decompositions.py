"""eigh and svd (jnp.linalg.eigh, eigvalsh, svd, pinv, lstsq, matrix_rank, norm(ord=2)) against
JAX: LAPACK's results with JAX's signs and order on both backends, JAX's derivative rules in
forward and reverse mode, batching, and the loud refusals."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_tree_close

import refjit

BACKENDS = ["native", "interpreter"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_eigh_values_and_vectors(backend, dtype, rng):
    a = rng.standard_normal((3, 6, 6)).astype(dtype)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    with jax.enable_x64(dtype == np.float64):
        expected = jnp.linalg.eigh(a)
        actual = refjit.jit(jnp.linalg.eigh, backend=backend)(a)
        # Same eigenvectors, signs included: LAPACK's syevd, as on JAX's CPU backend.
        assert_tree_close(tuple(actual), tuple(expected), **tol)
        assert_tree_close(refjit.jit(jnp.linalg.eigvalsh, backend=backend)(a),
                          jnp.linalg.eigvalsh(a), **tol)


@pytest.mark.parametrize("lower", [True, False])
def test_eigh_reads_only_the_named_triangle(lower, rng):
    a = rng.standard_normal((5, 5)).astype(np.float32)
    a = a + a.T
    other = np.triu(np.ones((5, 5)), 1) if lower else np.tril(np.ones((5, 5)), -1)
    a = np.where(other == 1, np.nan, a).astype(np.float32)
    f = lambda x: jax.lax.linalg.eigh(x, lower=lower, symmetrize_input=False)  # noqa: E731
    expected = f(a)
    assert np.all(np.isfinite(expected[0]))
    for backend in BACKENDS:
        assert_tree_close(tuple(refjit.jit(f, backend=backend)(a)), tuple(expected), rtol=1e-4,
                          atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(7, 4), (4, 7), (5, 5), (2, 6, 3)])
@pytest.mark.parametrize("full_matrices", [False, True])
@pytest.mark.parametrize("compute_uv", [True, False])
@pytest.mark.parametrize("algorithm", [None, jax.lax.linalg.SvdAlgorithm.QR])
def test_svd_every_form(backend, shape, full_matrices, compute_uv, algorithm, rng):
    # SvdAlgorithm.QR is LAPACK's gesvd, as on JAX's CPU backend (gesdd otherwise): the same
    # routine gives the vectors the same signs.
    a = rng.standard_normal(shape).astype(np.float32)
    f = lambda x: jax.lax.linalg.svd(x, full_matrices=full_matrices,  # noqa: E731
                                     compute_uv=compute_uv, algorithm=algorithm)
    expected, actual = f(a), refjit.jit(f, backend=backend)(a)
    if compute_uv:
        expected, actual = tuple(expected), tuple(actual)
    assert_tree_close(actual, expected, rtol=1e-4, atol=1e-5)


def test_nan_input_gives_nan_like_jax():
    a = np.eye(4, dtype=np.float32)
    a[1, 2] = np.nan
    for f in (jnp.linalg.eigh, jnp.linalg.svd):
        expected = f(a)
        actual = refjit.jit(f)(a)
        for x, y in zip(actual, expected):
            np.testing.assert_array_equal(np.isnan(np.asarray(x)), np.isnan(np.asarray(y)))


def test_empty_matrices():
    for shape in [(0, 3), (3, 0), (2, 0, 0)]:
        a = np.zeros(shape, np.float32)
        for full in (True, False):
            f = lambda x: jnp.linalg.svd(x, full_matrices=full)  # noqa: E731
            assert_tree_close(tuple(refjit.jit(f)(a)), tuple(f(a)))
    assert_tree_close(tuple(refjit.jit(jnp.linalg.eigh)(np.zeros((0, 0), np.float32))),
                      tuple(jnp.linalg.eigh(np.zeros((0, 0), np.float32))))


def test_derived_functions(rng):
    tall = rng.standard_normal((6, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    singular = np.outer(np.arange(1.0, 5.0), np.arange(1.0, 4.0)).astype(np.float32)
    assert_tree_close(refjit.jit(jnp.linalg.pinv)(tall), jnp.linalg.pinv(tall), rtol=1e-4,
                      atol=1e-5)
    assert_tree_close(refjit.jit(lambda a, b: jnp.linalg.lstsq(a, b))(tall, b),
                      jnp.linalg.lstsq(tall, b), rtol=1e-4, atol=1e-5)
    assert_tree_close(refjit.jit(jnp.linalg.matrix_rank)(singular),
                      jnp.linalg.matrix_rank(singular))
    assert_tree_close(refjit.jit(jnp.linalg.cond)(tall), jnp.linalg.cond(tall), rtol=1e-4)
    assert_tree_close(refjit.jit(lambda x: jnp.linalg.norm(x, "nuc"))(tall),
                      jnp.linalg.norm(tall, "nuc"), rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_eigh_gradient_and_forward_mode(backend, rng):
    def loss(x):
        w, v = jnp.linalg.eigh(x)
        return jnp.sum(w ** 2 * jnp.arange(1.0, 5.0)) + jnp.sum(v[..., 1] ** 3)

    with jax.enable_x64():
        a = rng.standard_normal((4, 4))
        t = rng.standard_normal((4, 4))
        batch = rng.standard_normal((3, 4, 4))  # the rule on leading batch dims
        assert_tree_close(refjit.grad(loss, backend=backend)(batch), jax.grad(loss)(batch),
                          rtol=1e-9, atol=1e-11)
        expected = jax.grad(loss)(a)
        assert_tree_close(refjit.grad(loss, backend=backend)(a), expected, rtol=1e-9,
                          atol=1e-11)
        assert_tree_close(refjit.jvp(loss, (a,), (t,), backend=backend),
                          jax.jvp(loss, (a,), (t,)), rtol=1e-9, atol=1e-11)
        # And the derivative is the derivative: a central difference along t + t^T (the
        # direction jnp.linalg.eigh sees after symmetrizing).
        eps = 1e-6
        numeric = (loss(a + eps * t) - loss(a - eps * t)) / (2 * eps)
        assert abs(float(np.sum(np.asarray(expected) * t)) - float(numeric)) < 1e-6


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (2, 3, 6)])
def test_svd_gradient_and_forward_mode(backend, shape, rng):
    def loss(x):
        u, s, vt = jnp.linalg.svd(x, full_matrices=False)
        return jnp.sum(s ** 2) + jnp.sum(jnp.sin(u[..., 0]) ** 2) + jnp.sum(vt[..., 0, :] ** 3)

    with jax.enable_x64():
        a = rng.standard_normal(shape)
        t = rng.standard_normal(shape)
        assert_tree_close(refjit.grad(loss, backend=backend)(a), jax.grad(loss)(a), rtol=1e-9,
                          atol=1e-11)
        assert_tree_close(refjit.jvp(loss, (a,), (t,), backend=backend),
                          jax.jvp(loss, (a,), (t,)), rtol=1e-9, atol=1e-11)


def test_gradients_through_singular_values_only(rng):
    a = rng.standard_normal((5, 3)).astype(np.float32)
    for f in (lambda x: jnp.linalg.norm(x, 2), lambda x: jnp.linalg.norm(x, "nuc"),
              lambda x: jnp.sum(jnp.linalg.svd(x, compute_uv=False) ** 3),
              lambda x: jnp.sum(jnp.linalg.pinv(x) ** 2)):
        assert_tree_close(refjit.grad(f)(a), jax.grad(f)(a), rtol=1e-4, atol=1e-5)
        assert_tree_close(refjit.value_and_grad(f)(a), jax.value_and_grad(f)(a), rtol=1e-4,
                          atol=1e-5)


def test_repeated_eigenvalues_match_jax(rng):
    # The identity's eigenvalues are equal: the values are exact, and the eigenvector
    # derivative divides by their zero gaps, NaN as in JAX.
    a = np.eye(3, dtype=np.float32)
    assert_tree_close(tuple(refjit.jit(jnp.linalg.eigh)(a)), tuple(jnp.linalg.eigh(a)))
    f = lambda x: jnp.sum(jnp.linalg.eigh(x)[1])  # noqa: E731
    np.testing.assert_array_equal(np.isnan(np.asarray(refjit.grad(f)(a))),
                                  np.isnan(np.asarray(jax.grad(f)(a))))
    g = lambda x: jnp.sum(jnp.linalg.eigvalsh(x) * jnp.arange(3.0))  # noqa: E731
    assert_tree_close(refjit.grad(g)(a), jax.grad(g)(a))


def test_under_jax_vmap(rng):
    # jax.vmap prints the decompositions with a leading batch dim, which they take as is.
    a = rng.standard_normal((4, 5, 5)).astype(np.float32)
    for f in (jnp.linalg.eigh, lambda x: jnp.linalg.svd(x, full_matrices=False)):
        assert_tree_close(tuple(refjit.jit(jax.vmap(f))(a)), tuple(jax.vmap(f)(a)), rtol=1e-4,
                          atol=1e-5)
    loss = lambda x: jnp.sum(jnp.linalg.svd(x, compute_uv=False))  # noqa: E731
    assert_tree_close(refjit.jit(jax.vmap(jax.grad(loss)))(a), jax.vmap(jax.grad(loss))(a),
                      rtol=1e-4, atol=1e-5)


def test_refusals_name_what_to_do(rng):
    wide = rng.standard_normal((3, 5)).astype(np.float32)
    full = lambda x: jnp.sum(jnp.linalg.svd(x, full_matrices=True)[0])  # noqa: E731
    with pytest.raises(Exception, match="full_matrices=True.*full_matrices=False"):
        refjit.grad(full)(wide)
    half = rng.standard_normal((3, 3)).astype(np.float16)
    with pytest.raises(Exception, match="f32, f64, c64 and c128 matrices"):
        refjit.jit(lambda x: jax.lax.linalg.eigh(x))(half)
    jacobi = lambda x: jax.lax.linalg.svd(  # noqa: E731
        x, algorithm=jax.lax.linalg.SvdAlgorithm.JACOBI)
    with pytest.raises(Exception, match="algorithm=SvdAlgorithm.JACOBI is not supported"):
        refjit.jit(jacobi)(wide)
