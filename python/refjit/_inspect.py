"""refjit.make_jaxpr and refjit.compile: a JAX function as refjit reads it, and ahead of time
to an object file with a C header."""

from __future__ import annotations

import re
from typing import Callable

from . import _core
from ._common import _argnums_tuple, _flatten_call, _is_inexact, _leaf_ranges
from ._tracing import trace

class Jaxpr:
    """A function as refjit reads it: ``str()`` is refjit's jaxpr text (JAX's syntax);
    ``jax_text`` is what ``jax.make_jaxpr`` printed."""

    def __init__(self, text: str, jax_text: str, program):
        self.text = text
        self.jax_text = jax_text
        self._program = program

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    @property
    def in_types(self) -> list[str]:
        return [t[3] for t in self._program.input_types]

    @property
    def out_types(self) -> list[str]:
        return [t[3] for t in self._program.output_types]


def make_jaxpr(fun: Callable, *, stage: str | None = None):
    """``make_jaxpr(fun)(*args)``: the refjit program of ``fun`` at the arguments' types.
    ``stage`` names a pipeline pass (``refjit dump --help`` lists them, e.g. ``"buffers"``)
    to print the program after that pass instead."""

    def make(*args, **kwargs):
        leaves, arrays, key, in_tree = _flatten_call(fun, args, kwargs, "refjit.make_jaxpr")
        traced = trace(fun, leaves, arrays, in_tree)
        text = traced.program.text if stage is None else traced.program.emit(stage)
        return Jaxpr(text, traced.jax_text, traced.program)

    return make


_MODES = ("forward", "grad", "vjp", "jvp")


def compile(fun: Callable, *args, path: str, header: str | None = None,
            mode: str = "forward", name: str | None = None, argnums=0, cpu: str = "host",
            exact_math: bool = False) -> list[str]:
    """Compiles ``fun`` at the types of ``args`` ahead of time into the object file ``path``
    and a C header (``header``, default: ``path`` with ``.h``); docs/aot.md describes the C
    functions. ``mode``: ``"forward"``, ``"grad"`` (with respect to ``argnums``), ``"vjp"``
    (SYMBOL_fwd and SYMBOL_bwd) or ``"jvp"``. Returns the C symbols the object defines.

    The function's closed-over arrays become the entry points' leading parameters, as
    ``refjit compile`` does with a jaxpr's constvars."""
    if mode not in _MODES:
        raise ValueError(f"refjit.compile: mode must be one of {', '.join(_MODES)}, not "
                         f"{mode!r}")
    leaves, arrays, key, in_tree = _flatten_call(fun, args, {}, "refjit.compile")
    traced = trace(fun, leaves, arrays, in_tree)
    symbol = name or re.sub(r"\W", "_", traced.name)
    if symbol and symbol[0].isdigit():
        symbol = "_" + symbol
    wrt = []
    if mode == "grad":
        ranges = _leaf_ranges(args)
        for n in _argnums_tuple(argnums, len(args), "refjit.compile"):
            wrt.extend(k for k in ranges[n] if _is_inexact(arrays[k].dtype))
    if header is None:
        header = re.sub(r"\.o$", "", path) + ".h"
    symbols, _ = _core.compile_object(traced.program, symbol, path, header, mode, wrt, [],
                                      cpu, exact_math, f"refjit.compile({traced.name})")
    return list(symbols)
