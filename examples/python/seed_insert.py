"""The seed "grad-scan-slice-update-slow" (../shared/seeds/), its JAX code as the seed writes it,
differentiated by refjit instead of JAX.

    .venv/bin/python examples/python/seed_insert.py

prints, for the five insert modes, the loss's gradient at w = 2 from refjit.grad and from
jax.grad (0.00051642 in the seed), and the time of one gradient call of each. In JAX the
gradient copies the scan's whole carry every step; refjit's updates it in place.
"""

import timeit
from functools import partial

import jax
import numpy as np
from jax import lax
from jax import numpy as jnp

import refjit

N_STEPS = 1_000
N_ROWS, N_COLS = 100, 500


# ---- the seed's code, unchanged ----------------------------------------------------------

@partial(jax.jit, static_argnames="mode", donate_argnames="state")
def insert_fn(state, row, col, value, mode):
    if mode == "slice1":
        update = jnp.concatenate([jnp.array([[value]]), lax.dynamic_slice(state, start_indices=(row, col), slice_sizes=(1, N_COLS))], axis=-1)
        return lax.dynamic_update_slice(state, update=update, start_indices=(row, col))
    if mode == "slice2":
        update = lax.dynamic_slice(state, start_indices=(row, col), slice_sizes=(1, N_COLS))
        state = lax.dynamic_update_slice(state, update=update, start_indices=(row, col + 1))
        return state.at[row, col].set(value)
    elif mode == "scatter":
        indices = col + np.arange(N_COLS + 1, dtype=np.int32)
        values = jnp.r_[value, lax.dynamic_slice(state, start_indices=(row, col), slice_sizes=(1, N_COLS)).ravel()]
        return state.at[row, indices].set(values, indices_are_sorted=True, unique_indices=True)
    elif mode == "combo1":
        update = lax.dynamic_slice(state, start_indices=(row, col), slice_sizes=(1, N_COLS))
        state = lax.dynamic_update_slice(state, update=update, start_indices=(row, col + 1))
        indices = col + np.arange(1, dtype=np.int32)
        values = jnp.array([value])
        return state.at[row, indices].set(values, indices_are_sorted=True, unique_indices=True)
    elif mode == "combo2":
        update = lax.dynamic_slice(state, start_indices=(row, col + 1), slice_sizes=(1, N_COLS - 1))
        state = lax.dynamic_update_slice(state, update=update, start_indices=(row, col + 2))
        indices = col + np.arange(2, dtype=np.int32)
        values = jnp.array([value, state[row, col]])
        return state.at[row, indices].set(values, indices_are_sorted=True, unique_indices=True)
    else:
        raise ValueError(f"unknown {mode=}")


@partial(jax.jit, donate_argnames="state")
def delete_fn(state, row, col):
    update = lax.dynamic_slice(state, start_indices=(row, col + 1), slice_sizes=(1, N_COLS))
    return lax.dynamic_update_slice(state, update=update, start_indices=(row, col))


@partial(jax.jit, static_argnames="mode", donate_argnames="state")
def update_fn(state, inputs, mode):
    (insert_row, delete_row), (insert_col, delete_col), value = inputs
    state = insert_fn(state, insert_row, insert_col, value, mode)
    state = delete_fn(state, delete_row, delete_col)
    return state, None


@partial(jax.jit, static_argnames="mode")
def loss_fn(w, mode, init_state, target_state, row_indices, col_indices, insert_values):
    state, _ = lax.scan(partial(update_fn, mode=mode), init_state, (row_indices, col_indices, insert_values**w))
    return ((target_state - state[:N_ROWS, :N_COLS]) ** 2).mean()


# ---- the seed's inputs -------------------------------------------------------------------

MODES = "slice1", "slice2", "scatter", "combo1", "combo2"


def loss_fns(n_row_repeats):
    """The seed's loss for each mode, its inputs bound as the seed binds them."""
    np.random.seed(42)
    init_state = jnp.zeros(shape=(N_ROWS * n_row_repeats, N_COLS * 2), dtype=jnp.float32)
    loss_kwargs = dict(
        target_state=jnp.asarray(np.random.random(size=(N_ROWS, N_COLS)).astype(np.float32)),
        row_indices=jnp.asarray(np.random.randint(low=0, high=N_ROWS, size=(N_STEPS, 2), dtype=np.int32)),
        col_indices=jnp.asarray(np.random.randint(low=0, high=N_COLS, size=(N_STEPS, 2), dtype=np.int32)),
        insert_values=jnp.asarray(np.random.random(size=N_STEPS).astype(np.float32)),
    )
    return {k: partial(loss_fn, mode=k, init_state=init_state.copy(), **loss_kwargs) for k in MODES}


def main():
    w = np.float32(2)
    for k, f in loss_fns(n_row_repeats=1).items():
        g_refjit = refjit.grad(f)
        g_jax = jax.jit(jax.grad(f))
        ours, theirs = g_refjit(w), g_jax(w)
        n = 10
        t_refjit = timeit.timeit(lambda: g_refjit(w), number=n) / n
        t_jax = timeit.timeit(lambda: g_jax(w).block_until_ready(), number=n) / n
        print(f"{k:8s} refjit.grad {float(ours):.8f} in {1e3 * t_refjit:7.3f} ms   "
              f"jax.grad {float(theirs):.8f} in {1e3 * t_jax:7.3f} ms")


if __name__ == "__main__":
    main()
