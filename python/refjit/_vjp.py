"""refjit.vjp: the forward pass now, a reusable backward pass whose gradients can be added
into the caller's NumPy arrays in place (``with_refs``)."""

from __future__ import annotations

from typing import Callable

import jax
import numpy as np
from jax import tree_util

from . import _core
from ._common import (exact_orders, _check_backend, _cached, _executable, _flatten_call, _is_inexact,
                      _leaf_ranges, _loss_and_aux, hoist_closed_over_tracers)
from ._errors import RefError
from ._staging import as_input, inside_jax_trace, is_tracer
from ._tracing import (ClosesOverTracerError, check_distinct_refs, is_ref, ref_value,
                       set_ref_value, trace, write_back_refs)

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



class _VjpCore:
    """What every VJP function of one forward run shares: the residuals, and the backward
    programs, one per accumulator combination (compiled on first use)."""

    def __init__(self, fun, traced, leaves, arrays, arg_trees, arg_ranges, residuals,
                 out_tree, out_types, interpret, backward_cache):
        self.fun = fun
        self.program = traced.program
        self.exact_orders = exact_orders(traced, derivative=True)
        self.num_ref_consts = len(traced.ref_consts)
        self.leaves = leaves
        self.arrays = arrays
        self.arg_trees = arg_trees
        self.arg_ranges = arg_ranges
        self.residuals = residuals
        self.out_tree = out_tree
        self.out_types = out_types
        self.interpret = interpret
        self.backward_cache = backward_cache
        self.ref_residuals: tuple = ()  # positions (see vjp) of the refs passed again
        self.residual_refs: list = []   # the jax.Refs at those positions
        # Trailing primals that are values of an enclosing trace the function closes over
        # (hoisted, _common.hoist_closed_over_tracers): not the user's, never returned.
        self.hidden = 0

    def backward(self, kinds: tuple):
        exe = self.backward_cache.get(kinds)
        if exe is None:
            diff = [k != "none" for k in kinds] + [False] * self.num_ref_consts
            used = [k for k in kinds if k != "none"]
            _, bwd, _, ref_residuals = _core.vjp(self.program, diff, used)
            if list(ref_residuals) != list(self.ref_residuals):
                raise RuntimeError("refjit.vjp: internal: the backward programs disagree on "
                                   "the refs they take again")
            exe = _executable(bwd, [], self.interpret, exact_orders=self.exact_orders)
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
        NumPy array or a ``jax.Ref`` (a pytree of them for a pytree argument) that the
        gradient is added into (``+=``, in place; its slot holds that array or ref)."""
        n = len(self._core.arg_trees) - self._core.hidden
        if len(entries) != n:
            raise _ref_error("E3", f"with_refs: {len(entries)} entries for a function of {n} "
                                    "argument(s); give one per argument")
        return VjpFunction(self._core, tuple(entries) + (DontWant,) * self._core.hidden)

    def _leaf_entries(self):
        """Per flat leaf: ("value"|"dont_want"|"ref"|"none", accumulator or None[, the
        jax.Ref an accumulator array is the value of])."""
        core = self._core
        per_leaf = []
        entries = self._entries or ((GradValue,) * (len(core.arg_trees) - core.hidden) +
                                    (DontWant,) * core.hidden)
        seen = {}
        for a, (entry, tree, rng) in enumerate(zip(entries, core.arg_trees, core.arg_ranges)):
            if entry is GradValue or entry is DontWant:
                leaf_entries = [entry] * len(rng)
            else:
                leaf_entries, e_tree = tree_util.tree_flatten(
                    entry, is_leaf=lambda x: x is GradValue or x is DontWant)
                if e_tree != tree:
                    raise _ref_error("E3", f"with_refs: the entry for argument {a} has the "
                                            f"structure {e_tree}, the argument {tree}")
            for k, e in zip(rng, leaf_entries):
                primal = core.arrays[k]
                if not _is_inexact(primal.dtype) or is_ref(core.leaves[k]):
                    per_leaf.append(("none", None, None))
                elif e is GradValue:
                    per_leaf.append(("value", None, None))
                elif e is DontWant:
                    per_leaf.append(("dont_want", None, None))
                else:
                    ref = None
                    if is_ref(e):  # a jax.Ref accumulator: its value, written back after
                        ref, e = e, ref_value(e)
                    if (not isinstance(e, np.ndarray) or e.dtype != primal.dtype
                            or e.shape != primal.shape):
                        raise _ref_error("E6", f"with_refs: the gradient ref for argument {a} "
                                                f"must be a NumPy array {primal.dtype}"
                                                f"{list(primal.shape)}, got "
                                                f"{_describe(e)}")
                    key = id(ref if ref is not None else e)
                    if key in seen:
                        raise _ref_error("E7", f"with_refs: the same array is bound for "
                                                f"arguments {seen[key]} and {a}")
                    seen[key] = a
                    per_leaf.append(("ref", e, ref))
        return per_leaf

    def _staged_accumulation(self, ct):
        """The backward pass staged into an enclosing JAX trace (a scan body) with jax.Ref
        accumulators: the gradients come out as values and are added into the refs by JAX's
        own ref ops, which that trace orders with its other effects. None without refs."""
        is_marker = lambda x: x is GradValue or x is DontWant  # noqa: E731
        core = self._core
        # An argument without a float leaf has no gradient: its entry is not looked at.
        entries = tuple(
            e if any(_is_inexact(core.arrays[k].dtype) for k in rng) else DontWant
            for e, rng in zip(self._entries, core.arg_ranges))
        leaves = tree_util.tree_leaves(entries, is_leaf=is_marker)
        if not any(isinstance(x, jax.Ref) for x in leaves):
            return None
        if any(not is_marker(x) and not isinstance(x, jax.Ref) for x in leaves):
            raise NotImplementedError(
                "refjit.vjp: a NumPy accumulator cannot take gradients computed inside a JAX "
                "trace (a scan or vmap body); pass a jax.Ref")
        as_value = lambda x: GradValue if isinstance(x, jax.Ref) else x  # noqa: E731
        as_values = tuple(tree_util.tree_map(as_value, e, is_leaf=is_marker) for e in entries)
        grads = VjpFunction(core, as_values)(ct)
        results = []
        for entry, g in zip(entries, grads):
            if is_marker(entry):
                results.append(g)
                continue
            e_leaves, tree = tree_util.tree_flatten(entry, is_leaf=is_marker)
            g_leaves = tree_util.tree_leaves(g, is_leaf=lambda x: x is None)
            out = []
            for e, v in zip(e_leaves, g_leaves):
                if isinstance(e, jax.Ref):
                    jax.ref.addupdate(e, ..., v)  # one `+=` eqn in the enclosing trace
                    out.append(e)
                else:
                    out.append(v)
            results.append(tree_util.tree_unflatten(tree, out))
        return tuple(results)

    def __call__(self, ct):
        core = self._core
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != core.out_tree:
            raise TypeError(f"refjit.vjp: the cotangent's structure {ct_tree} does not match "
                            f"the output's {core.out_tree}")
        cts = []
        for k, (c, (dtype, shape, _, _)) in enumerate(zip(ct_leaves, core.out_types)):
            a = as_input(c, jax.numpy.dtype(dtype))
            if a.shape != tuple(shape):
                raise _ref_error("E6", f"refjit.vjp: cotangent {k} has shape {a.shape} but "
                                        f"output {k} has shape {tuple(shape)}")
            cts.append(a)
        for dtype, shape, _, _ in core.out_types[len(cts):]:  # has_aux: the aux outputs
            cts.append(np.zeros(shape, dtype=dtype))
        # Accumulating into refs while JAX traces the caller: staged, so that the refs are
        # updated when the traced program runs (each time), not once now.
        if self._entries is not None and (inside_jax_trace() or any(
                is_tracer(x) for x in list(core.residuals) + cts + tree_util.tree_leaves(
                    self._entries, is_leaf=lambda x: isinstance(x, jax.Ref)))):
            staged = self._staged_accumulation(ct)
            if staged is not None:
                return staged
        per_leaf = self._leaf_entries()
        kinds = tuple(k for k, _, _ in per_leaf)
        refs = [acc for k, acc, _ in per_leaf if k == "ref"]
        ref_values = [ref_value(r) for r in core.residual_refs]
        outs = core.backward(kinds)(core.residuals + ref_values + refs + cts)
        for r, v in zip(core.residual_refs, ref_values):
            set_ref_value(r, v)
        for kind, acc, ref in per_leaf:
            if ref is not None:
                set_ref_value(ref, acc)
        values = iter(outs)
        results = []
        for tree, rng in zip(core.arg_trees, core.arg_ranges):
            leaves = []
            for k in rng:
                kind, acc, ref = per_leaf[k]
                if kind == "value":
                    leaves.append(next(values))
                elif kind == "ref":
                    leaves.append(acc if ref is None else ref)
                elif kind == "dont_want":
                    leaves.append(None)
                else:  # an integer argument: JAX's float0 zeros
                    leaves.append(np.zeros(core.arrays[k].shape, dtype=jax.dtypes.float0))
            results.append(tree_util.tree_unflatten(tree, leaves))
        return tuple(results[:len(results) - core.hidden])



def _ref_error(code: str, message: str) -> RefError:
    return RefError(message, code)


def _describe(x) -> str:
    if isinstance(x, np.ndarray):
        return f"{x.dtype}{list(x.shape)}"
    return type(x).__name__



def vjp(fun: Callable, *primals, has_aux: bool = False, backend: str = "native"):
    """``(fun(*primals), f_vjp)`` (``(out, f_vjp, aux)`` with ``has_aux``): runs the forward
    pass now and returns the reusable backward pass :class:`VjpFunction`."""
    leaves, arrays, key, in_tree = _flatten_call(fun, primals, {}, "refjit.vjp")
    interpret = _check_backend(backend)
    try:
        return _vjp(fun, primals, leaves, arrays, key, in_tree, has_aux, interpret)
    except ClosesOverTracerError:
        hoisted = hoist_closed_over_tracers(fun, primals, {})
        if hoisted is None:
            raise
    # The captured values become trailing primals whose cotangents nobody sees; the forward
    # and backward calls are staged into the enclosing trace.
    converted, values = hoisted
    all_primals = (*primals, *values)
    leaves, arrays, key, in_tree = _flatten_call(converted, all_primals, {}, "refjit.vjp")
    result = _vjp(converted, all_primals, leaves, arrays, key, in_tree, has_aux, interpret)
    result[1]._core.hidden = len(values)
    return result


def _vjp(fun, primals, leaves, arrays, key, in_tree, has_aux, interpret):
    def build():
        split = _loss_and_aux(has_aux, "refjit.vjp")
        traced = trace(fun, leaves, arrays, in_tree, lambda out: split(out), on_values=True)
        diff = [_is_inexact(a.dtype) and not is_ref(x) for x, a in zip(leaves, arrays)]
        diff += [False] * len(traced.ref_consts)
        forward, _, _, ref_residuals = _core.vjp(traced.program, diff, ["value"] * sum(diff))
        return (traced, _executable(forward, traced.consts, interpret,
                                    exact_orders=exact_orders(traced, derivative=True)),
                {}, tuple(ref_residuals))

    entry = _cached(fun, ("vjp", has_aux, in_tree, key, interpret), build)
    traced, forward_exe, backward_cache, ref_residuals = entry
    check_distinct_refs(leaves, traced.ref_consts, "refjit.vjp")
    staged = any(is_tracer(a) for a in arrays) or (
        (traced.ref_consts or traced.calls_host) and inside_jax_trace())
    if staged and traced.ref_consts and not any(is_ref(x) for x in leaves):
        # Staged into an enclosing trace, which reads and writes the refs the function
        # closes over (passed as themselves) when it runs.
        outs = forward_exe.stage(list(arrays) + list(traced.ref_consts))
    else:
        inputs, const_arrays = traced.primal_inputs(arrays)
        outs = forward_exe(inputs)
        write_back_refs(leaves, arrays, traced.ref_consts, const_arrays)
    out_tree = traced.out_tree
    n = out_tree.num_leaves
    (out, aux) = tree_util.tree_unflatten(out_tree, traced.wrap_keys(outs[:n]))
    # The backward pass differentiates the primary output only: aux gets zero cotangents.
    main_tree = tree_util.tree_structure(out)
    core = _VjpCore(fun, traced, leaves, arrays, [tree_util.tree_structure(p) for p in primals],
                    _leaf_ranges(primals), outs[n:], main_tree,
                    traced.program.output_types, interpret, backward_cache)
    # Refs the backward pass reads or writes again (a custom_vjp whose bwd stashes into a
    # ref): by position among the program's constvars, then its inputs (the arguments, then
    # the refs the function closes over).
    n_consts = len(traced.consts)
    inputs_refs = list(leaves) + list(traced.ref_consts)
    core.ref_residuals = tuple(ref_residuals)
    core.residual_refs = [inputs_refs[pos - n_consts] for pos in ref_residuals]
    f_vjp = VjpFunction(core)
    return (out, f_vjp, aux) if has_aux else (out, f_vjp)
