"""refjit's transformations for JAX functions: jit, grad, value_and_grad, vjp, jvp,
linearize, make_jaxpr and compile (docs/python.md).

Each traces the function with ``jax.make_jaxpr`` at the argument types, reads JAX's jaxpr
into refjit, transforms it with refjit's own passes (so ``grad`` of a scan that updates its
carry in place stays copy-free) and runs refjit's native code. Compiled programs are cached
per function and argument types, as ``jax.jit`` does.
"""

from __future__ import annotations

import functools
import re
import weakref
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax import tree_util

from . import _core
from ._tracing import LeafError, Traced, function_name, leaf_names, to_arrays, trace

_BACKENDS = ("native", "interpreter")


class _Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return f"refjit.{self._name}"


#: ``with_refs`` entry: return this argument's gradient as a value (the default).
GradValue = _Marker("GradValue")
#: ``with_refs`` entry: do not compute this argument's gradient.
DontWant = _Marker("DontWant")


# ---- the compile cache ------------------------------------------------------------------

# function -> {key: compiled entry}. Weak, so that a function's programs go with it.
_cache: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()
_strong_cache: dict = {}  # for callables that cannot be weakly referenced


def _entries(fun: Callable) -> dict:
    try:
        return _cache.setdefault(fun, {})
    except TypeError:
        return _strong_cache.setdefault(fun, {})


def clear_cache() -> None:
    """Drops every compiled program (they are compiled again on their next call)."""
    _cache.clear()
    _strong_cache.clear()


def _check_backend(backend: str) -> bool:
    if backend not in _BACKENDS:
        raise ValueError(f"backend must be 'native' or 'interpreter', not {backend!r}")
    return backend == "interpreter"


def _executable(program, consts, interpret: bool, donated: Sequence[bool] = (),
                exact_math: bool = False):
    return _core.Executable(program, list(consts), interpret=interpret, donated=list(donated),
                            exact_math=exact_math)


# ---- arguments ----------------------------------------------------------------------------


def _argnums_tuple(argnums, nargs: int, what: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for n in nums:
        if not isinstance(n, int) or not -nargs <= n < nargs:
            raise ValueError(f"{what}: argnums {argnums!r} names no argument of a call with "
                             f"{nargs} positional argument(s)")
    return tuple(n % nargs for n in nums)


def _flatten_call(fun: Callable, args: tuple, kwargs: dict, what: str):
    """(leaves, arrays, key, in_tree) for a call, with TypeErrors naming bad arguments."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    try:
        arrays, key = to_arrays(leaves)
    except LeafError as e:
        name = leaf_names(fun, args, kwargs)[e.index]
        raise TypeError(f"{what}({function_name(fun)}): {name} {e.reason}") from None
    return leaves, arrays, key, in_tree


def _leaf_ranges(args: tuple) -> list[range]:
    """The flat leaf positions of each positional argument (kwargs come after them)."""
    ranges, start = [], 0
    for a in args:
        n = tree_util.tree_structure(a).num_leaves
        ranges.append(range(start, start + n))
        start += n
    return ranges


def _is_float(dtype) -> bool:
    return np.issubdtype(dtype, np.floating)


# ---- jit ------------------------------------------------------------------------------------


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
        functools.update_wrapper(self, fun)

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

    def __call__(self, *args, **kwargs):
        fun, dyn_args, static_key = self._split_static(args)
        leaves, in_tree = tree_util.tree_flatten((dyn_args, kwargs))
        try:
            arrays, key = to_arrays(leaves)
        except LeafError as e:
            name = leaf_names(fun, dyn_args, kwargs)[e.index]
            raise TypeError(f"refjit.jit({function_name(fun)}): {name} {e.reason}") from None
        cache_key = (in_tree, key, static_key)
        entry = self._entries.get(cache_key)
        if entry is None:
            entry = self._compile(fun, leaves, arrays, in_tree, dyn_args, static_key)
            self._entries[cache_key] = entry
        executable, out_tree = entry
        return tree_util.tree_unflatten(out_tree, executable(arrays))

    def _compile(self, fun, leaves, arrays, in_tree, dyn_args, static_key):
        traced = trace(fun, leaves, arrays, in_tree)
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
        executable = _executable(traced.program, traced.consts, self._interpret, donated,
                                 self._exact_math)
        return executable, traced.out_tree


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


# ---- grad and value_and_grad ---------------------------------------------------------------


def _loss_and_aux(has_aux: bool, name: str):
    def split(out):
        if not has_aux:
            return (out, ())
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"{name}: with has_aux=True the function must return a pair "
                            f"(loss, aux), not {type(out).__name__}")
        return (out[0], out[1])
    return split


class _Grad:
    def __init__(self, fun, argnums, has_aux, with_value, backend, exact_math):
        self._fun = fun
        self._argnums = argnums
        self._has_aux = has_aux
        self._with_value = with_value
        self._interpret = _check_backend(backend)
        self._exact_math = exact_math
        self._what = "refjit.value_and_grad" if with_value else "refjit.grad"
        functools.update_wrapper(self, fun)

    def __call__(self, *args, **kwargs):
        leaves, arrays, key, in_tree = _flatten_call(self._fun, args, kwargs, self._what)
        nums = _argnums_tuple(self._argnums, len(args), self._what)
        cache = _entries(self._fun)
        cache_key = ("grad", self._has_aux, nums, in_tree, key, self._interpret,
                     self._exact_math)
        entry = cache.get(cache_key)
        if entry is None:
            entry = self._compile(leaves, arrays, in_tree, args, kwargs, nums)
            cache[cache_key] = entry
        executable, out_tree, num_out, grad_trees = entry
        outs = executable(arrays)
        value_and_aux = tree_util.tree_unflatten(out_tree, outs[:num_out])
        grads, pos = [], num_out
        for tree in grad_trees:
            n = tree.num_leaves
            grads.append(tree_util.tree_unflatten(tree, outs[pos:pos + n]))
            pos += n
        g = grads[0] if isinstance(self._argnums, int) else tuple(grads)
        value, aux = value_and_aux
        if not self._with_value:
            return (g, aux) if self._has_aux else g
        return ((value, aux) if self._has_aux else value), g

    def _compile(self, leaves, arrays, in_tree, args, kwargs, nums):
        traced = trace(self._fun, leaves, arrays, in_tree,
                       _loss_and_aux(self._has_aux, self._what))
        traced.warn_if_custom_rules(self._what)
        loss_types = traced.program.output_types
        dtype, shape, _, _ = loss_types[0]
        if shape != () or not dtype.startswith("float"):
            raise TypeError(f"{self._what}({traced.name}): the function must return a float "
                            f"scalar{' (then its aux)' if self._has_aux else ''}, not {dtype}"
                            f"{list(shape)}")
        ranges = _leaf_ranges(args)
        wrt = []
        names = None
        for n in nums:
            for k in ranges[n]:
                if not _is_float(arrays[k].dtype):
                    names = names or leaf_names(self._fun, args, kwargs)
                    raise TypeError(f"{self._what}({traced.name}): {names[k]} has dtype "
                                    f"{arrays[k].dtype}; only float arguments can be "
                                    "differentiated")
                wrt.append(k)
        num_out = len(loss_types)
        program = _core.grad(traced.program, wrt, num_out - 1)
        executable = _executable(program, traced.consts, self._interpret,
                                 exact_math=self._exact_math)
        grad_trees = [tree_util.tree_structure(args[n]) for n in nums]
        return executable, traced.out_tree, num_out, grad_trees


def grad(fun: Callable, argnums=0, has_aux: bool = False, *, backend: str = "native",
         exact_math: bool = False):
    """The gradient of ``fun`` (a float scalar function) with respect to the arguments
    ``argnums`` (an int or a tuple), computed by refjit's reverse mode. With
    ``has_aux=True``, ``fun`` returns ``(loss, aux)`` and the result is ``(grad, aux)``."""
    return _Grad(fun, argnums, has_aux, False, backend, exact_math)


def value_and_grad(fun: Callable, argnums=0, has_aux: bool = False, *,
                   backend: str = "native", exact_math: bool = False):
    """Like :func:`grad`, returning ``(value, grad)`` (``((value, aux), grad)`` with
    ``has_aux``)."""
    return _Grad(fun, argnums, has_aux, True, backend, exact_math)


# ---- jvp and linearize ----------------------------------------------------------------------


def _tangent_arrays(fun, primal_arrays, tangents, in_tree, what):
    """The tangents of the float primals, checked against them."""
    t_leaves, t_tree = tree_util.tree_flatten(tangents)
    if t_tree != in_tree:
        raise TypeError(f"{what}({function_name(fun)}): the tangents' structure {t_tree} does "
                        f"not match the primals' {in_tree}")
    out = []
    for k, (p, t) in enumerate(zip(primal_arrays, t_leaves)):
        if not _is_float(p.dtype):
            continue
        ta = np.ascontiguousarray(np.asarray(t, dtype=p.dtype)).reshape(np.shape(t))
        if ta.shape != p.shape:
            raise TypeError(f"{what}({function_name(fun)}): tangent {k} has shape {ta.shape} "
                            f"but its primal has shape {p.shape}")
        out.append(ta)
    return out


def jvp(fun: Callable, primals: Sequence, tangents: Sequence, *, backend: str = "native"):
    """``(fun(*primals), J tangents)``: forward mode, one tangent per primal (pytrees of the
    same structure). Tangents of integer primals are ignored."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError("refjit.jvp: primals and tangents must be tuples or lists")
    primals, tangents = tuple(primals), tuple(tangents)
    leaves, arrays, key, in_tree = _flatten_call(fun, primals, {}, "refjit.jvp")
    t_arrays = _tangent_arrays(fun, arrays, (tangents, {}), in_tree, "refjit.jvp")
    interpret = _check_backend(backend)
    cache = _entries(fun)
    cache_key = ("jvp", in_tree, key, interpret)
    entry = cache.get(cache_key)
    if entry is None:
        traced = trace(fun, leaves, arrays, in_tree)
        traced.warn_if_custom_rules("refjit.jvp")
        nonzero = [_is_float(a.dtype) for a in arrays]
        program = _core.jvp(traced.program, nonzero)
        entry = (_executable(program, traced.consts, interpret), traced.out_tree)
        cache[cache_key] = entry
    executable, out_tree = entry
    outs = executable(arrays + t_arrays)
    n = out_tree.num_leaves
    return (tree_util.tree_unflatten(out_tree, outs[:n]),
            tree_util.tree_unflatten(out_tree, outs[n:]))


class _LinearFunction:
    """``f_jvp`` of :func:`linearize`: tangents in, output tangents out, any number of
    times (the primal computation is not repeated)."""

    def __init__(self, executable, residuals, primal_arrays, in_tree, out_tree, fun):
        self._executable = executable
        self._residuals = residuals
        self._primal_arrays = primal_arrays
        self._in_tree = in_tree
        self._out_tree = out_tree
        self._fun = fun

    def __call__(self, *tangents):
        t_arrays = _tangent_arrays(self._fun, self._primal_arrays, (tangents, {}),
                                   self._in_tree, "refjit.linearize")
        outs = self._executable(self._residuals + t_arrays)
        return tree_util.tree_unflatten(self._out_tree, outs)


def linearize(fun: Callable, *primals, backend: str = "native"):
    """``(fun(*primals), f_jvp)``: runs the primal computation now; ``f_jvp(*tangents)``
    applies the linear map J (refjit's linearize: only what the tangents need is saved)."""
    leaves, arrays, key, in_tree = _flatten_call(fun, primals, {}, "refjit.linearize")
    interpret = _check_backend(backend)
    cache = _entries(fun)
    cache_key = ("linearize", in_tree, key, interpret)
    entry = cache.get(cache_key)
    if entry is None:
        traced = trace(fun, leaves, arrays, in_tree)
        traced.warn_if_custom_rules("refjit.linearize")
        diff = [_is_float(a.dtype) for a in arrays]
        primal, linear, num_residuals = _core.linearize(traced.program, diff)
        entry = (_executable(primal, traced.consts, interpret),
                 _executable(linear, [], interpret), traced.out_tree)
        cache[cache_key] = entry
    primal_exe, linear_exe, out_tree = entry
    outs = primal_exe(arrays)
    n = out_tree.num_leaves
    f_jvp = _LinearFunction(linear_exe, outs[n:], arrays, in_tree, out_tree, fun)
    return tree_util.tree_unflatten(out_tree, outs[:n]), f_jvp


# ---- vjp ------------------------------------------------------------------------------------


class _VjpCore:
    """What every VJP function of one forward run shares: the residuals, and the backward
    programs, one per accumulator combination (compiled on first use)."""

    def __init__(self, fun, traced_program, arrays, arg_trees, arg_ranges, residuals,
                 out_tree, out_types, interpret, backward_cache):
        self.fun = fun
        self.program = traced_program
        self.arrays = arrays
        self.arg_trees = arg_trees
        self.arg_ranges = arg_ranges
        self.residuals = residuals
        self.out_tree = out_tree
        self.out_types = out_types
        self.interpret = interpret
        self.backward_cache = backward_cache

    def backward(self, kinds: tuple):
        exe = self.backward_cache.get(kinds)
        if exe is None:
            diff = [k != "none" for k in kinds]
            used = [k for k in kinds if k != "none"]
            _, bwd, _ = _core.vjp(self.program, diff, used)
            exe = _executable(bwd, [], self.interpret)
            self.backward_cache[kinds] = exe
        return exe


class VjpFunction:
    """The backward pass :func:`vjp` returns. ``f_vjp(ct)`` maps a cotangent of the
    function's output (same structure) to one cotangent per primal argument; it may be
    applied any number of times. ``f_vjp.with_refs(*entries)`` accumulates gradients into
    NumPy arrays in place instead (see :meth:`with_refs`)."""

    def __init__(self, core: _VjpCore, entries: tuple | None = None):
        self._core = core
        self._entries = entries

    def with_refs(self, *entries) -> "VjpFunction":
        """One entry per primal argument: :data:`GradValue` (return its gradient, the
        default), :data:`DontWant` (skip it; its slot holds ``None``), or a writable float
        NumPy array (a pytree of them for a pytree argument) that the gradient is added into
        (``+=``, in place; its slot holds that array)."""
        n = len(self._core.arg_trees)
        if len(entries) != n:
            raise _errors_ref("E3", f"with_refs: {len(entries)} entries for a function of {n} "
                                    "argument(s); give one per argument")
        return VjpFunction(self._core, tuple(entries))

    def _leaf_entries(self):
        """Per flat leaf: ("value"|"dont_want"|"ref"|"none", accumulator or None)."""
        core = self._core
        per_leaf = []
        entries = self._entries or (GradValue,) * len(core.arg_trees)
        seen = {}
        for a, (entry, tree, rng) in enumerate(zip(entries, core.arg_trees, core.arg_ranges)):
            if entry is GradValue or entry is DontWant:
                leaf_entries = [entry] * len(rng)
            else:
                leaf_entries, e_tree = tree_util.tree_flatten(
                    entry, is_leaf=lambda x: x is GradValue or x is DontWant)
                if e_tree != tree:
                    raise _errors_ref("E3", f"with_refs: the entry for argument {a} has the "
                                            f"structure {e_tree}, the argument {tree}")
            for k, e in zip(rng, leaf_entries):
                primal = core.arrays[k]
                if not _is_float(primal.dtype):
                    per_leaf.append(("none", None))
                elif e is GradValue:
                    per_leaf.append(("value", None))
                elif e is DontWant:
                    per_leaf.append(("dont_want", None))
                else:
                    if (not isinstance(e, np.ndarray) or e.dtype != primal.dtype
                            or e.shape != primal.shape):
                        raise _errors_ref("E6", f"with_refs: the gradient ref for argument {a} "
                                                f"must be a NumPy array {primal.dtype}"
                                                f"{list(primal.shape)}, got "
                                                f"{_describe(e)}")
                    if id(e) in seen:
                        raise _errors_ref("E7", f"with_refs: the same array is bound for "
                                                f"arguments {seen[id(e)]} and {a}")
                    seen[id(e)] = a
                    per_leaf.append(("ref", e))
        return per_leaf

    def __call__(self, ct):
        core = self._core
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != core.out_tree:
            raise TypeError(f"refjit.vjp: the cotangent's structure {ct_tree} does not match "
                            f"the output's {core.out_tree}")
        cts = []
        for k, (c, (dtype, shape, _, _)) in enumerate(zip(ct_leaves, core.out_types)):
            a = np.ascontiguousarray(np.asarray(c, dtype=dtype))
            a = a.reshape(np.shape(c))
            if a.shape != tuple(shape):
                raise _errors_ref("E6", f"refjit.vjp: cotangent {k} has shape {a.shape} but "
                                        f"output {k} has shape {tuple(shape)}")
            cts.append(a)
        for dtype, shape, _, _ in core.out_types[len(cts):]:  # has_aux: the aux outputs
            cts.append(np.zeros(shape, dtype=dtype))
        per_leaf = self._leaf_entries()
        kinds = tuple(k for k, _ in per_leaf)
        refs = [acc for k, acc in per_leaf if k == "ref"]
        outs = core.backward(kinds)(core.residuals + refs + cts)
        values = iter(outs)
        results = []
        for tree, rng in zip(core.arg_trees, core.arg_ranges):
            leaves = []
            for k in rng:
                kind, acc = per_leaf[k]
                if kind == "value":
                    leaves.append(next(values))
                elif kind == "ref":
                    leaves.append(acc)
                elif kind == "dont_want":
                    leaves.append(None)
                else:  # an integer argument: JAX's float0 zeros
                    leaves.append(np.zeros(core.arrays[k].shape, dtype=jax.dtypes.float0))
            results.append(tree_util.tree_unflatten(tree, leaves))
        return tuple(results)



def _describe(x) -> str:
    if isinstance(x, np.ndarray):
        return f"{x.dtype}{list(x.shape)}"
    return type(x).__name__


def _errors_ref(code: str, message: str):
    from ._errors import RefError
    return RefError(message, code)


def vjp(fun: Callable, *primals, has_aux: bool = False, backend: str = "native"):
    """``(fun(*primals), f_vjp)`` (``(out, f_vjp, aux)`` with ``has_aux``): runs the forward
    pass now and returns the reusable backward pass :class:`VjpFunction`."""
    leaves, arrays, key, in_tree = _flatten_call(fun, primals, {}, "refjit.vjp")
    interpret = _check_backend(backend)
    cache = _entries(fun)
    cache_key = ("vjp", has_aux, in_tree, key, interpret)
    entry = cache.get(cache_key)
    if entry is None:
        split = _loss_and_aux(has_aux, "refjit.vjp")
        traced = trace(fun, leaves, arrays, in_tree, lambda out: split(out))
        traced.warn_if_custom_rules("refjit.vjp")
        diff = [_is_float(a.dtype) for a in arrays]
        kinds = ["value"] * sum(diff)
        forward, _, num_residuals = _core.vjp(traced.program, diff, kinds)
        entry = (traced, _executable(forward, traced.consts, interpret), {})
        cache[cache_key] = entry
    traced, forward_exe, backward_cache = entry
    outs = forward_exe(arrays)
    out_tree = traced.out_tree
    n = out_tree.num_leaves
    (out, aux) = tree_util.tree_unflatten(out_tree, outs[:n])
    # The backward pass differentiates the primary output only: aux gets zero cotangents.
    main_tree = tree_util.tree_structure(out)
    core = _VjpCore(fun, traced.program, arrays, [tree_util.tree_structure(p) for p in primals],
                    _leaf_ranges(primals), outs[n:], main_tree,
                    traced.program.output_types, interpret, backward_cache)
    f_vjp = VjpFunction(core)
    return (out, f_vjp, aux) if has_aux else (out, f_vjp)


# ---- make_jaxpr and compile -----------------------------------------------------------------


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
            wrt.extend(k for k in ranges[n] if _is_float(arrays[k].dtype))
    if header is None:
        header = re.sub(r"\.o$", "", path) + ".h"
    symbols, _ = _core.compile_object(traced.program, symbol, path, header, mode, wrt, [],
                                      cpu, exact_math, f"refjit.compile({traced.name})")
    return list(symbols)
