"""The seed's second program (grad-scan-slice-update-slow, the inserts with custom_vjp rules),
its JAX code as the seed writes it, differentiated by refjit.

    .venv/bin/python examples/python/seed_custom_vjp.py

refjit applies the Python fwd/bwd rules as JAX does, so it reproduces the seed's findings:
the true gradient 0.00052476, bad_insert's wrong 0.0017259 (its rule is wrong), slow_insert
and fast_insert correct; it prints the time of one gradient call next to JAX's.
"""

import timeit

from functools import partial

import jax
import numpy as np

import refjit

from jax import lax
from jax import numpy as jnp

N_STEPS = 1_000
N_ROWS, N_COLS = 100, 500

def simple_insert(carry, inputs):
    row, col, value = inputs
    update = jnp.concatenate([jnp.array([[value]]), lax.dynamic_slice(carry, start_indices=(row, col), slice_sizes=(1, N_COLS))], axis=-1)
    return lax.dynamic_update_slice(carry, update=update, start_indices=(row, col))

@jax.custom_vjp
def bad_insert(carry, inputs):
    return simple_insert(carry, inputs)

def _bad_insert_fwd(carry, inputs):
    row, col, _ = inputs
    return bad_insert(carry, inputs), (row, col)

def _bad_insert_bwd(residuals, ct_out):
    row, col = residuals
    return ct_out, (0, 0, ct_out[row, col])  # Using 0 because None throws "ValueError: safe_zip() argument 2 is shorter than argument 1" in _flatten_bwd

@jax.custom_vjp
def slow_insert(carry, inputs):
    return simple_insert(carry, inputs)

def _slow_insert_fwd(carry, inputs):
    row, col, _ = inputs
    return slow_insert(carry, inputs), (row, col)

def _slow_insert_bwd(residuals, ct_out):
    row, col = residuals
    ct_value = ct_out[row, col].copy()
    update = lax.dynamic_slice(ct_out, start_indices=(row, col + 1), slice_sizes=(1, N_COLS))
    ct_out = lax.dynamic_update_slice(ct_out, update=update, start_indices=(row, col))
    ct_out = ct_out.at[row, col + N_COLS].set(0.0)
    return ct_out, (0, 0, ct_value)

@jax.custom_vjp
def fast_insert(carry, inputs):
    return simple_insert(carry, inputs)

def _fast_insert_fwd(carry, inputs):
    row, col, _ = inputs
    return fast_insert(carry, inputs), (row, col)

def _fast_insert_bwd(residuals, ct_out):
    row, col = residuals
    ct_out = ct_out.at[row, -1].set(ct_out[row, col])
    update = lax.dynamic_slice(ct_out, start_indices=(row, col + 1), slice_sizes=(1, N_COLS))
    ct_out = lax.dynamic_update_slice(ct_out, update=update, start_indices=(row, col))
    ct_out = ct_out.at[row, col + N_COLS].set(0.0)
    return ct_out, (0, 0, ct_out[row, -1])

bad_insert.defvjp(_bad_insert_fwd, _bad_insert_bwd)
slow_insert.defvjp(_slow_insert_fwd, _slow_insert_bwd)
fast_insert.defvjp(_fast_insert_fwd, _fast_insert_bwd)

@partial(jax.jit, static_argnames="fn")
def wrap(fn, *args):
    return fn(*args), None

@partial(jax.jit, static_argnames="fn")
def loss(w, fn, init_state, target_state, rows, cols, values):
    state, _ = lax.scan(partial(wrap, fn), init_state, (rows, cols, values**w))
    return ((target_state - state[:, :N_COLS]) ** 2).mean()


def loss_fns():
    """The seed's loss for each insert, its inputs bound as the seed binds them."""
    np.random.seed(42)
    init_state = jnp.zeros(shape=(N_ROWS, N_COLS * 2 + 1), dtype=jnp.float32)
    loss_kwargs = dict(
        target_state=jnp.asarray(np.random.random(size=(N_ROWS, N_COLS)).astype(np.float32)),
        rows=jnp.asarray(np.random.randint(low=0, high=N_ROWS, size=N_STEPS, dtype=np.int32)),
        cols=jnp.asarray(np.random.randint(low=0, high=N_COLS, size=N_STEPS, dtype=np.int32)),
        values=jnp.asarray(np.random.random(size=N_STEPS).astype(np.float32)),
    )
    fns = simple_insert, bad_insert, slow_insert, fast_insert
    return {fn.__name__: partial(loss, fn=fn, init_state=init_state.copy(), **loss_kwargs)
            for fn in fns}


def main():
    w = np.float32(2)
    n = 10
    for name, f in loss_fns().items():
        g_refjit, g_jax = refjit.grad(f), jax.jit(jax.grad(f))
        ours, theirs = g_refjit(w), g_jax(w)
        t_refjit = timeit.timeit(lambda: g_refjit(w), number=n) / n
        t_jax = timeit.timeit(lambda: g_jax(w).block_until_ready(), number=n) / n
        print(f"{name:14s} refjit.grad {float(ours):.8f} in {1e3 * t_refjit:7.3f} ms   "
              f"jax.grad {float(theirs):.8f} in {1e3 * t_jax:7.3f} ms")


if __name__ == "__main__":
    main()
