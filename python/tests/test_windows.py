"""Pooling as JAX users write it (stax's MaxPool and AvgPool, lax.reduce_window), and the
other JAX primitives read as rewrites (tile, lax.reduce with a tuple of monoids), against JAX:
values, gradients (each window's first maximum gets the cotangent), Hessian-vector products
and vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_tree_close
from jax import lax
from jax.example_libraries import stax

import refjit


@pytest.fixture
def net(rng):
    init, apply = stax.serial(stax.Conv(4, (3, 3), padding="SAME"), stax.Relu,
                              stax.MaxPool((2, 2), strides=(2, 2)),
                              stax.Conv(3, (3, 3), padding="SAME"),
                              stax.AvgPool((2, 2), strides=(1, 1), padding="SAME"), stax.Flatten,
                              stax.Dense(2))
    _, params = init(jax.random.PRNGKey(0), (2, 8, 8, 1))
    params = jax.tree_util.tree_map(np.asarray, params)
    x = rng.standard_normal((2, 8, 8, 1)).astype(np.float32)
    return apply, params, x


def test_a_pooling_convnet_and_its_gradient(net):
    apply, params, x = net
    loss = lambda p, x: jnp.sum(apply(p, x) ** 2)  # noqa: E731
    assert_tree_close(refjit.jit(apply)(params, x), apply(params, x), rtol=1e-4, atol=1e-5)
    assert_tree_close(refjit.grad(loss)(params, x), jax.grad(loss)(params, x), rtol=1e-4,
                      atol=1e-5)


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_max_pool_gradient_sends_ties_to_the_first_maximum(backend):
    x = np.array([[1.0, 5.0, 2.0, 2.0], [3.0, 5.0, 0.0, 1.0]], np.float32)
    pool = lambda x: jnp.sum(lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (2, 2), "VALID"))  # noqa: E731
    got = refjit.grad(pool, backend=backend)(x)
    np.testing.assert_array_equal(got, [[0, 1, 1, 0], [0, 0, 0, 0]])
    assert_tree_close(got, jax.grad(pool)(x))


def test_second_derivatives_and_vmap_through_pooling(rng):
    x = rng.standard_normal((5, 6)).astype(np.float32)
    t = rng.standard_normal((5, 6)).astype(np.float32)

    def f(x):
        m = lax.reduce_window(x, -jnp.inf, lax.max, (2, 3), (1, 2), ((1, 0), (0, 1)))
        a = lax.reduce_window(x, 0.0, lax.add, (3, 2), (2, 1), "SAME", base_dilation=(1, 2))
        return jnp.sum(jnp.tanh(m)) + jnp.sum(a * a)

    assert_tree_close(refjit.jvp(refjit.grad(f), (x,), (t,)), jax.jvp(jax.grad(f), (x,), (t,)),
                      rtol=1e-4, atol=1e-5)
    xs = np.stack([x, 2 * x, -x])
    assert_tree_close(refjit.jit(jax.vmap(jax.grad(f)))(xs), jax.vmap(jax.grad(f))(xs),
                      rtol=1e-4, atol=1e-5)


def test_tile_and_tuple_reductions(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)

    def f(x):
        prod, total = lax.reduce((x, x * 2), (1.0, 0.0),
                                 lambda a, b: (a[0] * b[0], a[1] + b[1]), (0,))
        return jnp.tile(x, (2, 1)), prod, total

    assert_tree_close(refjit.jit(f)(x), f(x), rtol=1e-6)
    g = lambda x: sum(jnp.sum(jnp.sin(y)) for y in f(x))  # noqa: E731
    assert_tree_close(refjit.grad(g)(x), jax.grad(g)(x), rtol=1e-5)


GENERIC_WINDOWS = [  # window, strides, padding, base dilation, window dilation
    ((2, 2), (1, 1), "VALID", None, None),
    ((3, 2), (2, 1), "SAME", None, None),
    ((2, 3), (1, 2), ((1, 0), (2, 1)), (2, 1), (1, 2)),
]


@pytest.mark.parametrize("backend", ["native", "interpreter"])
@pytest.mark.parametrize("window, strides, padding, base, dilation", GENERIC_WINDOWS)
def test_generic_reduce_window_of_a_python_function(backend, window, strides, padding, base,
                                                    dilation, rng):
    x = rng.uniform(0.5, 1.5, size=(5, 6)).astype(np.float32)
    ints = rng.integers(-5, 5, size=(5, 6)).astype(np.int32)

    def f(x, ints):
        product = lax.reduce_window(x, 1.0, lax.mul, window, strides, padding, base, dilation)
        # Two operands folded together: a sum of floats and a maximum of ints.
        total, largest = lax.reduce_window(
            (x, ints), (0.0, np.int32(-100)), lambda a, b: (a[0] + b[0], jnp.maximum(a[1], b[1])),
            window, strides, padding, base, dilation)
        return product, total, largest

    assert_tree_close(refjit.jit(f, backend=backend)(x, ints), jax.jit(f)(x, ints), rtol=1e-5,
                      atol=1e-6)


def test_generic_reduce_window_gradient_matches_finite_differences(rng):
    # JAX has no derivative for a generic reduce_window; refjit's is that of the fold of
    # slices it reads it as, checked here against central differences in float64.
    x = rng.uniform(0.5, 1.5, size=(4, 5))
    t = rng.standard_normal((4, 5))

    def loss(x):
        y = lax.reduce_window(x, 1.0, lax.mul, (2, 2), (1, 2), "SAME")
        return jnp.sum(jnp.sin(y))

    with jax.enable_x64():
        g = refjit.grad(loss)(x)
        eps = 1e-6
        fd = (loss(x + eps * t) - loss(x - eps * t)) / (2 * eps)
    np.testing.assert_allclose(np.sum(g * t), fd, rtol=1e-7)
