"""refjit.jvp and refjit.linearize: refjit's forward mode on a JAX function."""

from __future__ import annotations

from typing import Callable, Sequence

import jax
import numpy as np
from jax import tree_util

from . import _core
from ._common import (exact_orders, _check_backend, _cached, _executable, _flatten_call, _is_inexact,
                      hoist_closed_over_tracers)
from ._staging import as_input, inside_jax_trace, is_tracer
from ._tracing import (ClosesOverTracerError, check_distinct_refs, function_name, is_ref,
                       ref_value, set_ref_value, trace, write_back_refs)

def _tangent_arrays(fun, primal_arrays, tangents, in_tree, what, primal_leaves=None):
    """The tangents of the float primals, checked against them. A ``jax.Ref`` primal takes a
    ``jax.Ref`` tangent, updated in place as the primal is (with ``primal_leaves``)."""
    t_leaves, t_tree = tree_util.tree_flatten(tangents)
    if t_tree != in_tree:
        raise TypeError(f"{what}({function_name(fun)}): the tangents' structure {t_tree} does "
                        f"not match the primals' {in_tree}")
    out = []
    for k, (p, t) in enumerate(zip(primal_arrays, t_leaves)):
        if not _is_inexact(p.dtype):
            continue
        if primal_leaves is not None and is_ref(primal_leaves[k]):
            if not is_ref(t):
                raise TypeError(f"{what}({function_name(fun)}): primal {k} is a jax.Ref, so "
                                f"its tangent must be one too, not {type(t).__name__}")
            out.append(ref_value(t))
            continue
        ta = as_input(t, p.dtype)
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
    try:
        return _jvp(fun, primals, tangents, backend)
    except ClosesOverTracerError:
        hoisted = hoist_closed_over_tracers(fun, primals, {})
        if hoisted is None:
            raise
    # The captured values become trailing primals with zero tangents; the call is staged
    # into the enclosing trace, which differentiates through it as through any refjit call.
    converted, values = hoisted
    zeros = tuple(jax.numpy.zeros_like(v) for v in values)
    return _jvp(converted, (*primals, *values), (*tangents, *zeros), backend)


def _jvp(fun, primals: tuple, tangents: tuple, backend: str):
    leaves, arrays, key, in_tree = _flatten_call(fun, primals, {}, "refjit.jvp")
    t_arrays = _tangent_arrays(fun, arrays, (tangents, {}), in_tree, "refjit.jvp", leaves)
    interpret = _check_backend(backend)
    def build():
        traced = trace(fun, leaves, arrays, in_tree, on_values=True)
        nonzero = [_is_inexact(a.dtype) for a in arrays] + [False] * len(traced.ref_consts)
        program = _core.jvp(traced.program, nonzero, traced.consts)
        return _executable(program, traced.consts, interpret,
                           exact_orders=exact_orders(traced, derivative=True)), traced

    entry = _cached(fun, ("jvp", in_tree, key, interpret), build)
    executable, traced = entry
    out_tree = traced.out_tree
    check_distinct_refs(leaves, traced.ref_consts, "refjit.jvp")
    staged = any(is_tracer(a) for a in arrays + t_arrays) or (
        (traced.ref_consts or traced.calls_host) and inside_jax_trace())
    if staged and traced.ref_consts and not any(is_ref(x) for x in leaves):
        # Staged into an enclosing trace, which reads and writes the refs the function
        # closes over (passed as themselves) when it runs.
        n = traced.out_tree.num_leaves
        outs = executable.stage(list(arrays) + list(traced.ref_consts) + list(t_arrays))
        return (tree_util.tree_unflatten(traced.out_tree, traced.wrap_keys(outs[:n])),
                tree_util.tree_unflatten(traced.out_tree, outs[n:]))
    inputs, const_arrays = traced.primal_inputs(arrays)
    outs = executable(inputs + t_arrays)
    write_back_refs(leaves, arrays, traced.ref_consts, const_arrays)
    # Ref tangents were updated in place as their primals were.
    t_leaves = tree_util.tree_leaves(tangents)
    float_pairs = [(x, t) for x, t, a in zip(leaves, t_leaves, arrays) if _is_inexact(a.dtype)]
    for (x, t), a in zip(float_pairs, t_arrays):
        if is_ref(x):
            set_ref_value(t, a)
    n = out_tree.num_leaves
    return (tree_util.tree_unflatten(out_tree, traced.wrap_keys(outs[:n])),
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
        inputs = self._residuals + t_arrays
        if any(is_tracer(x) for x in inputs):  # staged: as a linear call JAX can transpose
            outs = self._executable.stage(inputs, num_nonlinear=len(self._residuals))
        else:
            outs = self._executable(inputs)
        return tree_util.tree_unflatten(self._out_tree, outs)


def linearize(fun: Callable, *primals, backend: str = "native"):
    """``(fun(*primals), f_jvp)``: runs the primal computation now; ``f_jvp(*tangents)``
    applies the linear map J (refjit's linearize: only what the tangents need is saved)."""
    leaves, arrays, key, in_tree = _flatten_call(fun, primals, {}, "refjit.linearize")
    interpret = _check_backend(backend)
    if any(is_ref(x) for x in leaves):
        raise TypeError(f"refjit.linearize({function_name(fun)}): an argument is a jax.Ref; "
                        "linearize takes arrays (refjit.jvp takes refs with ref tangents)")
    def build():
        traced = trace(fun, leaves, arrays, in_tree, on_values=True)
        diff = [_is_inexact(a.dtype) for a in arrays] + [False] * len(traced.ref_consts)
        primal, linear, _ = _core.linearize(traced.program, diff, traced.consts)
        once = exact_orders(traced, derivative=True)
        return (_executable(primal, traced.consts, interpret, exact_orders=once),
                _executable(linear, [], interpret, exact_orders=once), traced)

    entry = _cached(fun, ("linearize", in_tree, key, interpret), build)
    primal_exe, linear_exe, traced = entry
    out_tree = traced.out_tree
    inputs, const_arrays = traced.primal_inputs(arrays)
    outs = primal_exe(inputs)
    write_back_refs(leaves, arrays, traced.ref_consts, const_arrays)
    n = out_tree.num_leaves
    f_jvp = _LinearFunction(linear_exe, outs[n:], arrays, in_tree, out_tree, fun)
    return tree_util.tree_unflatten(out_tree, traced.wrap_keys(outs[:n])), f_jvp
