"""The decompositions of complex matrices (LAPACK's c/z routines, as JAX's CPU backend calls
them) against JAX: values on both backends, and JAX's derivative rules (their conjugate
transposes) in forward and reverse mode, in c128 and c64."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_tree_close
from jax.lax.linalg import triangular_solve

import refjit


def complex_matrix(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def hermitian_positive(rng, n, dtype=np.complex128):
    a = complex_matrix(rng, (n, n), dtype)
    return (a @ a.conj().T + n * np.eye(n)).astype(dtype)


def real_loss(f):
    """A real loss of f's complex results: sums of the real and the imaginary parts' sines."""
    def loss(*args):
        outs = jax.tree_util.tree_leaves(f(*args))
        return sum(jnp.sum(jnp.sin(jnp.real(o))) + jnp.sum(jnp.cos(jnp.imag(o))) for o in outs)
    return loss


def check(f, args, tangents, *, rtol=1e-9, atol=1e-11, values_rtol=1e-12):
    with jax.enable_x64():
        for backend in ("native", "interpreter"):
            assert_tree_close(refjit.jit(f, backend=backend)(*args), f(*args),
                              rtol=values_rtol, atol=values_rtol)
        assert_tree_close(refjit.jvp(f, args, tangents), jax.jvp(f, args, tangents),
                          rtol=rtol, atol=atol)
        loss = real_loss(f)
        argnums = tuple(range(len(args)))
        assert_tree_close(refjit.grad(loss, argnums=argnums)(*args),
                          jax.grad(loss, argnums=argnums)(*args), rtol=rtol, atol=atol)


def test_cholesky_of_a_hermitian_matrix(rng):
    s = hermitian_positive(rng, 4)
    t = complex_matrix(rng, (4, 4))
    check(jnp.linalg.cholesky, (s,), (t + t.conj().T,))


@pytest.mark.parametrize("transpose_a,conjugate_a", [(False, False), (True, False),
                                                     (True, True), (False, True)])
@pytest.mark.parametrize("left", [True, False])
def test_triangular_solve_every_op(left, transpose_a, conjugate_a, rng):
    a = np.tril(complex_matrix(rng, (4, 4))) + 4 * np.eye(4)
    b = complex_matrix(rng, (4, 3) if left else (3, 4))
    f = lambda a, b: triangular_solve(a, b, left_side=left, lower=True,  # noqa: E731
                                      transpose_a=transpose_a, conjugate_a=conjugate_a)
    check(f, (a, b), (complex_matrix(rng, a.shape), complex_matrix(rng, b.shape)))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_lu(shape, rng):
    x = complex_matrix(rng, shape)
    check(lambda x: jax.lax.linalg.lu(x)[0], (x,), (complex_matrix(rng, shape),))
    with jax.enable_x64():
        got, want = refjit.jit(jax.lax.linalg.lu)(x), jax.lax.linalg.lu(x)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr(shape, mode, rng):
    x = complex_matrix(rng, shape)
    check(lambda x: jnp.linalg.qr(x, mode=mode), (x,), (complex_matrix(rng, shape),))


def test_eigh_of_a_hermitian_matrix_has_real_eigenvalues(rng):
    a = complex_matrix(rng, (4, 4))
    h = a + a.conj().T
    t = complex_matrix(rng, (4, 4))
    with jax.enable_x64():
        w = refjit.jit(jnp.linalg.eigvalsh)(h)
    assert w.dtype == np.float64
    # Eigenvectors have a phase freedom; a loss of |v|^2 and of the eigenvalues does not.
    f = lambda h: (jnp.abs(jnp.linalg.eigh(h)[1]) ** 2, jnp.linalg.eigh(h)[0])  # noqa: E731
    check(f, (h,), (t + t.conj().T,), values_rtol=1e-10)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4)])
def test_svd(shape, rng):
    x = complex_matrix(rng, shape)
    t = complex_matrix(rng, shape)
    check(lambda x: jnp.linalg.svd(x, compute_uv=False), (x,), (t,), values_rtol=1e-10)
    # Singular vectors have a phase freedom: u diag(s) vt is free of it, and JAX's rule gives
    # its derivative through every term.
    def product(x):
        u, s, vt = jnp.linalg.svd(x, full_matrices=False)
        return (u * s) @ vt, jnp.abs(u) ** 2
    check(product, (x,), (t,), values_rtol=1e-10)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5)])
def test_svd_by_gesvd_gives_jaxs_vectors(shape, rng):
    # SvdAlgorithm.QR is LAPACK's zgesvd on both sides: the vectors themselves agree.
    x = complex_matrix(rng, shape)
    f = lambda x: jax.lax.linalg.svd(  # noqa: E731
        x, full_matrices=False, algorithm=jax.lax.linalg.SvdAlgorithm.QR)
    with jax.enable_x64():
        for backend in ("native", "interpreter"):
            assert_tree_close(tuple(refjit.jit(f, backend=backend)(x)), tuple(f(x)),
                              rtol=1e-10, atol=1e-12)


def test_solve_inv_and_slogdet_in_complex64(rng):
    a = (complex_matrix(rng, (4, 4), np.complex64) + 4 * np.eye(4)).astype(np.complex64)
    b = complex_matrix(rng, (4,), np.complex64)
    f = lambda a, b: (jnp.linalg.solve(a, b), jnp.linalg.inv(a),  # noqa: E731
                      jnp.linalg.slogdet(a)[1])
    for backend in ("native", "interpreter"):
        assert_tree_close(refjit.jit(f, backend=backend)(a, b), f(a, b), rtol=1e-5, atol=1e-5)
    loss = real_loss(f)
    assert_tree_close(refjit.grad(loss, argnums=(0, 1))(a, b),
                      jax.grad(loss, argnums=(0, 1))(a, b), rtol=1e-4, atol=1e-4)


def sorted_by_value(w):
    return np.sort_complex(np.asarray(w))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eig_values_and_vectors_are_lapacks(dtype, rng):
    # A real matrix with complex conjugate pairs: geev's packed vectors unpacked as JAX does.
    a = (rng.standard_normal((5, 5)) if dtype == np.float64
         else complex_matrix(rng, (5, 5))).astype(dtype)
    f = lambda a: jax.lax.linalg.eig(a, compute_left_eigenvectors=True)  # noqa: E731
    with jax.enable_x64():
        want = f(a)
        assert np.any(np.abs(np.imag(want[0])) > 1e-3)
        for backend in ("native", "interpreter"):
            assert_tree_close(refjit.jit(f, backend=backend)(a), want, rtol=1e-10, atol=1e-12)
        assert_tree_close(refjit.jit(jnp.linalg.eigvals)(a), jnp.linalg.eigvals(a),
                          rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_eig_derivatives_match_jax(dtype, rng):
    a = (rng.standard_normal((4, 4)) if dtype == np.float64
         else complex_matrix(rng, (4, 4))).astype(dtype)
    t = (rng.standard_normal((4, 4)) if dtype == np.float64
         else complex_matrix(rng, (4, 4))).astype(dtype)
    with jax.enable_x64():
        assert_tree_close(refjit.jvp(jnp.linalg.eigvals, (a,), (t,)),
                          jax.jvp(jnp.linalg.eigvals, (a,), (t,)), rtol=1e-9, atol=1e-11)
        loss = real_loss(jnp.linalg.eigvals)
        assert_tree_close(refjit.grad(loss)(a), jax.grad(loss)(a), rtol=1e-9, atol=1e-11)
        # Eigenvector derivatives, accepted with enable_eigvec_derivs as in JAX (v * v is free
        # of the sign a real matrix's pair leaves open).
        def vectors(a):
            w, vl, vr = jax.lax.linalg.eig(a, compute_left_eigenvectors=True,
                                           enable_eigvec_derivs=True)
            return w, vl * vl, vr * vr
        assert_tree_close(refjit.jvp(vectors, (a,), (t,)), jax.jvp(vectors, (a,), (t,)),
                          rtol=1e-8, atol=1e-10)
        loss = real_loss(vectors)
        assert_tree_close(refjit.grad(loss)(a), jax.grad(loss)(a), rtol=1e-8, atol=1e-10)
        with pytest.raises(refjit.Error, match="enable_eigvec_derivs=True"):
            refjit.grad(real_loss(jnp.linalg.eig))(a)
