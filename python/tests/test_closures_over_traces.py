"""refjit's grad, vjp and jvp called inside a JAX trace (a scan body, a vmap) on a function
that closes over that trace's values: the captured values become arguments of the compiled
program (refjit/_common.py hoist_closed_over_tracers) and the call is staged into the trace."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from conftest import assert_tree_close
from jax import lax

import refjit


def relax(grad, jvp, params):
    """Gradient descent in a scan whose energy closes over ``params`` (JAX's issue 711)."""
    def energy(x, p):
        return jnp.sum(jnp.sin(x) * p + x ** 2 * p ** 2)

    energy_of = partial(energy, p=params)

    def step(x, _):
        g = grad(energy_of)(x)
        _, slope = jvp(energy_of, (x,), (jnp.ones_like(x),))
        return x - 0.1 * g + 0.01 * slope, None

    x, _ = lax.scan(step, jnp.array([1.0, 2.0, 3.0]), None, length=20)
    return jnp.sum(jnp.cos(x))


def test_grad_and_jvp_in_a_scan_body_closing_over_the_outer_argument():
    mine = partial(relax, refjit.grad, refjit.jvp)
    theirs = partial(relax, jax.grad, jax.jvp)
    assert_tree_close(jax.jit(mine)(0.5), theirs(0.5), numpy_result=False, rtol=1e-5)
    # Differentiated from outside, by JAX and by refjit: second order through the staged call.
    assert_tree_close(jax.grad(mine)(0.25), jax.grad(theirs)(0.25), numpy_result=False,
                      rtol=1e-4)
    assert_tree_close(refjit.grad(mine)(0.25), jax.grad(theirs)(0.25), rtol=1e-4)


def microbatched_gradients(vjp, Ws, xs_batch):
    """Per-microbatch VJPs in a scan, added into one jax.Ref (JAX's mutable-array test)."""
    def loss(Ws, xs):
        act, _ = lax.scan(lambda a, W: (jnp.tanh(a @ W), None), xs, Ws)
        return jnp.mean(act)

    acc = jax.new_ref(jnp.zeros_like(Ws))

    def microbatch(_, xs):
        out, f_vjp = vjp(lambda Ws: loss(Ws, xs), Ws)
        f_vjp.with_refs(acc)(jnp.ones_like(out))
        return (), out

    lax.scan(microbatch, (), xs_batch.reshape(5, 7, *xs_batch.shape[1:]))
    return jax.ref.freeze(acc)


def test_vjp_accumulating_into_a_ref_inside_a_scan_body(rng):
    Ws = (rng.standard_normal((3, 4, 4)) * 0.5).astype(np.float32)
    xs = rng.standard_normal((35, 4)).astype(np.float32)
    mine = microbatched_gradients(refjit.vjp, Ws, xs)
    theirs = microbatched_gradients(jax.vjp, Ws, xs)
    assert_tree_close(mine, theirs, numpy_result=False, rtol=1e-4, atol=1e-6)


def test_vjp_with_refs_under_vmap():
    def grads_via_refs(vjp, x):
        acc = jax.new_ref(jnp.zeros_like(x))
        out, f_vjp = vjp(lambda x: jnp.sin(x) * 3.0, x)
        f_vjp.with_refs(acc)(jnp.ones_like(out))
        return jax.ref.freeze(acc)

    x = np.linspace(-1.0, 1.0, 4, dtype=np.float32)
    assert_tree_close(jax.vmap(partial(grads_via_refs, refjit.vjp))(x),
                      jax.vmap(partial(grads_via_refs, jax.vjp))(x), numpy_result=False)
