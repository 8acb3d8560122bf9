"""The seed inside an ordinary JAX training step: a flax model and an optax optimiser under
jax.jit, whose loss calls refjit.jit for the one part refjit does better, the seed's scan that
rewrites rows of its carry (../shared/seeds/; examples/python/seed_insert.py).

    .venv/bin/python examples/python/flax_step_with_refjit.py [--steps 20]

A small MLP turns each step's features into the value the seed's scan inserts; the scan's final
state is compared to a target. The train step is written once and run twice: with the scan
as JAX's own and with it wrapped in refjit.jit. Inside jax.jit the refjit function is XLA's
custom call into refjit's code, and under jax.grad its derivative is refjit's, which updates
the carry in place where JAX copies it every step. Prints both runs' losses, the largest
parameter difference after the last step, and the median step time of each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from functools import partial

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

sys.path.insert(0, os.path.dirname(__file__))
import seed_insert  # noqa: E402

import refjit  # noqa: E402


class ValueModel(nn.Module):
    """Features of each step -> the value the scan inserts at that step."""

    @nn.compact
    def __call__(self, features):
        h = nn.tanh(nn.Dense(32)(features))
        return nn.sigmoid(nn.Dense(1)(h))[:, 0]


def final_state(init_state, rows, cols, values):
    """The seed's scan (its update_fn, mode slice1): the state after every insert and delete."""
    state, _ = lax.scan(partial(seed_insert.update_fn, mode="slice1"), init_state,
                        (rows, cols, values))
    return state


def make_train_step(model, optimizer, scan):
    def loss_fn(params, batch):
        values = model.apply(params, batch["features"])
        state = scan(batch["init_state"], batch["rows"], batch["cols"], values)
        n_rows, n_cols = batch["target"].shape
        return jnp.mean((batch["target"] - state[:n_rows, :n_cols]) ** 2)

    @jax.jit
    def train_step(params, opt_state, batch):
        loss, grads = jax.value_and_grad(loss_fn)(params, batch)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return train_step


def make_batch(seed: int = 42) -> dict:
    rng = np.random.default_rng(seed)
    n_steps, n_rows, n_cols = seed_insert.N_STEPS, seed_insert.N_ROWS, seed_insert.N_COLS
    return {
        "features": rng.standard_normal((n_steps, 8)).astype(np.float32),
        "init_state": np.zeros((n_rows, 2 * n_cols), np.float32),
        "target": rng.random((n_rows, n_cols)).astype(np.float32),
        "rows": rng.integers(0, n_rows, (n_steps, 2)).astype(np.int32),
        "cols": rng.integers(0, n_cols, (n_steps, 2)).astype(np.int32),
    }


def train(scan, steps: int, batch: dict):
    """(final params, losses, step times in ms) of `steps` adam steps from the same start."""
    model = ValueModel()
    params = model.init(jax.random.key(0), batch["features"])
    optimizer = optax.adam(1e-2)
    opt_state = optimizer.init(params)
    step = make_train_step(model, optimizer, scan)
    losses, times = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        params, opt_state, loss = step(params, opt_state, batch)
        loss = float(loss)  # waits for the step
        times.append(1e3 * (time.perf_counter() - t0))
        losses.append(loss)
    return params, losses, times


def run(steps: int) -> dict:
    batch = make_batch()
    jax_params, jax_losses, jax_times = train(final_state, steps, batch)
    ref_params, ref_losses, ref_times = train(refjit.jit(final_state), steps, batch)
    diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
               for a, b in zip(jax.tree_util.tree_leaves(jax_params),
                               jax.tree_util.tree_leaves(ref_params)))
    return {"jax_losses": jax_losses, "refjit_losses": ref_losses, "max_param_diff": diff,
            # The first step compiles; the median of the others is the step's cost.
            "jax_step_ms": float(np.median(jax_times[1:])) if steps > 1 else jax_times[0],
            "refjit_step_ms": float(np.median(ref_times[1:])) if steps > 1 else ref_times[0]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    r = run(args.steps)
    print(f"loss, JAX's scan:    {r['jax_losses'][0]:.6f} -> {r['jax_losses'][-1]:.6f}")
    print(f"loss, refjit's scan: {r['refjit_losses'][0]:.6f} -> {r['refjit_losses'][-1]:.6f}")
    print(f"largest parameter difference after {args.steps} steps: {r['max_param_diff']:.2e}")
    print(f"median step: JAX {r['jax_step_ms']:.2f} ms, with refjit's scan "
          f"{r['refjit_step_ms']:.2f} ms ({r['jax_step_ms'] / r['refjit_step_ms']:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
