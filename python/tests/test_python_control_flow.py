"""Python control flow on array values under refjit's autodiff (refjit/_specialize.py): grad,
vjp, jvp and linearize trace such a function on its arguments' values, as JAX's eager
transformations run it; refjit.jit refuses it, as jax.jit does."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_tree_close

import refjit
from refjit import TraceError


def branchy(x):
    if jnp.sum(x) > 0:
        return jnp.sum(jnp.sin(x) * 2.0)
    return jnp.sum(x ** 3)


def halve_until_small(x):
    v = x
    while jnp.max(jnp.abs(v)) > 0.1:  # the trip count depends on x
        v = v * 0.5
    return jnp.sum(v ** 2)


def unrolled(x, n):
    y = x
    for _ in range(int(n)):
        y = jnp.tanh(y) + x
    return jnp.sum(y)


POSITIVE = np.array([1.5, -0.25, 0.5], np.float32)
NEGATIVE = -POSITIVE


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_each_call_takes_its_own_branch(backend):
    grad = refjit.grad(branchy, backend=backend)
    # The same argument type twice, with values that take different branches: the program of
    # the first call must not be reused for the second.
    for x in (POSITIVE, NEGATIVE, POSITIVE):
        assert_tree_close(grad(x), jax.grad(branchy)(x))


@pytest.mark.parametrize("backend", ["native", "interpreter"])
def test_every_autodiff_mode(backend):
    x, t = POSITIVE, np.array([1.0, 2.0, -1.0], np.float32)
    for f, args in ((halve_until_small, (x,)), (branchy, (NEGATIVE,))):
        assert_tree_close(refjit.jvp(f, args, (t,), backend=backend), jax.jvp(f, args, (t,)))
        out, f_jvp = refjit.linearize(f, *args, backend=backend)
        expected_out, expected_jvp = jax.linearize(f, *args)
        assert_tree_close((out, f_jvp(t)), (expected_out, expected_jvp(t)))
        out, f_vjp = refjit.vjp(f, *args, backend=backend)
        ct = np.float32(1.5)
        assert_tree_close((out, f_vjp(ct)), (f(*args), jax.vjp(f, *args)[1](ct)))


def test_python_integers_from_values_and_finite_differences():
    x = np.array([0.3, -0.2], np.float64)
    with jax.enable_x64(True):
        g = refjit.grad(unrolled)(x, np.int32(3))
        eps = 1e-6
        fd = [(unrolled(x + eps * e, 3) - unrolled(x - eps * e, 3)) / (2 * eps)
              for e in np.eye(2)]
    np.testing.assert_allclose(g, np.array(fd), rtol=1e-6)


def test_custom_rules_inside_are_applied():
    def f(x):
        if jnp.sum(x) > 0:
            return jnp.sum(jax.nn.relu(x)) + jnp.sum(jnp.logaddexp(x, 0.0))
        return jnp.sum(x)

    x = np.array([0.0, 1.0, -0.5], np.float32)  # relu's rule gives 0 at 0, max's would be 0.5
    assert_tree_close(refjit.grad(f)(x), jax.grad(f)(x))

    @jax.custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))

    def g(x):
        total = 0.0
        for i in range(x.shape[0]):
            if x[i] > 0:
                total = total + clip_gradient(x[i]) * 3.0
        return total

    assert_tree_close(refjit.grad(g)(x), jax.grad(g)(x))


def test_a_closed_over_ref_is_updated_once_per_call():
    counter = jax.new_ref(np.zeros(3, np.float32))

    def f(x):
        counter[...] += jax.lax.stop_gradient(x)
        if x[1] > 0:
            return jnp.sum(x * 2.0)
        return jnp.sum(x)

    assert_tree_close(refjit.grad(f)(POSITIVE), np.ones(3, np.float32))  # x[1] < 0
    np.testing.assert_array_equal(counter[...], POSITIVE)
    assert_tree_close(refjit.grad(f)(NEGATIVE), np.full(3, 2.0, np.float32))
    np.testing.assert_array_equal(counter[...], np.zeros(3, np.float32))


def test_jit_refuses_and_says_what_to_do():
    with pytest.raises(TraceError, match="lax.cond.*refjit.grad, vjp, jvp and linearize"):
        refjit.jit(branchy)(POSITIVE)
