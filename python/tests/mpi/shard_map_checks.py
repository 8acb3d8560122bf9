"""refjit.distributed across processes: run under mpirun by scripts/test.sh,
    mpirun -n 1 .venv/bin/python python/tests/mpi/shard_map_checks.py
    mpirun -n 2 .venv/bin/python python/tests/mpi/shard_map_checks.py
Every check compares with JAX on the whole batch in this process (what a mesh of devices
computes), and every process must end with the same bits. A failed check raises, and mpirun
then exits non-zero."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P
from mpi4py import MPI

import refjit
import refjit.distributed as dist

world = MPI.COMM_WORLD
dist.bind_axis("data")  # every process of the job
mesh = dist.mesh("data")
n, rank = dist.size(), dist.rank()
assert (n, rank) == (world.Get_size(), world.Get_rank())
assert dist.axis_size("data") == n and dist.axis_index("data") == rank

rng = np.random.default_rng(0)
W = rng.standard_normal((3, 2)).astype(np.float32) * 0.5
X = rng.standard_normal((8 * n, 3)).astype(np.float32)


def close(actual, expected, what, rtol=2e-5, atol=2e-6):
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=rtol, atol=atol,
                                   err_msg=f"{what} on {n} processes, rank {rank}")


def same_everywhere(value, what):
    """Every process holds the same bits."""
    mine = np.concatenate([np.asarray(v).ravel() for v in jax.tree.leaves(value)])
    for r, theirs in enumerate(world.allgather(mine)):
        assert np.array_equal(mine, theirs), f"{what}: rank {rank} and rank {r} differ"


# 1. A split batch, a pmean, a split result: values and both gradients are JAX's on the whole
#    batch (x's gradient is every member's block, gathered).
def body(w, x):
    y = jnp.tanh(x @ w)
    return lax.pmean(jnp.sum(y * y), "data"), y


sharded = jax.shard_map(body, mesh=mesh, in_specs=(P(), P("data")), out_specs=(P(), P("data")))


def loss(w, x):
    total, y = sharded(w, x)
    return total + jnp.sum(jnp.sin(y))


def whole_batch_loss(w, x):
    y = jnp.tanh(x @ w)
    per_block = jnp.sum((y * y).reshape(n, -1), axis=1)
    return jnp.mean(per_block) + jnp.sum(jnp.sin(y))


close(refjit.jit(loss)(W, X), whole_batch_loss(W, X), "loss")
g = refjit.grad(loss, argnums=(0, 1))(W, X)
close(g, jax.grad(whole_batch_loss, argnums=(0, 1))(W, X), "grad")
same_everywhere(g, "grad")


# 2. Data-parallel training as users write it: each member's gradient, then the mean of the
#    gradients over the members (DDP's allreduce), in one jitted step. The parameters are made
#    varying first (lax.pcast, printed as pvary), so each member's gradient is its own.
def local_loss(w, x):
    return jnp.mean(jnp.tanh(x @ w) ** 2)


def ddp_grads(w, x):
    value, grads = jax.value_and_grad(local_loss)(lax.pcast(w, "data", to="varying"), x)
    return lax.pmean(value, "data"), lax.pmean(grads, "data")


step = refjit.jit(jax.shard_map(ddp_grads, mesh=mesh, in_specs=(P(), P("data")),
                                out_specs=(P(), P())))
value, grads = step(W, X)
close(value, local_loss(W, X), "ddp loss")
close(grads, jax.grad(local_loss)(W, X), "ddp grads")
same_everywhere(grads, "ddp grads")


# Without the pcast, JAX's check_vma rules already sum the members' gradients of the shared
# parameters (pvary's transpose), so the pmean of them is n times the mean gradient: what
# JAX computes on a mesh of n devices (checked against JAX on 2 host devices), refjit too.
def implicit_grads(w, x):
    return lax.pmean(jax.grad(local_loss)(w, x), "data")


implicit = refjit.jit(jax.shard_map(implicit_grads, mesh=mesh, in_specs=(P(), P("data")),
                                    out_specs=P()))
close(implicit(W, X), n * jax.grad(local_loss)(W, X), "implicitly summed grads")


# 3. A plain function over the bound axis (pmap's view: each process its own values): JAX
#    traces it with the axis's size, as make_jaxpr(f, axis_env=...) does.
def plain(v):
    mine = v * (lax.axis_index("data") + 1).astype(v.dtype)
    gathered = lax.all_gather(mine, "data")
    return lax.psum(mine, "data"), lax.pmean(mine, "data"), gathered


v = np.arange(3, dtype=np.float32) + 1
total, mean, gathered = refjit.jit(plain)(v)
close(total, v * n * (n + 1) / 2, "psum")
close(mean, v * (n + 1) / 2, "pmean")
close(gathered, np.stack([v * (r + 1) for r in range(n)]), "all_gather")
# psum's transpose is psum: each process's gradient of the sum of every process's outputs.
close(refjit.grad(lambda v: jnp.sum(plain(v)[0]))(v), np.full(3, n * (rank + 1), np.float32),
      "grad through psum")

# 4. Axes bound to mpi4py communicators: a duplicate of the world, and each process alone.
dist.bind_axis("pair", world)
dist.bind_axis("solo", MPI.COMM_SELF)
assert dist.axis_size("pair") == n and dist.axis_size("solo") == 1
both = refjit.jit(lambda x: (lax.psum(x, "pair"), lax.psum(x, "solo")))(np.float32(rank + 1))
close(both, (n * (n + 1) / 2, rank + 1), "psum over mpi4py communicators")
dist.unbind_axis("solo")  # an unbound axis spans every process while MPI runs
assert dist.axis_size("solo") == n

world.Barrier()
if rank == 0:
    print(f"shard_map checks passed on {n} process(es)")
