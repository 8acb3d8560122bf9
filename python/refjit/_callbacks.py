"""``jax.debug.print`` and ``jax.debug.callback`` in refjit programs.

JAX's eqns ``debug_print[fmt=...]`` and ``debug_callback[callback=<function>]`` hold a Python
function, which jaxpr text cannot. While a trace is printed for refjit, each such eqn prints
as refjit's ``debug_callback[callback=N]`` with its operands, N naming a host function kept
here: JAX's own implementation of the eqn with its params (so the text printed, and the
arguments a callback receives, are JAX's). refjit's compiled code and its interpreter call
the function through the handler registered with ``_core`` (python/src/host_calls.cpp),
with copies of the operands as NumPy arrays.

The numbers are per process: compiled code only carries N, so code cached on disk by another
process calls this process's function N, which belongs to the same program text.
"""

from __future__ import annotations

import functools
import itertools
import threading
from typing import Callable

from jax._src import core as jax_core
from jax._src import debugging
from jax.extend import core as jcore

from . import _core

_lock = threading.Lock()
_ids = itertools.count()
_functions: dict[int, Callable] = {}

_printed_as_debug_callback = jcore.Primitive("debug_callback")


def register(fun: Callable) -> int:
    """The number compiled code calls ``fun`` by."""
    with _lock:
        n = next(_ids)
        _functions[n] = fun
    return n


def _call(n: int, arrays: list) -> None:
    """Called by refjit (with the GIL held) when a ``debug_callback[callback=n]`` runs."""
    _functions[n](*arrays)


def _pp_rule(default_name: str):
    def pp(eqn, context, settings):
        from ._staging import printing_for_refjit_active

        if not printing_for_refjit_active():
            return jax_core._pp_eqn(eqn, context, settings)
        callback = eqn.params.get("callback")
        if getattr(callback, "refjit_direct", False):  # refjit's own (_retrace._trace_bwd)
            host = callback
        else:
            host = functools.partial(eqn.primitive.impl, **eqn.params)
        shown = eqn.replace(primitive=_printed_as_debug_callback,
                            params={"callback": register(host)})
        return jax_core._pp_eqn(shown, context, settings, params=["callback"])

    pp.__name__ = f"_pp_{default_name}"
    return pp


def _register() -> None:
    jax_core.pp_eqn_rules[debugging.debug_callback_p] = _pp_rule("debug_callback")
    jax_core.pp_eqn_rules[debugging.debug_print_p] = _pp_rule("debug_print")
    _core.set_host_callback_handler(_call)


_register()
