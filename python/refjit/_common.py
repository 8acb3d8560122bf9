"""What refjit's transformations share: the compile cache (per function, then per argument
types, as ``jax.jit``'s), backends, and the flattening of a call's arguments."""

from __future__ import annotations

import functools
import os
import weakref
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax import tree_util

from . import _axes, _core
from ._staging import Program, is_tracer
from ._tracing import (LeafError, RefViewArgument, function_name, leaf_names,
                       specialized_to_values, to_arrays)

_BACKENDS = ("native", "interpreter")

# ---- the compile cache ------------------------------------------------------------------

# function -> {key: compiled entry}. Weak, so that a function's programs go with it.
_cache: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()
_strong_cache: dict = {}  # for callables that cannot be weakly referenced


def _entries(fun: Callable) -> dict:
    try:
        return _cache.setdefault(fun, {})
    except TypeError:
        return _strong_cache.setdefault(fun, {})


def _cached(fun: Callable, key: tuple, build: Callable[[], Any]):
    """The compiled entry of ``fun`` for ``key``, built by ``build()`` on first use."""
    entries = _entries(fun)
    key = (key, _axes.cache_key())  # the axes' sizes are traced into the program
    entry = entries.get(key)
    if entry is None:
        # A program traced on the arguments' values (_specialize.py) is for this call only.
        token = specialized_to_values.set(False)
        try:
            entry = build()
            keep = not specialized_to_values.get()
        finally:
            specialized_to_values.reset(token)
        if keep:
            entries[key] = entry
    return entry


def primitives() -> list[str]:
    """The JAX primitives refjit reads, sorted by name: a function whose jaxpr uses only
    these can be compiled (docs/primitives.md and docs/ir.md say what each does). An error
    naming another primitive means refjit does not support it yet."""
    return list(_core.readable_primitives())


def set_compilation_cache_dir(path) -> None:
    """Where compiled machine code is kept on disk, for this and later processes (as JAX's
    ``jax_compilation_cache_dir``); ``None`` turns the cache off for this process. By default
    it is on, in ``$REFJIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/refjit``, else
    ``~/.cache/refjit``; ``REFJIT_CACHE=0`` turns it off, ``REFJIT_CACHE_MAX_MB`` bounds its
    size (1024). A hit skips LLVM, which is most of a compile (docs/backend.md)."""
    _core.set_compilation_cache_dir("" if path is None else os.fspath(path))


def compilation_cache_dir():
    """The on-disk cache's directory, or ``None`` when it is off."""
    return _core.compilation_cache_dir() or None


def compilation_cache_stats() -> dict:
    """This process's use of the on-disk cache: ``hits`` (compiles answered from disk),
    ``misses`` (compiles that ran LLVM) and ``errors`` (entries not written or not readable)."""
    hits, misses, errors = _core.compilation_cache_stats()
    return {"hits": hits, "misses": misses, "errors": errors}


def set_log_compiles(enabled: bool = True) -> None:
    """Print one line to stderr for each native compile (the program's types, its size, the
    time and whether the machine code came from the disk cache), as JAX's
    ``jax_log_compiles``; the same as ``REFJIT_LOG_COMPILES=1`` in the environment."""
    if enabled:
        os.environ["REFJIT_LOG_COMPILES"] = "1"
    else:
        os.environ.pop("REFJIT_LOG_COMPILES", None)


def clear_cache() -> None:
    """Drops every compiled program (they are compiled again on their next call)."""
    _cache.clear()
    _strong_cache.clear()


def _check_backend(backend: str) -> bool:
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be 'native' or 'interpreter', not {backend!r}")
    return backend == "interpreter"


def _executable(program, consts, interpret: bool, donated: Sequence[bool] = (),
                exact_math: bool = False, name: str = "f",
                exact_orders: float = float("inf")) -> Program:
    return Program(program, consts, interpret, donated, exact_math, name, exact_orders)


def exact_orders(traced, derivative: bool) -> float:
    """How many more times refjit may differentiate a program made from ``traced`` (itself,
    or with ``derivative`` its derivative) and still give JAX's derivatives; staged and
    differentiated beyond that, it refuses. A custom rule whose own custom calls were inlined
    limits it (_retrace._RULE_DEPTH_LIMIT)."""
    orders = traced.exact_orders
    return orders - 1 if derivative else orders


# ---- arguments ----------------------------------------------------------------------------


def _argnums_tuple(argnums, nargs: int, what: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for n in nums:
        if not isinstance(n, int) or not -nargs <= n < nargs:
            raise ValueError(f"{what}: argnums {argnums!r} names no argument of a call with "
                             f"{nargs} positional argument(s)")
    return tuple(n % nargs for n in nums)


def _flatten_call(fun: Callable, args: tuple, kwargs: dict, what: str,
                  ref_views_ok: bool = False):
    """(leaves, arrays, key, in_tree) for a call, with TypeErrors naming bad arguments. A
    view of a ref (``ref.at[1]``) raises RefViewArgument where the caller handles it
    (``ref_views_ok``: refjit.jit), a TypeError elsewhere."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    try:
        arrays, key = to_arrays(leaves)
    except LeafError as e:
        name = leaf_names(fun, args, kwargs)[e.index]
        raise TypeError(f"{what}({function_name(fun)}): {name} {e.reason}") from None
    except RefViewArgument as e:
        if ref_views_ok:
            raise
        name = leaf_names(fun, args, kwargs)[e.index]
        raise TypeError(f"{what}({function_name(fun)}): {name} is a view of a jax.Ref "
                        "(ref.at[...]); pass the ref itself, or call the function through "
                        "refjit.jit, which takes views") from None
    return leaves, arrays, key, in_tree


def _leaf_ranges(args: tuple) -> list[range]:
    """The flat leaf positions of each positional argument (kwargs come after them)."""
    ranges, start = [], 0
    for a in args:
        n = tree_util.tree_structure(a).num_leaves
        ranges.append(range(start, start + n))
        start += n
    return ranges


def _is_inexact(dtype) -> bool:
    """Whether values of ``dtype`` are differentiated: the floats and the complex dtypes.
    JAX's test, not NumPy's: ml_dtypes' bfloat16 is no subtype of np.floating for NumPy."""
    return jax.dtypes.issubdtype(dtype, np.inexact)


def _loss_and_aux(has_aux: bool, name: str):
    def split(out):
        if not has_aux:
            return (out, ())
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"{name}: with has_aux=True the function must return a pair "
                            f"(loss, aux), not {type(out).__name__}")
        return (out[0], out[1])
    return split


# ---- functions closing over an enclosing trace's values ------------------------------------


def hoist_closed_over_tracers(fun: Callable, args: tuple, kwargs: dict):
    """``(converted, hoisted)``: ``converted(*args, *hoisted, **kwargs)`` computes
    ``fun(*args, **kwargs)``, where ``hoisted`` are the values of an enclosing JAX trace that
    ``fun`` closes over (``jax.grad(energy)(x)`` in a scan body, where ``energy`` captures
    the outer function's parameter). refjit compiles ``converted`` with them as arguments and
    stages the call into that trace, which differentiates or batches it as any refjit call.
    None when ``fun`` closes over no such value (it uses a named axis instead)."""
    closed, out_shape = jax.make_jaxpr(fun, return_shape=True)(*args, **kwargs)
    hoisted = [c for c in closed.consts if is_tracer(c)]
    if not hoisted:
        return None
    out_tree = tree_util.tree_structure(out_shape)
    n_args = len(args)

    def converted(*args_then_hoisted, **call_kwargs):
        own, values = args_then_hoisted[:n_args], iter(args_then_hoisted[n_args:])
        consts = [next(values) if is_tracer(c) else c for c in closed.consts]
        flat = tree_util.tree_leaves((tuple(own), call_kwargs))
        return tree_util.tree_unflatten(out_tree,
                                        jax.core.eval_jaxpr(closed.jaxpr, consts, *flat))

    functools.update_wrapper(converted, fun, updated=())
    return converted, hoisted
