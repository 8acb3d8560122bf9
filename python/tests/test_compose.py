"""refjit's transformations applied to each other, and JAX's applied to refjit functions: the
inner refjit function becomes one refjit_call eqn holding refjit's own program, which the
outer transformation transforms (refjit's) or calls (JAX's), against JAX's numbers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_tree_close
from jax import lax

import refjit


def f(x):
    return jnp.sin(x) * x


def g(x):
    return jnp.sum(jnp.tanh(x) * x[::-1])


def jax_close(actual, expected, **kw):
    """Where a JAX transformation is outermost, results are JAX arrays."""
    assert_tree_close(actual, expected, numpy_result=False, **kw)


@pytest.fixture
def x():
    return np.linspace(-1.0, 1.5, 6, dtype=np.float32)


def test_grad_of_grad_differentiates_refjits_own_gradient_program():
    assert_tree_close(refjit.grad(refjit.grad(f))(1.5), jax.grad(jax.grad(f))(1.5))
    # The inner gradient is refjit's program, staged into the outer trace by name.
    text = refjit.make_jaxpr(refjit.grad(f))(1.5).jax_text
    assert "jit[name=refjit_" in text and "cos" not in text


def test_a_refjit_function_wrapping_another_keeps_its_own_settings():
    # functools.update_wrapper must not copy the inner function's fields over the outer's.
    inner = refjit.grad(f)
    outer = refjit.grad(inner)
    assert outer._fun is inner and inner._fun is f


def test_jvp_of_jvp_and_grad_of_vjp(x):
    def jvp_inner(v):
        return refjit.jvp(f, (v,), (jnp.ones_like(v),))[1]

    def jvp_inner_jax(v):
        return jax.jvp(f, (v,), (jnp.ones_like(v),))[1]

    assert_tree_close(refjit.jvp(jvp_inner, (x,), (x,)), jax.jvp(jvp_inner_jax, (x,), (x,)))

    def vjp_inner(v):
        y, back = refjit.vjp(f, v)
        return jnp.sum(back(y)[0])

    def vjp_inner_jax(v):
        y, back = jax.vjp(f, v)
        return jnp.sum(back(y)[0])

    assert_tree_close(refjit.grad(vjp_inner)(x), jax.grad(vjp_inner_jax)(x))


def test_jit_of_a_refjit_gradient_and_a_hessian(x):
    assert_tree_close(refjit.jit(refjit.grad(g))(x), jax.grad(g)(x))
    hess = refjit.jit(lambda v: refjit.vjp(refjit.grad(g), v)[1](jnp.ones_like(v))[0])
    assert_tree_close(hess(x), jax.vjp(jax.grad(g), x)[1](jnp.ones_like(x))[0], rtol=1e-4)


def test_jax_vmap_of_refjit_functions_uses_refjits_vmap(x):
    jax_close(jax.vmap(refjit.jit(f))(x), jax.vmap(f)(x))
    jax_close(jax.vmap(refjit.grad(f))(x), jax.vmap(jax.grad(f))(x))
    xs = np.stack([x, 2 * x])
    jax_close(jax.vmap(refjit.grad(g), in_axes=1)(xs.T), jax.vmap(jax.grad(g))(xs))
    text = str(jax.make_jaxpr(jax.vmap(refjit.jit(f)))(x))
    assert "refjit_" in text and "_batched" in text


def test_jax_grad_of_a_refjit_function_uses_refjits_linearize_and_transpose(x):
    jax_close(jax.grad(refjit.jit(g))(x), jax.grad(g)(x))
    jax_close(jax.grad(jax.grad(refjit.jit(f)))(1.5), jax.grad(jax.grad(f))(1.5))
    jax_close(jax.jacrev(refjit.jit(lambda v: jnp.sin(v) * v[::-1]))(x),
                      jax.jacrev(lambda v: jnp.sin(v) * v[::-1])(x))
    jax_close(jax.jvp(refjit.jit(f), (x,), (x,)), jax.jvp(f, (x,), (x,)))
    text = str(jax.make_jaxpr(jax.grad(refjit.jit(g)))(x))
    assert "_primal" in text and "_linear_T" in text


def test_refjit_functions_inside_code_xla_compiles(x):
    jax_close(jax.jit(refjit.grad(g))(x), jax.grad(g)(x))

    def step(c, v):
        return c + refjit.jit(f)(v), None

    jax_close(lax.scan(step, np.float32(0), x)[0],
                      lax.scan(lambda c, v: (c + f(v), None), np.float32(0), x)[0])


def row_updating_scan(carry, xs):
    """The seed's pattern: a scan that rewrites one row of its carry per step."""
    def step(c, x):
        return c.at[0].set(c[0] * 0.9 + x), jnp.sum(c[0])
    return lax.scan(step, carry, xs)


def test_inside_jax_jit_refjit_code_is_xlas_custom_call():
    assert refjit._core.have_xla_ffi(), "the package was built without jaxlib's FFI headers"
    carry = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    xs = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    inner = refjit.jit(row_updating_scan)

    def outer(c, xs):
        last, sums = inner(c, xs)
        return jnp.sum(jnp.tanh(last)) + jnp.sum(sums ** 2)

    def outer_jax(c, xs):
        last, sums = row_updating_scan(c, xs)
        return jnp.sum(jnp.tanh(last)) + jnp.sum(sums ** 2)

    # XLA's program calls refjit's compiled code (no Python callback in between).
    hlo = jax.jit(outer).lower(carry, xs).as_text()
    assert "custom_call @refjit_call" in hlo and "callback" not in hlo
    jax_close(jax.jit(outer)(carry, xs), outer_jax(carry, xs), rtol=1e-5)
    # Its derivative is refjit's, called the same way.
    grad_hlo = jax.jit(jax.grad(outer)).lower(carry, xs).as_text()
    assert grad_hlo.count("custom_call @refjit_call") >= 2 and "callback" not in grad_hlo
    jax_close(jax.jit(jax.grad(outer, argnums=(0, 1)))(carry, xs),
              jax.grad(outer_jax, argnums=(0, 1))(carry, xs), rtol=1e-5)
    jax_close(jax.jit(jax.value_and_grad(outer))(carry, xs),
              jax.value_and_grad(outer_jax)(carry, xs), rtol=1e-5)
    # Batched by refjit's vmap, forward mode by its linearize, both inside jax.jit.
    batch = np.stack([carry, 2 * carry, -carry])
    jax_close(jax.jit(jax.vmap(outer, in_axes=(0, None)))(batch, xs),
              jax.vmap(outer_jax, in_axes=(0, None))(batch, xs), rtol=1e-5)
    jax_close(jax.jit(lambda c: jax.jvp(lambda c: outer(c, xs), (c,), (c,)))(carry),
              jax.jvp(lambda c: outer_jax(c, xs), (carry,), (carry,)), rtol=1e-5)


def test_custom_call_takes_every_dtype_and_empty_arrays():
    def mixed(b, i, h, e):
        return jnp.where(b, i, 0), h * 2, e + 1, jnp.sum(i) > 3

    args = (np.array([True, False, True]), np.array([1, 2, 3], np.int32),
            np.array([0.5, 1.5, -2.0], jnp.bfloat16), np.zeros((0, 2), np.float32))
    expected = jax.jit(mixed)(*args)
    actual = jax.jit(lambda *a: refjit.jit(mixed)(*a))(*args)
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))


def test_a_named_axis_of_an_enclosing_vmap_is_jaxs():
    # axis_index('i') belongs to the jax.vmap around the refjit function: refjit.jit inlines
    # the function there rather than compile an axis it cannot see; grad refuses, loudly.
    def fun(x):
        return jax.lax.while_loop(lambda v: v < jax.lax.axis_index("i"), lambda v: v + 2, x)

    xs = np.zeros(4, np.int32)
    expected = np.array([0, 2, 2, 4], np.int32)
    np.testing.assert_array_equal(jax.vmap(refjit.jit(fun), axis_name="i")(xs), expected)
    np.testing.assert_array_equal(
        jax.vmap(lambda _, x: refjit.jit(fun)(x), axis_name="i", in_axes=(0, None))(xs, 0),
        expected)
    with pytest.raises(refjit.TraceError, match="named axis 'i'"):
        jax.vmap(refjit.grad(lambda x: jnp.sum(x * jax.lax.axis_index("i"))),
                 axis_name="i")(np.ones(4, np.float32))


def test_jax_transposes_refjit_linearize_f_jvp():
    # linearize's f_jvp, staged into a JAX trace, is a linear call JAX can transpose
    # (jax.linear_transpose; JAX's lax_control_flow test_issue_29329 under vmap and cond).
    x = np.linspace(0.1, 1.0, 4).astype(np.float32)
    f = lambda x: jnp.sin(x) * x  # noqa: E731
    _, mine = refjit.linearize(f, x)
    _, theirs = jax.linearize(f, x)
    ct = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(jax.linear_transpose(mine, x)(ct)[0],
                               jax.linear_transpose(theirs, x)(ct)[0], rtol=1e-6)
    np.testing.assert_allclose(jax.jit(mine)(ct), theirs(ct), rtol=1e-6)

    def outer(linearize, x):
        _, lin = linearize(jnp.sin, x)
        return jax.lax.cond(x[0] > 0, lambda x: x + jax.linear_transpose(lin, x)(x)[0],
                            lambda x: x, x)

    xs = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(jax.vmap(lambda x: outer(refjit.linearize, x))(xs),
                               jax.vmap(lambda x: outer(jax.linearize, x))(xs), rtol=1e-6)


def add_twice_into(ref, x):
    """Writes its ref argument and returns a value."""
    ref[...] += 2.0 * x
    return jnp.sum(x * x)


def test_a_jax_ref_passed_to_a_refjit_function_inside_jax_jit():
    # JAX discharges the ref (it becomes a value in and a value out of the custom call): the
    # write lands in the caller's ref, and a call whose result nobody reads still runs.
    inner = refjit.jit(add_twice_into)
    x = np.arange(3, dtype=np.float32)

    def outer(x, use_result):
        ref = jax.new_ref(jnp.ones(3))
        total = inner(ref, x)
        total = total + inner(ref, x[::-1])
        return (ref[...], total) if use_result else ref[...]

    def outer_jax(x, use_result):
        ref = jax.new_ref(jnp.ones(3))
        total = add_twice_into(ref, x) + add_twice_into(ref, x[::-1])
        return (ref[...], total) if use_result else ref[...]

    for use_result in (True, False):
        jitted = jax.jit(outer, static_argnums=1)
        hlo = jitted.lower(x, use_result).as_text()
        assert hlo.count("custom_call @refjit_call") == 2
        jax_close(jitted(x, use_result), outer_jax(x, use_result))
    # A ref of the caller's, passed through a loop XLA compiles.
    def loop(x):
        ref = jax.new_ref(jnp.zeros(3))
        lax.fori_loop(0, 4, lambda i, c: c + inner(ref, x * i), 0.0)
        return ref[...]

    jax_close(jax.jit(loop)(x), 2.0 * x * (0 + 1 + 2 + 3))

    # Under jax.vmap (refjit's vmap of the program, the ref batched along dim 0), with and
    # without jax.jit around it.
    def per_example(x):
        ref = jax.new_ref(jnp.ones(3))
        total = inner(ref, x)
        return ref[...], total

    def per_example_jax(x):
        ref = jax.new_ref(jnp.ones(3))
        total = add_twice_into(ref, x)
        return ref[...], total

    xs = np.stack([x, x + 1, -x])
    expected = jax.vmap(per_example_jax)(xs)
    jax_close(jax.jit(jax.vmap(per_example))(xs), expected)
    assert_tree_close(jax.vmap(per_example)(xs)[0], expected[0], numpy_result=False)
    np.testing.assert_allclose(jax.vmap(per_example)(xs)[1], expected[1])


def test_jax_grad_through_a_refjit_function_taking_a_ref_is_refused_by_name():
    inner = refjit.jit(add_twice_into)

    def loss(x):
        ref = jax.new_ref(jnp.zeros(3))
        return inner(ref, x)

    with pytest.raises(refjit.Error, match="takes a jax.Ref"):
        jax.grad(loss)(np.arange(3, dtype=np.float32))
