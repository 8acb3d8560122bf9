"""Data-parallel training of a JAX MLP with refjit, one process per shard of each batch.

    mpirun -n 2 .venv/bin/python examples/python/data_parallel.py

Every process holds the whole (seeded) data set. jax.shard_map splits each batch over the mesh
axis "batch", whose members refjit.distributed binds to the MPI processes: each process
computes its block's gradients, lax.psum sums them over the processes, and every process takes
the same SGD step. The run ends by training the same model with plain JAX on whole batches in
this process and comparing; the last line, `checksum` and the sums of the trained parameters,
does not depend on the number of processes (up to float rounding). scripts/test.sh runs 1 and
2 processes and compares their checksums (docs/distributed.md "From Python").

With `--checkpoint FILE --every N`, process 0 writes the parameters to FILE after every N
steps, and a run that finds FILE resumes after the step it holds: a job stopped because a
process left (docs/distributed.md "When a process leaves") is restarted with the same command.
`--leave-at STEP` makes process 1 leave the job before that step (for the tests).
"""

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

import refjit
import refjit.distributed as dist

BATCH = 256
STEPS = 32
LEARNING_RATE = 0.05


def init_params(key, sizes=(16, 64, 64, 1)):
    keys = jax.random.split(key, len(sizes) - 1)
    return [{"w": jax.random.normal(k, (m, n)) / np.sqrt(m), "b": jnp.zeros(n)}
            for k, m, n in zip(keys, sizes[:-1], sizes[1:])]


def predict(params, x):
    for layer in params[:-1]:
        x = jnp.tanh(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss_share(params, x, y):
    """This block's share of the whole batch's mean squared error."""
    return jnp.sum((predict(params, x) - y) ** 2) / BATCH


def sharded_step(mesh):
    def block_grads(params, x, y):
        # The parameters are the same on every member; made varying, each member's gradient
        # is its own block's, and psum adds them (DDP's allreduce).
        params = jax.tree.map(lambda p: lax.pcast(p, "batch", to="varying"), params)
        loss, grads = jax.value_and_grad(loss_share)(params, x, y)
        return lax.psum(loss, "batch"), lax.psum(grads, "batch")

    grads_of_batch = jax.shard_map(block_grads, mesh=mesh,
                                   in_specs=(P(), P("batch"), P("batch")), out_specs=(P(), P()))

    def step(params, x, y):
        loss, grads = grads_of_batch(params, x, y)
        return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads), loss

    return step


def whole_batch_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_share)(params, x, y)
    return jax.tree.map(lambda p, g: p - LEARNING_RATE * g, params, grads), loss


def data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4 * BATCH, 16)).astype(np.float32)
    v = rng.standard_normal((16, 1)).astype(np.float32)
    y = np.sin(x @ v) + 0.1 * rng.standard_normal((4 * BATCH, 1)).astype(np.float32)
    return x, y


def train(step, params, x, y, say=lambda *a: None, first=1, after_step=lambda k, p: None):
    """Steps first..STEPS; step k trains on batch (k - 1) % 4."""
    times = []
    for k in range(first, STEPS + 1):
        start = ((k - 1) % 4) * BATCH
        t0 = time.perf_counter()
        params, loss = step(params, x[start:start + BATCH], y[start:start + BATCH])
        times.append(time.perf_counter() - t0)
        if k in (1, STEPS) or k % 8 == 0:
            say(f"step {k:3d}  loss {float(loss):.6f}")
        after_step(k, params)
    return params, float(np.mean(times[len(times) // 2:]))


def save_checkpoint(path, step, params):
    """Written whole or not at all: a job stopped mid-write keeps the previous checkpoint."""
    leaves = {f"leaf{i}": np.asarray(p) for i, p in enumerate(jax.tree.leaves(params))}
    partial = path + ".partial.npz"
    np.savez(partial, step=step, **leaves)
    os.replace(partial, path)


def load_checkpoint(path, like):
    with np.load(path) as saved:
        leaves = [saved[f"leaf{i}"] for i in range(len(jax.tree.leaves(like)))]
        return int(saved["step"]), jax.tree.unflatten(jax.tree.structure(like), leaves)


def main():
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--checkpoint", help="parameters file, written by process 0")
    options.add_argument("--every", type=int, default=8, help="steps between checkpoints")
    options.add_argument("--leave-at", type=int, help="process 1 leaves before this step")
    args = options.parse_args()
    dist.bind_axis("batch")  # every process of the job
    n, rank = dist.size(), dist.rank()
    say = print if rank == 0 else (lambda *a: None)
    if BATCH % n:
        raise SystemExit(f"data_parallel.py: {n} processes do not divide a batch of {BATCH}")
    say(f"{n} process(es), {BATCH // n} examples each per step")
    x, y = data()
    initial = init_params(jax.random.key(0))
    params, first = initial, 1
    if args.checkpoint and os.path.exists(args.checkpoint):
        done, params = load_checkpoint(args.checkpoint, initial)
        first = done + 1
        say(f"resuming after step {done} ({args.checkpoint})")

    def after_step(k, params):
        if args.checkpoint and rank == 0 and k % args.every == 0:
            save_checkpoint(args.checkpoint, k, params)
        if args.leave_at is not None and k + 1 == args.leave_at and rank == 1:
            sys.exit(0)  # as a process whose program ends: the others must not wait for it

    trained, step_seconds = train(refjit.jit(sharded_step(dist.mesh("batch"))), params, x, y,
                                  say, first, after_step)
    say(f"refjit step: {step_seconds * 1e3:.3f} ms (mean of the later half of the steps)")
    expected, _ = train(jax.jit(whole_batch_step), initial, x, y)
    for got, want in zip(jax.tree.leaves(trained), jax.tree.leaves(expected)):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5,
                                   err_msg=f"rank {rank}: refjit on {n} processes vs JAX")
    say("JAX on whole batches, in one process, agrees")
    sums = " ".join(f"{float(jnp.sum(p)):.6f}" for p in jax.tree.leaves(trained))
    say(f"checksum {sums}")


if __name__ == "__main__":
    main()
