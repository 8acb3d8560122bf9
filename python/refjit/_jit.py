"""refjit.jit: a JAX function compiled by refjit, once per argument types."""

from __future__ import annotations

import functools
import time
from typing import Callable

import jax
import numpy as np
from jax import tree_util

from . import _axes
from ._array import NUMPY_ARRAYS
from ._common import _check_backend, _executable, _flatten_call, _leaf_ranges, exact_orders
from ._staging import inside_jax_trace, is_tracer
from ._tracing import (ClosesOverTracerError, RefViewArgument, check_distinct_refs,
                       function_name, is_ref, trace, write_back_refs, x64_enabled)

class _Jitted:
    """What ``refjit.jit`` returns: call it like the function."""

    def __init__(self, fun, donate_argnums, static_argnums, backend, exact_math):
        self._fun = fun
        self._donate = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(
            donate_argnums)
        self._static = (static_argnums,) if isinstance(static_argnums, int) else tuple(
            static_argnums)
        self._interpret = _check_backend(backend)
        self._exact_math = exact_math
        self._entries: dict = {}
        self._fast_entries: dict = {}  # _fast_key -> entry (see _remember_fast)
        self._tracing = False
        # updated=(): fun's __dict__ would overwrite these fields when fun is itself a
        # refjit function (refjit.grad(refjit.grad(f))).
        functools.update_wrapper(self, fun, updated=())

    def _split_static(self, args):
        if not self._static:
            return self._fun, args, ()
        static = tuple(n % len(args) for n in self._static)
        values = tuple(args[n] for n in static)
        try:
            hash(values)
        except TypeError:
            raise TypeError(f"refjit.jit({function_name(self._fun)}): static arguments must be "
                            "hashable (they key the compile cache)") from None
        dynamic = tuple(a for k, a in enumerate(args) if k not in static)

        def bound(*dyn, **kw):
            it = iter(dyn)
            full = [values[static.index(k)] if k in static else next(it)
                    for k in range(len(dyn) + len(static))]
            return self._fun(*full, **kw)

        functools.update_wrapper(bound, self._fun)
        return bound, dynamic, (static, values)

    def _fast_key(self, args) -> tuple | None:
        """The key of a call whose arguments are all C-contiguous NumPy arrays, or None."""
        key = []
        for a in args:
            if type(a) not in NUMPY_ARRAYS or not a.flags.c_contiguous:
                return None
            key.append((a.shape, a.dtype))
        key.append(x64_enabled())
        key.append(_axes.cache_key())  # bound axes' sizes are traced into the program
        return tuple(key)

    def __call__(self, *args, **kwargs):
        if self._tracing:
            # Called while its own trace runs (a custom_vjp fwd rule calling the jitted
            # function it belongs to; refjit traces the rules with the function): inlined, as
            # jit is the identity on values.
            return self._fun(*args, **kwargs)
        if not kwargs and self._fast_entries:
            # The dispatch fast path: NumPy arrays of types called with before, no pytree to
            # flatten, no refs, nothing to convert (see _remember_fast).
            fast = self._fast_entries.get(self._fast_key(args))
            if fast is not None:
                executable, traced = fast
                outs = executable(list(args))
                return tree_util.tree_unflatten(traced.out_tree, traced.wrap_keys(outs))
        fun, dyn_args, static_key = self._split_static(args)
        try:
            leaves, arrays, key, in_tree = _flatten_call(fun, dyn_args, kwargs, "refjit.jit",
                                                         ref_views_ok=True)
        except RefViewArgument:
            return self._call_with_ref_views(args, kwargs)
        cache_key = (in_tree, key, static_key, _axes.cache_key())
        entry = self._entries.get(cache_key)
        if entry is None:
            try:
                entry = self._compile(fun, leaves, arrays, in_tree, dyn_args, static_key)
            except ClosesOverTracerError as e:
                # Called inside a JAX trace (refjit's own, or JAX's) with a function that
                # closes over that trace's values, such as a ref made in an enclosing
                # function: its jaxpr is inlined into that trace (jit is the identity on
                # values), not its Python code run again.
                outs = jax.core.eval_jaxpr(e.closed.jaxpr, e.closed.consts, *leaves)
                return tree_util.tree_unflatten(e.out_tree, outs)
            self._entries[cache_key] = entry
        executable, traced = entry
        has_refs = bool(traced.ref_consts) or any(
            isinstance(k[-1], tuple) and k[-1][:1] == ("ref",) for k in key[:-1])
        if has_refs:
            check_distinct_refs(leaves, traced.ref_consts, "refjit.jit")
        if any(is_tracer(a) for a in arrays) or (
                (has_refs or traced.calls_host) and inside_jax_trace()):
            # Staged into an enclosing trace (refjit's or JAX's): the refs the function
            # closes over are passed as themselves, and that trace reads and writes them.
            # Effects are staged even on concrete arguments, to happen when the traced
            # program runs, as often as it runs.
            ins = [x if is_ref(x) else a for x, a in zip(leaves, arrays)]  # refs as refs
            outs = executable.stage(ins + list(traced.ref_consts))
            return tree_util.tree_unflatten(traced.out_tree, traced.wrap_keys(outs))
        inputs, const_arrays = traced.primal_inputs(arrays)
        outs = executable(inputs)
        if has_refs:
            write_back_refs(leaves, arrays, traced.ref_consts, const_arrays)
        if not kwargs and not self._static:
            self._remember_fast(args, leaves, arrays, traced, entry)
        return tree_util.tree_unflatten(traced.out_tree, traced.wrap_keys(outs))

    def _call_with_ref_views(self, args, kwargs):
        """A call given a view of a ref (``ref.at[1]``, which JAX makes only while tracing):
        the function is inlined into that trace, as jit is the identity on values."""
        return self._fun(*args, **kwargs)

    def _remember_fast(self, args, leaves, arrays, traced, entry) -> None:
        """Lets later calls with arguments of these types take the fast path when this one
        needed nothing but the arrays as they are: each argument a leaf that is a C-contiguous
        NumPy array of a dtype refjit takes unconverted, and no refs closed over."""
        if traced.ref_consts or traced.calls_host or len(leaves) != len(args):
            return
        if not all(x is a and l is a for x, l, a in zip(args, leaves, arrays)):
            return
        key = self._fast_key(args)
        if key is not None:
            self._fast_entries[key] = entry

    def trace(self, *args, **kwargs) -> "Traced":
        """As ``jax.jit(f).trace(*args)``: the function traced at those arguments;
        ``.jaxpr`` is JAX's jaxpr of it, ``.lower()`` refjit's ``Lowered``."""
        return Traced(self, args, kwargs)

    def lower(self, *args, **kwargs) -> "Lowered":
        """The function traced (not yet compiled) at the types of ``args``, as
        ``jax.jit(f).lower(*args)``: ``.as_text(stage)`` prints refjit's program, ``.compile()``
        compiles it. The compiled program is the one calls of this function then use."""
        # As in JAX, an argument may be a jax.ShapeDtypeStruct (is_ref=True for a ref): only
        # its type matters here.
        def example(x):
            if not isinstance(x, jax.ShapeDtypeStruct):
                return x
            zeros = np.zeros(x.shape, x.dtype)
            return jax.new_ref(zeros) if getattr(x, "is_ref", False) else zeros

        args, kwargs = tree_util.tree_map(example, (args, kwargs))
        fun, dyn_args, static_key = self._split_static(args)
        leaves, arrays, key, in_tree = _flatten_call(fun, dyn_args, kwargs, "refjit.jit.lower")
        cache_key = (in_tree, key, static_key, _axes.cache_key())
        entry = self._entries.get(cache_key)
        if entry is None:
            entry = self._entries[cache_key] = self._compile(fun, leaves, arrays, in_tree,
                                                             dyn_args, static_key)
        return Lowered(self, *entry)

    def _compile(self, fun, leaves, arrays, in_tree, dyn_args, static_key):
        self._tracing = True
        try:
            traced = trace(fun, leaves, arrays, in_tree)
        finally:
            self._tracing = False
        donated = [False] * len(arrays)
        if self._donate:
            ranges = _leaf_ranges(dyn_args)
            static = static_key[0] if static_key else ()
            for n in self._donate:
                n %= len(dyn_args) + len(static)
                if n in static:
                    continue
                pos = n - sum(1 for s in static if s < n)
                for k in ranges[pos]:
                    donated[k] = True
        donated += [False] * len(traced.ref_consts)
        executable = _executable(traced.program, traced.consts, self._interpret, donated,
                                 self._exact_math, exact_orders=exact_orders(traced, False))
        return executable, traced


class Traced:
    """``refjit.jit(f).trace(*args)``."""

    def __init__(self, jitted: _Jitted, args: tuple, kwargs: dict):
        self._jitted = jitted
        self._args = args
        self._kwargs = kwargs

    @property
    def jaxpr(self):
        """JAX's closed jaxpr of the function at these arguments (what refjit reads)."""
        return jax.make_jaxpr(self._jitted._fun)(*self._args, **self._kwargs)

    def lower(self) -> "Lowered":
        return self._jitted.lower(*self._args, **self._kwargs)


class Lowered:
    """``refjit.jit(f).lower(*args)``: the function as refjit reads it at those types."""

    def __init__(self, jitted: _Jitted, executable, traced):
        self._jitted = jitted
        self._executable = executable
        self._traced = traced

    def as_text(self, stage: str | None = None) -> str:
        """refjit's program (JAX's jaxpr syntax), or with ``stage`` the program after that
        pipeline pass (``refjit dump --help`` lists them: ``"buffers"``, ``"mlir"``,
        ``"llvm"``, ``"asm"``, ...)."""
        program = self._traced.program
        if stage in ("hlo", "stablehlo"):
            raise NotImplementedError(
                f"refjit.jit(...).lower(...).as_text({stage!r}): refjit compiles through its "
                "own pipeline (MLIR, then LLVM), not XLA, so there is no HLO; ask for a refjit "
                "stage instead: None (the program), 'buffers', 'mlir', 'llvm', 'asm' or another "
                "pass `refjit dump --help` lists")
        return program.text if stage is None else program.emit(stage)

    @property
    def jax_text(self) -> str:
        """What ``jax.make_jaxpr`` printed for the function."""
        return self._traced.jax_text

    def compile(self) -> "Compiled":
        """Compiles the program to native code now (the first call would otherwise)."""
        start = time.perf_counter()
        _ = self._executable.executable
        return Compiled(self, (time.perf_counter() - start) * 1e3)


class Compiled:
    """``refjit.jit(f).lower(*args).compile()``: callable like the function."""

    def __init__(self, lowered: Lowered, compile_ms: float):
        self._lowered = lowered
        self.compile_ms = compile_ms  # what compile() took, in milliseconds

    def as_text(self, stage: str | None = None) -> str:
        return self._lowered.as_text(stage)

    def __call__(self, *args, **kwargs):
        return self._lowered._jitted(*args, **kwargs)


def jit(fun: Callable | None = None, *, donate_argnums=(), static_argnums=(),
        backend: str = "native", exact_math: bool = False):
    """Compiles ``fun`` with refjit, once per argument types (like ``jax.jit``).

    ``donate_argnums``: arguments whose memory the result may take over (a donated NumPy
    array must not be read afterwards). ``static_argnums``: hashable arguments traced as
    constants. ``backend``: ``"native"`` (compiled code) or ``"interpreter"`` (refjit's
    reference interpreter). ``exact_math``: libm for every transcendental function.
    """
    if fun is None:
        return functools.partial(jit, donate_argnums=donate_argnums,
                                 static_argnums=static_argnums, backend=backend,
                                 exact_math=exact_math)
    return _Jitted(fun, donate_argnums, static_argnums, backend, exact_math)
