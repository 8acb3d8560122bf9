"""refjit.distributed and shard_map in one process (docs/distributed.md "From Python"). The
same programs across processes, under mpirun: python/tests/mpi/shard_map_checks.py, run by
scripts/test.sh on 1 and 2 processes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import AbstractMesh, AxisType
from jax.sharding import PartitionSpec as P

import refjit
import refjit.distributed as dist
from conftest import assert_tree_close


def one_member_mesh():
    return jax.make_mesh((1,), ("data",), axis_types=(AxisType.Auto,))


def sharded_loss(mesh):
    def body(w, x):
        y = jnp.tanh(x @ w)
        return lax.pmean(jnp.sum(y * y), "data"), y

    mapped = jax.shard_map(body, mesh=mesh, in_specs=(P(), P("data")),
                           out_specs=(P(), P("data")))

    def loss(w, x):
        total, y = mapped(w, x)
        return total + jnp.sum(jnp.sin(y))

    return loss


W = np.linspace(-0.5, 0.5, 6, dtype=np.float32).reshape(3, 2)
X = np.linspace(-1.0, 1.0, 24, dtype=np.float32).reshape(8, 3)


def test_shard_map_with_collectives_on_a_one_member_mesh_is_jaxs():
    # JAX prints the body's types with {V:data} and marks its collectives pvary and
    # psum_invariant: refjit reads both, and its gradient is JAX's.
    loss = sharded_loss(one_member_mesh())
    assert "psum_invariant" in str(jax.make_jaxpr(loss)(W, X))
    assert_tree_close(refjit.jit(loss)(W, X), loss(W, X))
    assert_tree_close(refjit.grad(loss, argnums=(0, 1))(W, X),
                      jax.grad(loss, argnums=(0, 1))(W, X))


def test_a_mesh_of_two_members_needs_two_processes():
    # Traced for 2 members, run where 'data' spans this process alone: refused by name, not
    # run with half the data.
    loss = sharded_loss(AbstractMesh((2,), ("data",), axis_types=(AxisType.Auto,)))
    with pytest.raises(refjit.Error, match="over 'data': the program was traced for 2 "
                                           "processes but the axis is bound to this process "
                                           "alone"):
        refjit.jit(loss)(W, X)
    with pytest.raises(refjit.Error, match="traced for 2 processes"):
        refjit.grad(loss)(W, X)


def test_a_mesh_that_splits_and_communicates_nothing_needs_no_processes():
    # Nothing split and nothing communicated: every member computes the same, so a mesh of
    # two runs on one process, as JAX's does on two devices.
    mesh = AbstractMesh((2,), ("data",), axis_types=(AxisType.Auto,))
    mapped = jax.shard_map(lambda a: jnp.sin(a) * 2, mesh=mesh, in_specs=P(), out_specs=P())
    np.testing.assert_allclose(refjit.jit(mapped)(X), np.sin(X) * 2, rtol=1e-6)


def test_check_vma_false_on_a_split_mesh_is_refused():
    mesh = AbstractMesh((2,), ("data",), axis_types=(AxisType.Auto,))
    mapped = jax.shard_map(lambda x: lax.psum(x, "data"), mesh=mesh, in_specs=P("data"),
                           out_specs=P(), check_vma=False)
    with pytest.raises(refjit.Error, match="check_vma=False on a mesh of several members"):
        refjit.jit(mapped)(X)


def test_axes_nobody_bound():
    assert dist.axis_size("data") == 1 and dist.axis_index("data") == 0
    with pytest.raises(ValueError, match=r"the axes \['data'\] are not bound"):
        dist.mesh("data")
    # A plain function naming an axis nobody bound: JAX cannot trace it, and refjit says so.
    with pytest.raises(NameError):
        refjit.jit(lambda x: lax.psum(x, "data"))(X)
    with pytest.raises(TypeError, match="non-empty string"):
        dist.bind_axis("")
    with pytest.raises(TypeError, match="mpi4py communicator"):
        dist.bind_axis("data", comm=object())
