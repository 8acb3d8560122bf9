"""complex64 and complex128 through refjit, against JAX: values on both backends, forward and
reverse derivatives with JAX's (unconjugated) conventions, holomorphic gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_tree_close
from jax import lax

import refjit

UNARY = {
    "sin": jnp.sin, "cos": jnp.cos, "tan": jnp.tan, "tanh": jnp.tanh, "exp": jnp.exp,
    "log": jnp.log, "log1p": jnp.log1p, "expm1": jnp.expm1, "sqrt": jnp.sqrt,
    "rsqrt": lax.rsqrt, "asin": jnp.arcsin, "acos": jnp.arccos, "atan": jnp.arctan,
    "sinh": jnp.sinh, "cosh": jnp.cosh, "asinh": jnp.arcsinh, "acosh": jnp.arccosh,
    "atanh": jnp.arctanh, "abs": jnp.abs, "real": jnp.real, "imag": jnp.imag, "conj": jnp.conj,
    "sign": jnp.sign, "logistic": jax.nn.sigmoid, "exp2": jnp.exp2, "square": jnp.square,
    "cube": lambda z: z ** 3, "pow": lambda z: z ** (0.5 + 0.25j),
}


@pytest.fixture
def z(rng):
    return (rng.standard_normal(5) + 1j * rng.standard_normal(5)).astype(np.complex64)


def close(actual, expected, rtol=2e-5, atol=2e-6):
    assert_tree_close(actual, jax.tree_util.tree_map(np.asarray, expected), rtol=rtol, atol=atol)


@pytest.mark.parametrize("backend", ["native", "interpreter"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_elementwise_values_and_derivatives_are_jaxs(name, backend, z, rng):
    f = UNARY[name]
    close(refjit.jit(f, backend=backend)(z), f(z), rtol=1e-5)
    t = (rng.standard_normal(5) + 1j * rng.standard_normal(5)).astype(np.complex64)
    close(refjit.jvp(f, (z,), (t,), backend=backend), jax.jvp(f, (z,), (t,)), rtol=1e-4,
          atol=1e-5)
    out = f(z)
    ct = np.ones(out.shape, out.dtype)
    close(refjit.vjp(f, z, backend=backend)[1](ct), jax.vjp(f, z)[1](ct), rtol=1e-4, atol=1e-5)


def test_grad_of_a_real_loss_of_complex_arguments(z):
    def loss(w, a):
        y = jnp.conj(a) @ (w * a)
        return jnp.real(y) + jnp.sum(jnp.abs(jnp.sin(w)) ** 2)

    a = (z[::-1] * 0.5).astype(np.complex64)
    close(refjit.grad(loss, argnums=(0, 1))(z, a), jax.grad(loss, argnums=(0, 1))(z, a),
          rtol=1e-4)


def test_holomorphic_grad_and_its_refusals(z):
    f = lambda v: jnp.sum(jnp.exp(v) * v)  # noqa: E731
    close(refjit.grad(f, holomorphic=True)(z), jax.grad(f, holomorphic=True)(z), rtol=1e-5)
    with pytest.raises(TypeError, match="holomorphic=True"):
        refjit.grad(f)(z)
    with pytest.raises(TypeError, match="complex"):
        refjit.grad(lambda v: jnp.sum(v).astype(jnp.complex64), holomorphic=True)(
            np.ones(3, np.float32))


def test_products_sums_and_conversions_in_complex128(rng):
    jax.config.update("jax_enable_x64", True)
    try:
        a = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4)))
        b = (rng.standard_normal((4, 2)) + 1j * rng.standard_normal((4, 2)))

        def f(a, b):
            p = a @ b
            return (jnp.sum(p, axis=0), p.real.astype(jnp.float32), jnp.cumsum(a, axis=1),
                    lax.complex(b.real, b.imag * 2.0))

        close(refjit.jit(f)(a, b), f(a, b), rtol=1e-12, atol=1e-12)
        g = lambda a, b: jnp.abs(jnp.sum(a @ b)) ** 2  # noqa: E731
        close(refjit.grad(g, argnums=(0, 1))(a, b), jax.grad(g, argnums=(0, 1))(a, b),
              rtol=1e-10, atol=1e-12)
    finally:
        jax.config.update("jax_enable_x64", False)


def test_complex_carry_through_a_scan(z):
    def f(z):
        def step(c, x):
            c = c * x + 1j
            return c, jnp.abs(c)
        c, ys = lax.scan(step, jnp.complex64(1.0), z)
        return jnp.real(c) + jnp.sum(ys)

    close(refjit.jit(f)(z), f(z), rtol=1e-5)
    close(refjit.grad(f)(z), jax.grad(f)(z), rtol=1e-4)


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_scatter_multiply_of_complex_values_and_derivatives(backend, rng):
    def f(x, y, idx):
        return jnp.asarray(x).at[idx].multiply(y)

    def cplx(n):
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)

    x, tx = cplx(5), cplx(5)
    y, ty = cplx(4), cplx(4)
    y[3] = 0  # a zero update: its partner's derivative must not divide by it
    unique = np.array([0, 2, 4, 1], np.int32)
    g = lambda x, y: f(x, y, unique)  # noqa: E731
    close(refjit.jit(g, backend=backend)(x, y), g(x, y), rtol=1e-5)
    # JAX differentiates scatter-mul only with unique indices.
    gu = lambda x, y: jnp.asarray(x).at[unique].multiply(y, unique_indices=True)  # noqa: E731
    close(refjit.jvp(g, (x, y), (tx, ty), backend=backend), jax.jvp(gu, (x, y), (tx, ty)),
          rtol=1e-4, atol=1e-5)
    ct = cplx(5)
    close(refjit.vjp(g, x, y, backend=backend)[1](ct), jax.vjp(gu, x, y)[1](ct), rtol=1e-4,
          atol=1e-5)
    # Duplicate indices (refjit's rule is exact there): against central differences in c128.
    dup = np.array([0, 2, 0, 2], np.int32)
    h = lambda x, y: f(x, y, dup)  # noqa: E731
    _, tangent = refjit.jvp(h, (x, y), (tx, ty), backend=backend)
    def h_numpy(x, y):
        out = x.copy()
        for i, j in enumerate(dup):
            out[j] *= y[i]
        return out

    x2, y2, eps = x.astype(np.complex128), y.astype(np.complex128), 1e-4
    fd = (h_numpy(x2 + eps * tx, y2 + eps * ty) - h_numpy(x2 - eps * tx, y2 - eps * ty)) / (2 * eps)
    np.testing.assert_allclose(tangent, fd, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["native", "interpreter"])
@pytest.mark.parametrize("reduce, axes", [(lax.reduce_max, (1,)), (lax.reduce_min, (0, 2)),
                                          (lax.reduce_max, (0, 1, 2))])
def test_complex_max_and_min_are_lexicographic_with_jaxs_derivative(backend, reduce, axes, rng):
    x = (rng.standard_normal((3, 4, 5)) + 1j * rng.standard_normal((3, 4, 5))).astype(np.complex64)
    x[0, 0, 0] = x[0, 1, 0]                           # a tie: the tangents are averaged
    x[1, 0, 3] = x[1, 2, 3].real + 1j * (x[1, 2, 3].imag - 1)  # equal real parts
    t = (rng.standard_normal(x.shape) + 1j * rng.standard_normal(x.shape)).astype(np.complex64)
    f = lambda x: reduce(x, axes)  # noqa: E731
    np.testing.assert_array_equal(refjit.jit(f, backend=backend)(x), f(x))
    assert_tree_close(refjit.jvp(f, (x,), (t,), backend=backend), jax.jvp(f, (x,), (t,)),
                      rtol=1e-5, atol=1e-6)
    loss = lambda x: jnp.sum(jnp.abs(f(x)) ** 2)  # noqa: E731
    assert_tree_close(refjit.grad(loss, backend=backend)(x), jax.grad(loss)(x), rtol=1e-5,
                      atol=1e-6)
