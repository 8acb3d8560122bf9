"""Data-parallel refjit across processes over MPI, written the way JAX users write it
(docs/distributed.md "From Python").

    # mpirun -n 2 .venv/bin/python train.py
    import jax, refjit, refjit.distributed as dist
    from jax import lax
    from jax.sharding import PartitionSpec as P

    dist.bind_axis("data")             # every process of the job; or an mpi4py communicator
    mesh = dist.mesh("data")           # a mesh whose 'data' axis has one member per process

    def loss(w, batch):                # runs on this process's block of the batch
        return lax.pmean(local_loss(w, batch), "data")

    step = refjit.grad(jax.shard_map(loss, mesh=mesh, in_specs=(P(), P("data")),
                                     out_specs=P()))
    g = step(w, whole_batch)           # the same gradient on every process, as JAX's on a mesh

A plain function may use ``lax.psum(x, "data")`` and the other collectives directly once
"data" is bound: refjit traces it with the axis's size, as ``jax.make_jaxpr(f,
axis_env=...)`` does, and each process passes its own values (pmap's view). Collectives over
an axis nobody bound run across every process once MPI runs (``init``, ``bind_axis``), as in
refjit's C++ API, and on this process alone (psum is the identity) without MPI.
"""

from __future__ import annotations

import atexit

import jax

from . import _axes, _core

__all__ = ["available", "axis_index", "axis_size", "bind_axis", "init", "mesh", "rank", "size",
           "unbind_axis"]


def available() -> bool:
    """Whether this build of refjit runs collectives over MPI (it was built with OpenMPI)."""
    return _core.mpi_available()


_started = False


def init() -> None:
    """Starts MPI for this process, unless it already runs (mpi4py starts it on import).
    ``bind_axis`` calls it; MPI is finalized at exit if refjit started it."""
    global _started
    if not _started:
        _core.mpi_start()
        atexit.register(_core.mpi_stop)
        _started = True


def rank() -> int:
    """This process's rank in the job (0 without MPI)."""
    return _core.world_rank_and_size()[0]


def size() -> int:
    """The number of processes in the job (1 without MPI)."""
    return _core.world_rank_and_size()[1]


def bind_axis(name: str, comm=None) -> None:
    """Collectives over the axis ``name`` (``lax.psum(x, name)``, a shard_map mesh axis of that
    name) run across the processes of ``comm``: an mpi4py communicator, or every process of
    the job when None. Every process of the communicator must call it, in the same order as
    their other collectives. refjit uses a duplicate of ``comm``, so its messages never mix
    with the caller's."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"bind_axis: the axis name must be a non-empty string, not {name!r}")
    py2f = None
    if comm is not None:
        py2f = getattr(comm, "py2f", None)
        if py2f is None:
            raise TypeError("bind_axis: comm must be an mpi4py communicator (with py2f()) or "
                            f"None, not {type(comm).__name__}")
    init()
    if py2f is None:
        _core.bind_axis(name)
    else:
        _core.bind_axis(name, int(py2f()))
    _axes.bound[name] = _core.axis_rank_and_size(name)[1]


def unbind_axis(name: str) -> None:
    """Forgets ``name``'s binding: collectives over it run across every process of the job
    again (this process alone without MPI)."""
    _core.unbind_axis(name)
    _axes.bound.pop(name, None)


def axis_size(name: str) -> int:
    """The number of processes the axis spans (every process of the job when nothing bound
    it and MPI runs, else 1)."""
    return _core.axis_rank_and_size(name)[1]


def axis_index(name: str) -> int:
    """This process's position along the axis."""
    return _core.axis_rank_and_size(name)[0]


def mesh(*names: str) -> jax.sharding.AbstractMesh:
    """A mesh for ``jax.shard_map`` whose axes are the bound axes ``names``, each as long as
    the number of processes it spans: refjit runs each member's block on its own process.
    (JAX itself cannot run a function on this mesh; refjit.jit and refjit.grad can.)"""
    if not names:
        raise TypeError("mesh: name at least one axis")
    unbound = [n for n in names if n not in _axes.bound]
    if unbound:
        raise ValueError(f"mesh: the axes {unbound} are not bound to processes; call "
                         "refjit.distributed.bind_axis first")
    auto = jax.sharding.AxisType.Auto
    return jax.sharding.AbstractMesh(tuple(_axes.bound[n] for n in names), names,
                                     axis_types=(auto,) * len(names))
