"""From a Python call to a refjit program: arguments become flat arrays of the types JAX
would trace them at, ``jax.make_jaxpr`` turns the function into jaxpr text, and refjit's
parser reads that text (refjit/_core, python/src/module.cpp).

JAX is used for tracing only: nothing JAX compiles runs here.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax import tree_util
from jax._src.state.types import TransformedRef

from . import _axes, _core
from ._array import NUMPY_ARRAYS
from ._errors import ParseError, TraceError, TypeCheckError
from ._retrace import (end_exactness_tracking, needs_retrace, retrace,
                       start_exactness_tracking)
from ._staging import is_tracer, printing_for_refjit, staged_programs

# The element types refjit computes in, as NumPy names them.
_SUPPORTED = frozenset(
    np.dtype(t)
    for t in (
        np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64, np.bool_, np.float16, jax.numpy.bfloat16,
        np.complex64, np.complex128,
    )
)
_PYTHON_SCALARS = (bool, int, float)
_canonical_cache: dict[tuple[np.dtype, bool], np.dtype] = {}


def canonical_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype JAX traces an array of ``dtype`` at (float64 -> float32 unless x64 is on)."""
    # Keyed by the x64 flag too: a program may turn it on and off between calls.
    key = (dtype, x64_enabled())
    c = _canonical_cache.get(key)
    if c is None:
        c = np.dtype(jax.dtypes.canonicalize_dtype(dtype))
        _canonical_cache[key] = c
    return c


def x64_enabled() -> bool:
    return bool(jax.config.jax_enable_x64)


class RefViewArgument(Exception):
    """Leaf ``index`` is a view of a ref (``ref.at[1]``, a jax TransformedRef): the caller
    passes the viewed part instead (refjit.jit._call_with_ref_views)."""

    def __init__(self, index: int):
        super().__init__(index)
        self.index = index


class LeafError(Exception):
    """A leaf that is not an array refjit can take; `index` is its flat position."""

    def __init__(self, index: int, reason: str):
        super().__init__(reason)
        self.index = index
        self.reason = reason


# JAX's concrete array class, and its typed PRNG key arrays' (jax.random.key).
_JAX_ARRAY = type(jax.numpy.zeros(()))
_KEY_ARRAY = type(jax.random.key(0))
# (dtype, x64) -> whether a concrete JAX array of that dtype is passed as it is: a dtype refjit
# computes in, that JAX traces at itself (no x64 narrowing), and not a PRNG key.
_passed_as_is: dict[tuple[np.dtype, bool], bool] = {}
# The PRNG implementations refjit computes with (threefry), by JAX's impl object.
_threefry_impls: dict[Any, bool] = {}


def _is_passed_as_is(dtype, x64: bool) -> bool:
    known = _passed_as_is.get((dtype, x64))
    if known is None:
        known = (not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) and dtype in _SUPPORTED
                 and canonical_dtype(dtype) == dtype)
        _passed_as_is[(dtype, x64)] = known
    return known


# By the implementation name wrap_key_data takes: the implementation object JAX's key arrays
# hold, or False where this JAX's key arrays are not built that way.
_key_impls: dict[Any, Any] = {}


def _wrap_key(words: np.ndarray, impl):
    """A key array of `impl` over the u32 words refjit returned. Built directly, as JAX's own
    eager rule does: binding the wrapping primitive cost a third of a small training step's
    call (vae_linen_keys: 43 of 150 us)."""
    obj = _key_impls.get(impl)
    if obj is None:  # the first time, JAX's way, and the object its key holds
        key = jax.random.wrap_key_data(words, impl=impl)
        _key_impls[impl] = getattr(key, "_impl", False) if type(key) is _KEY_ARRAY else False
        return key
    if obj is False:
        return jax.random.wrap_key_data(words, impl=impl)
    return _KEY_ARRAY(obj, words)


def _key_words(x) -> np.ndarray | None:
    """A threefry key array's words (u32[..., 2]); None for another implementation."""
    impl = x._impl
    threefry = _threefry_impls.get(impl)
    if threefry is None:
        threefry = _threefry_impls[impl] = "threefry" in str(jax.random.key_impl(x))
    if not threefry:
        return None
    return np.array(x._base_array, order="C")


def to_arrays(leaves: Sequence[Any]) -> tuple[list[np.ndarray], tuple]:
    """The leaves as C-contiguous NumPy arrays of the dtypes JAX traces them at, and the
    compile-cache key of their types. Python scalars are weakly typed, as in JAX."""
    arrays = []
    key = []
    x64 = x64_enabled()
    for i, x in enumerate(leaves):
        weak = False
        t = type(x)
        # The common leaves first, without the checks below (a training step's state is tens
        # of JAX arrays: those checks took a third of a small step's dispatch).
        if t is _JAX_ARRAY and _is_passed_as_is(x.dtype, x64):
            a = np.asarray(x)
            if a.flags.c_contiguous:
                arrays.append(a)
                key.append((a.shape, a.dtype, False))
                continue
        # A NumPy array, or one refjit returned (a training loop's state after the first step).
        if t in NUMPY_ARRAYS and _is_passed_as_is(x.dtype, x64) and x.flags.c_contiguous:
            arrays.append(x)
            key.append((x.shape, x.dtype, False))
            continue
        if t is _KEY_ARRAY:
            a = _key_words(x)
            if a is not None:
                arrays.append(a)
                key.append((a.shape, a.dtype, "key"))
                continue
        if t in NUMPY_ARRAYS:
            a = x
        elif is_tracer(x):  # refjit called inside a trace: the program is staged
            aval = x.aval
            kind = (("ref", getattr(aval, "kind", None))
                    if isinstance(aval, jax.ref.AbstractRef) else aval.weak_type)
            arrays.append(x)
            # A typed key's dtype (key<fry>) is JAX's, not NumPy's.
            dtype = (x.dtype if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
                     else np.dtype(x.dtype))
            key.append((tuple(x.shape), dtype, kind))
            continue
        elif isinstance(x, _PYTHON_SCALARS):
            weak = type(x) is not bool
            a = np.asarray(x, dtype=canonical_dtype(np.result_type(type(x))))
        elif is_key_array(x):
            # A typed PRNG key (jax.random.key): refjit computes on its words, u32[..., 2].
            impl = str(jax.random.key_impl(x))
            if "threefry" not in impl:
                raise LeafError(i, f"is a PRNG key of the {impl} implementation; refjit "
                                   "computes with threefry keys (jax.random.key's default)")
            a = np.array(jax.random.key_data(x), order="C")
            arrays.append(a)
            key.append((a.shape, a.dtype, "key"))
            continue
        elif isinstance(x, (jax.Array, np.ndarray, np.generic)):
            a = np.asarray(x)
        elif is_ref(x):
            a = ref_value(x)
            arrays.append(a)
            # A ref's kind (no_grad_no_remat) changes how autodiff treats it: part of the key.
            key.append((a.shape, a.dtype, ("ref", getattr(jax.typeof(x), "kind", None))))
            continue
        elif isinstance(x, TransformedRef):
            raise RefViewArgument(i)
        else:
            raise LeafError(
                i,
                f"has type {type(x).__name__}, which is not an array: refjit takes NumPy "
                "arrays, JAX arrays and Python scalars (in tuples, lists and dicts)",
            )
        dtype = a.dtype
        want = canonical_dtype(dtype) if dtype in _SUPPORTED else dtype
        if want not in _SUPPORTED:
            raise LeafError(
                i,
                f"has dtype {dtype}, which refjit does not compute in (float16/32/64, bfloat16, "
                "complex64/128, signed and unsigned integers and bool)",
            )
        if want != dtype or not a.flags.c_contiguous:
            a = np.ascontiguousarray(a, dtype=want).reshape(a.shape)
        arrays.append(a)
        key.append((a.shape, want, weak))
    # JAX traces differently with x64 on (default integer and float widths): part of the key.
    key.append(("x64", x64))
    return arrays, tuple(key)


def is_key_array(x) -> bool:
    """Whether ``x`` is a concrete array of typed PRNG keys (``jax.random.key``)."""
    return (isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)
            and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key))


def is_ref(x) -> bool:
    """Whether ``x`` is a concrete ``jax.Ref`` (a tracer of a ref type passes isinstance too)."""
    if type(x) in NUMPY_ARRAYS:  # the common case, answered without JAX's isinstance checks
        return False
    return isinstance(x, jax.Ref) and not isinstance(x, jax.core.Tracer)


def ref_value(ref) -> np.ndarray:
    """A writable copy of ``ref``'s current value, which compiled code updates in place."""
    impl = getattr(ref, "_refs", None)
    buf = getattr(impl, "_buf", None)
    if buf is None:  # not JAX's plain array ref: read it the public way
        buf = ref[...]
    return np.array(buf, order="C", copy=True)


def set_ref_value(ref, value: np.ndarray) -> None:
    """Makes ``value`` (which refjit updated in place, and which nothing else holds) the
    ref's new value, as JAX's own jit does for a ref it updated: the ref's buffer changes."""
    impl = getattr(ref, "_refs", None)
    if impl is not None and hasattr(impl, "_buf"):
        impl._buf = jax.device_put(value)
    else:
        ref[...] = value


def write_back_refs(leaves: Sequence[Any], arrays: Sequence[np.ndarray],
                    ref_consts: Sequence[Any] = (), const_arrays: Sequence[np.ndarray] = ()
                    ) -> None:
    """After a call: each ``jax.Ref`` argument, and each ref the function closes over, gets
    the value compiled code left in its array."""
    for x, a in zip(leaves, arrays):
        if is_ref(x):
            set_ref_value(x, a)
    for r, a in zip(ref_consts, const_arrays):
        set_ref_value(r, a)


def check_distinct_refs(leaves: Sequence[Any], ref_consts: Sequence[Any], what: str) -> None:
    """One ref reached twice (two arguments, or an argument the function also closes over)
    would be two copies here, each updated on its own: refuse it, as JAX does."""
    seen = set()
    for x in list(leaves) + list(ref_consts):
        if is_ref(x):
            if id(x) in seen:
                raise TypeError(f"{what}: the same jax.Ref is passed or closed over twice; "
                                "a ref may reach a function once")
            seen.add(id(x))


def leaf_names(fun: Callable, args: tuple, kwargs: dict) -> list[str]:
    """How error messages name each flat leaf of (args, kwargs): the parameter's name and
    the path inside it, e.g. ``params['w'][1]``."""
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = []
    names = []
    for path, _ in tree_util.tree_flatten_with_path((args, kwargs))[0]:
        top = path[0].idx if hasattr(path[0], "idx") else 0
        rest = path[1:]
        inner = tree_util.keystr(tuple(rest[1:]))
        if top == 0:  # positional
            pos = rest[0].idx
            name = f"{params[pos]}{inner} (argument {pos})" if pos < len(params) else \
                f"argument {pos}{inner}"
        else:
            name = f"{rest[0].key}{inner} (keyword argument)"
        names.append(name)
    return names


def function_name(fun: Callable) -> str:
    name = getattr(fun, "__name__", None)
    if name is None and hasattr(fun, "func"):  # functools.partial
        name = getattr(fun.func, "__name__", None)
    return name or type(fun).__name__


class Traced:
    """One function traced at one set of argument types."""

    __slots__ = ("program", "consts", "ref_consts", "out_tree", "jax_text", "name",
                 "key_outputs", "exact_orders", "calls_host")

    def __init__(self, program, consts, out_tree, jax_text, name, ref_consts=(),
                 key_outputs=(), exact_orders=float("inf")):
        self.program = program
        # How many orders of derivatives refjit computes as JAX would (_retrace's rule
        # depth, _common.exact_orders).
        self.exact_orders = exact_orders
        # Per output leaf: the PRNG implementation of a key result (refjit returns its words,
        # which wrap_keys makes a key array again), else None.
        self.key_outputs = tuple(key_outputs)
        self.consts = consts
        # The jax.Refs the function closes over: the program takes them as its last inputs,
        # read and written at each call (primal_inputs, write_back_refs).
        self.ref_consts = tuple(ref_consts)
        self.out_tree = out_tree
        self.jax_text = jax_text
        self.name = name
        # Whether the program calls the host (jax.debug.print, jax.debug.callback).
        self.calls_host = "debug_callback[" in jax_text

    def wrap_keys(self, outs: Sequence) -> list:
        """The leading output leaves ``outs`` with key results made key arrays again."""
        if not any(self.key_outputs):
            return list(outs)
        return [_wrap_key(o, impl) if impl is not None else o
                for o, impl in zip(outs, list(self.key_outputs) + [None] * len(outs))]

    def primal_inputs(self, arrays: Sequence[np.ndarray]) -> tuple[list, list]:
        """The program's inputs for a call's flat arrays: those, then the current values of
        the refs it closes over (also returned on their own, for write_back_refs)."""
        if not self.ref_consts:
            return list(arrays), []
        const_arrays = [ref_value(r) for r in self.ref_consts]
        return list(arrays) + const_arrays, const_arrays


class ClosesOverTracerError(TraceError):
    """The function depends on an enclosing JAX transformation: it closes over a value of
    that trace, or uses a named axis that transformation binds (``lax.axis_index('i')`` in
    ``jax.vmap(..., axis_name='i')``). refjit.jit inlines such a function into the enclosing
    transformation; the other transformations refuse it. ``closed`` is JAX's jaxpr of the
    function, and ``out_tree`` its result's structure: what inlining evaluates, without
    running the function's Python code a second time."""

    def __init__(self, message: str, closed, out_tree):
        super().__init__(message)
        self.closed = closed
        self.out_tree = out_tree


# Set when a trace was specialized to its arguments' values (on_values below): what was built
# from it holds for those values only, so the compile cache does not keep it.
specialized_to_values: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "specialized_to_values", default=False)


def trace(fun: Callable, leaves: Sequence[Any], arrays: Sequence[np.ndarray], in_tree,
          out_transform: Callable[[Any], Any] | None = None, *,
          on_values: bool = False) -> Traced:
    """Traces ``fun`` on the flat arguments ``leaves`` (unflattened with ``in_tree`` into
    ``(args, kwargs)``) and parses JAX's printout. ``out_transform`` may restructure the
    result before it is flattened (grad's ``(loss, aux)``). With ``on_values``, a function
    whose Python code needs its arguments' values (``if x > 0:``) is traced on those values,
    as JAX's eager grad runs it (refjit/_specialize.py), instead of refused."""
    store = {}

    # Wrapped, so that JAX's own messages name the user's arguments.
    @functools.wraps(fun)
    def traced_fun(*args, **kwargs):
        out = fun(*args, **kwargs)
        if out_transform is not None:
            out = out_transform(out)
        out_leaves, store["out_tree"] = tree_util.tree_flatten(out)
        return out_leaves

    # Python scalars are traced as themselves, so that JAX gives them weak types; refs and
    # PRNG keys as themselves, so that JAX gives them ref and key types.
    values = [x if isinstance(x, _PYTHON_SCALARS) or is_ref(x) or is_key_array(x) else a
              for x, a in zip(leaves, arrays)]
    args, kwargs = tree_util.tree_unflatten(in_tree, values)
    try:
        # Axes bound to processes are traced at their sizes (pmean's division, all_gather's
        # shape), as jax.make_jaxpr(f, axis_env=...) does.
        closed = jax.make_jaxpr(traced_fun, axis_env=_axes.axis_env())(*args, **kwargs)
    except _NEEDS_A_VALUE as e:
        if on_values:
            from ._specialize import make_jaxpr_on_values  # it imports this module

            store.clear()
            closed = make_jaxpr_on_values(traced_fun, args, kwargs)
            specialized_to_values.set(True)
        else:
            raise needs_a_value_error(fun, e) from e
    return _finish_trace(fun, closed, store["out_tree"])


# One TraceError class per JAX error class it stands for (_NEEDS_A_VALUE), made on first use.
_value_error_classes: dict[type, type] = {}


def needs_a_value_error(fun: Callable, e: Exception) -> TraceError:
    """A TraceError that is also an instance of JAX's error ``e`` (ConcretizationTypeError,
    TracerBoolConversionError, ...), so ``except`` clauses written for JAX keep working; its
    message says what to do in refjit, then what JAX said."""
    cls = _value_error_classes.get(type(e))
    if cls is None:
        cls = _value_error_classes[type(e)] = type(
            type(e).__name__, (TraceError, type(e)),
            {"__init__": Exception.__init__, "__str__": Exception.__str__,
             "__module__": TraceError.__module__})
    # JAX's own explanation (what needed the value, and which argument it depends on), without
    # the link to its documentation.
    jax_says = " ".join(line.strip() for line in str(e).splitlines()
                        if line.strip() and not line.startswith("See https://"))
    return cls(
        f"{function_name(fun)}: the function's Python code needs the value of a traced "
        f"array ({type(e).__name__}). refjit compiles a function once for all values of its "
        "argument types, as jax.jit does, so Python control flow on array values cannot be "
        "traced: write it with lax.cond, lax.select or jnp.where, or make the argument static "
        "(refjit.jit's static_argnums). refjit.grad, vjp, jvp and linearize trace such a "
        "function on its arguments' values instead, as JAX's eager transformations run it. "
        f"JAX: {jax_says}")


def _finish_trace(fun: Callable, closed, out_tree) -> Traced:
    """The Traced program of JAX's jaxpr ``closed`` of ``fun``."""
    for c in closed.consts:
        if is_tracer(c):  # a value of an enclosing JAX trace (a scan body's operand, ...)
            raise ClosesOverTracerError(
                f"{function_name(fun)}: the function closes over a value of an enclosing JAX "
                f"transformation (a traced {c.aval.str_short()}); refjit compiles the function "
                "on its own, so it cannot capture that value: pass it as an argument",
                closed, out_tree)
    axes = named_axes(closed.jaxpr) - set(_axes.bound)
    if axes:
        raise ClosesOverTracerError(
            f"{function_name(fun)}: the function uses the named axis "
            f"{', '.join(repr(a) for a in sorted(axes))} of an enclosing JAX transformation "
            "(jax.vmap or shard_map with axis_name); refjit compiles the function on its own, "
            "where that axis does not exist (refjit.jit inlines such a function into the "
            "transformation instead)", closed, out_tree)
    saved = start_exactness_tracking()
    try:
        if needs_retrace(closed.jaxpr):
            closed = retrace(closed)
    finally:
        exact_orders = end_exactness_tracking(saved)
    with printing_for_refjit():
        # Never colored: JAX colors its printout when it thinks a terminal reads it (under
        # mpirun, stdout is a pseudo-terminal).
        text = closed.pretty_print(use_color=False)
    name = function_name(fun)
    program = parse(text, f"<jaxpr of {name}>", staged_programs(closed.jaxpr))
    ref_positions = [k for k, c in enumerate(closed.consts) if is_ref(c)]
    ref_consts = [closed.consts[k] for k in ref_positions]
    if ref_positions:
        program = _core.consts_to_inputs(program, ref_positions)
    # np.asarray(order="C"), not np.ascontiguousarray, which makes a 0-d constant 1-d.
    consts = [np.asarray(c, order="C") for c in closed.consts if not is_ref(c)]
    key_outputs = [_key_impl_of(aval) for aval in closed.out_avals]
    return Traced(program, consts, out_tree, text, name, ref_consts, key_outputs, exact_orders)


def _key_impl_of(aval):
    """The PRNG implementation of a key-typed output, else None."""
    dtype = getattr(aval, "dtype", None)
    if dtype is None or not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return None
    return dtype._impl


# Primitives that bind named axes of their own (what is inside them is theirs).
_AXIS_BINDERS = ("shard_map", "xla_pmap", "pmap")


def named_axes(jaxpr) -> set:
    """The axis names ``jaxpr``'s collectives (axis_index, psum, all_gather, ...) use
    outside any shard_map or pmap of its own: axes an enclosing transformation binds."""
    names = set()
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _AXIS_BINDERS:
            continue
        for key in ("axis_name", "axes"):
            value = eqn.params.get(key)
            for a in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(a, str):
                    names.add(a)
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    names |= named_axes(inner)
    return names


_NEEDS_A_VALUE = (jax.errors.ConcretizationTypeError, jax.errors.TracerBoolConversionError,
                  jax.errors.TracerIntegerConversionError,
                  jax.errors.TracerArrayConversionError)


def parse(text: str, source: str, known=()):
    """Parses jaxpr text; a ParseError carries the offending line as ``equation``. ``known``:
    (name, program) pairs the text names without defining (staged refjit programs)."""
    try:
        return _core.parse(text, source, list(known))
    except (ParseError, TypeCheckError) as e:
        lines = text.splitlines()
        if 1 <= e.line <= len(lines):
            e.equation = lines[e.line - 1]
        raise
