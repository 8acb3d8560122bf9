"""Tracing a function whose Python code needs the values of its arguments.

``jax.grad(f)(x)`` runs ``f`` eagerly, so ``if x > 0:`` or ``while err > tol:`` in ``f`` work
there: every array has a value. refjit compiles ``f`` instead, and ``jax.make_jaxpr`` cannot
answer ``bool(x > 0)``. For grad, vjp, jvp and linearize (not jit, which refuses as
``jax.jit`` does) refjit then traces ``f`` again with a trace whose tracers carry both:

- the value, computed eagerly by JAX, which answers Python's questions (``bool``, ``int``,
  ``float``, indexing with an array); and
- the staged variable of an enclosing ``jax.make_jaxpr``, which records the computation.

The jaxpr that comes out is ``f`` with its Python decisions fixed to those the arguments
made: refjit compiles and runs it (the eager values only steered the Python code), and
compiles again at the next call, as the next arguments may steer it elsewhere.

Refs are not mutated twice: the eager side works on copies of the function's refs.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
from jax import tree_util
from jax._src import core

from ._tracing import is_ref


class _ValueTracer(core.Tracer):
    """A value (for Python's questions) and its staged variable (for the jaxpr)."""

    __slots__ = ("_concrete", "_staged")

    def __init__(self, trace: "_ValueTrace", concrete, staged):
        super().__init__(trace, core.typeof(staged))
        self._concrete = concrete
        self._staged = staged

    def to_concrete_value(self):
        return self._concrete


class _ValueTrace(core.Trace):
    """Runs each primitive twice: eagerly on the values, and staged into ``parent`` (the
    trace of ``jax.make_jaxpr``)."""

    def __init__(self, parent: core.Trace):
        super().__init__()
        self.parent = parent
        self.requires_low = False
        self._ref_copies: dict[int, Any] = {}

    # -- the two halves of an operand ------------------------------------------------------

    def _concrete(self, x):
        if isinstance(x, _ValueTracer) and x._trace is self:
            return x._concrete
        if is_ref(x):  # a ref the function closes over: the eager side writes a copy
            copy = self._ref_copies.get(id(x))
            if copy is None:
                copy = self._ref_copies[id(x)] = (x, jax.new_ref(x[...]))
            return copy[1]
        return x

    def _staged(self, x):
        if isinstance(x, _ValueTracer) and x._trace is self:
            return x._staged
        return x

    def _pair(self, concrete, staged, multiple: bool):
        if not multiple:
            return _ValueTracer(self, concrete, staged)
        return [_ValueTracer(self, c, s) for c, s in zip(concrete, staged)]

    # -- what a Trace processes --------------------------------------------------------------

    def process_primitive(self, primitive, tracers, params, /):
        concrete = [self._concrete(x) for x in tracers]
        staged = [self._staged(x) for x in tracers]
        with core.set_current_trace(core.eval_trace):
            out_concrete = core.eval_trace.process_primitive(primitive, concrete, params)
        with core.set_current_trace(self.parent):
            out_staged = self.parent.process_primitive(primitive, staged, params)
        return self._pair(out_concrete, out_staged, primitive.multiple_results)

    def process_call(self, call_primitive, f, tracers, params, /):
        with core.set_current_trace(self):
            return f.call_wrapped(*tracers)

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, /, *, symbolic_zeros):
        # The rule is staged with the function (so refjit differentiates with it); the eager
        # side only needs the function's value.
        return self._custom_call(fun, tracers, lambda staged: self.parent.process_custom_jvp_call(
            primitive, fun, jvp, staged, symbolic_zeros=symbolic_zeros))

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, /, *, out_trees,
                                symbolic_zeros):
        return self._custom_call(fun, tracers, lambda staged: self.parent.process_custom_vjp_call(
            primitive, fun, fwd, bwd, staged, out_trees=out_trees, symbolic_zeros=symbolic_zeros))

    def _custom_call(self, fun, tracers, stage):
        """A custom_jvp or custom_vjp call: ``fun`` run eagerly on the values, then the call
        staged by ``stage`` (given the staged operands). JAX's wrappers keep the output
        structure in stores that are filled once per run: emptied between the two runs."""
        concrete = [self._concrete(x) for x in tracers]
        with core.set_current_trace(core.eval_trace):
            out_concrete = fun.call_wrapped(*concrete)
        _reset_stores(fun)
        staged = [self._staged(x) for x in tracers]
        with core.set_current_trace(self.parent):
            out_staged = stage(staged)
        return self._pair(out_concrete, out_staged, True)

    def process_map(self, *args, **kwargs):
        raise NotImplementedError("refjit: pmap inside a function traced on its values")

    def cur_qdd(self, x):
        with core.set_current_trace(self.parent):
            return core.cur_qdd(self._staged(x))


def _reset_stores(fun) -> None:
    for store in getattr(fun, "stores", ()):
        if store is not None:
            store.reset()


def make_jaxpr_on_values(fun: Callable, args: Sequence[Any], kwargs: dict):
    """``jax.make_jaxpr(fun)(*args, **kwargs)`` for a ``fun`` whose Python code asks for
    its arguments' values: they are answered with the values of ``args`` and ``kwargs``."""
    values, in_tree = tree_util.tree_flatten((tuple(args), kwargs))
    # The eager side works on copies of ref arguments (the compiled program writes them).
    values = [jax.new_ref(v[...]) if is_ref(v) else v for v in values]

    def staged_fun(*staged_args, **staged_kwargs):
        staged, _ = tree_util.tree_flatten((staged_args, staged_kwargs))
        with core.take_current_trace() as parent:
            trace = _ValueTrace(parent)
        tracers = [_ValueTracer(trace, v, s) for v, s in zip(values, staged)]
        call_args, call_kwargs = tree_util.tree_unflatten(in_tree, tracers)
        with core.set_current_trace(trace):
            outs = fun(*call_args, **call_kwargs)
        return [trace._staged(o) for o in outs]

    return jax.make_jaxpr(staged_fun)(*args, **kwargs)
