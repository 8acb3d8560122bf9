"""refjit.grad and refjit.value_and_grad: refjit's reverse mode on a JAX function."""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import tree_util

from . import _core
from ._common import (exact_orders, _argnums_tuple, _check_backend, _cached, _executable, _flatten_call,
                      _is_inexact, _leaf_ranges, _loss_and_aux, hoist_closed_over_tracers)
from ._staging import inside_jax_trace, is_tracer
from ._tracing import (ClosesOverTracerError, check_distinct_refs, is_ref, leaf_names, trace,
                       write_back_refs)

class _Grad:
    def __init__(self, fun, argnums, has_aux, with_value, backend, exact_math, holomorphic):
        self._fun = fun
        self._argnums = argnums
        self._has_aux = has_aux
        self._holomorphic = holomorphic
        self._with_value = with_value
        self._interpret = _check_backend(backend)
        self._exact_math = exact_math
        self._what = "refjit.value_and_grad" if with_value else "refjit.grad"
        # updated=(): fun's __dict__ would overwrite these fields when fun is itself a
        # refjit function (refjit.grad(refjit.grad(f))).
        functools.update_wrapper(self, fun, updated=())

    def __call__(self, *args, **kwargs):
        leaves, arrays, key, in_tree = _flatten_call(self._fun, args, kwargs, self._what)
        nums = _argnums_tuple(self._argnums, len(args), self._what)
        try:
            entry = _cached(self._fun, ("grad", self._has_aux, nums, in_tree, key,
                                        self._interpret, self._exact_math, self._holomorphic),
                            lambda: self._compile(leaves, arrays, in_tree, args, kwargs, nums))
        except ClosesOverTracerError:
            hoisted = hoist_closed_over_tracers(self._fun, args, kwargs)
            if hoisted is None:
                raise
            # The captured values become arguments after the user's (argnums still name the
            # user's), and the call is staged into the enclosing trace.
            converted, values = hoisted
            again = _Grad(converted, nums if not isinstance(self._argnums, int) else nums[0],
                          self._has_aux, self._with_value, "interpreter" if self._interpret
                          else "native", self._exact_math, self._holomorphic)
            return again(*args, *values, **kwargs)
        executable, traced, num_out, grad_trees = entry
        out_tree = traced.out_tree
        check_distinct_refs(leaves, traced.ref_consts, self._what)
        if any(is_tracer(a) for a in arrays) or (
                (traced.ref_consts or traced.calls_host) and inside_jax_trace()):
            # Staged into an enclosing trace, which reads and writes the refs the function
            # closes over (passed as themselves) when it runs (refjit.jit does the same).
            ins = [x if is_ref(x) else a for x, a in zip(leaves, arrays)]
            outs = executable.stage(ins + list(traced.ref_consts))
        else:
            inputs, const_arrays = traced.primal_inputs(arrays)
            outs = executable(inputs)
            write_back_refs(leaves, arrays, traced.ref_consts, const_arrays)
        value_and_aux = tree_util.tree_unflatten(out_tree, traced.wrap_keys(outs[:num_out]))
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
                       _loss_and_aux(self._has_aux, self._what), on_values=True)
        loss_types = traced.program.output_types
        dtype, shape, _, _ = loss_types[0]
        # As JAX's grad: a real scalar, or with holomorphic=True a complex one.
        want = np.complexfloating if self._holomorphic else np.floating
        if shape != () or not jax.dtypes.issubdtype(jnp.dtype(dtype), want):
            raise TypeError(f"{self._what}({traced.name}): the function must return a "
                            f"{'complex' if self._holomorphic else 'real float'} scalar"
                            f"{' (then its aux)' if self._has_aux else ''}, not {dtype}"
                            f"{list(shape)}"
                            + ("; for a complex one pass holomorphic=True"
                               if not self._holomorphic and 'complex' in dtype else ""))
        ranges = _leaf_ranges(args)
        wrt = []
        names = None
        for n in nums:
            for k in ranges[n]:
                if is_ref(leaves[k]):
                    names = names or leaf_names(self._fun, args, kwargs)
                    raise TypeError(f"{self._what}({traced.name}): {names[k]} is a jax.Ref; "
                                    "refs are updated, not differentiated: pass its value, "
                                    "or leave it out of argnums")
                if not _is_inexact(arrays[k].dtype) or (
                        self._holomorphic and
                        not jax.dtypes.issubdtype(arrays[k].dtype, np.complexfloating)):
                    names = names or leaf_names(self._fun, args, kwargs)
                    raise TypeError(f"{self._what}({traced.name}): {names[k]} has dtype "
                                    f"{arrays[k].dtype}; only "
                                    f"{'complex' if self._holomorphic else 'float or complex'}"
                                    " arguments can be differentiated"
                                    f"{' with holomorphic=True' if self._holomorphic else ''}")
                wrt.append(k)
        num_out = len(loss_types)
        program = _core.grad(traced.program, wrt, num_out - 1, traced.consts)
        executable = _executable(program, traced.consts, self._interpret,
                                 exact_math=self._exact_math,
                                 exact_orders=exact_orders(traced, derivative=True))
        grad_trees = [tree_util.tree_structure(args[n]) for n in nums]
        return executable, traced, num_out, grad_trees


def grad(fun: Callable, argnums=0, has_aux: bool = False, holomorphic: bool = False, *,
         backend: str = "native", exact_math: bool = False):
    """The gradient of ``fun`` (a real scalar function; a complex one with
    ``holomorphic=True``, whose arguments are then complex) with respect to the arguments
    ``argnums`` (an int or a tuple), computed by refjit's reverse mode. For a complex argument
    it is JAX's gradient: the cotangent 1 pulled back through the linear map, unconjugated. With
    ``has_aux=True``, ``fun`` returns ``(loss, aux)`` and the result is ``(grad, aux)``."""
    return _Grad(fun, argnums, has_aux, False, backend, exact_math, holomorphic)


def value_and_grad(fun: Callable, argnums=0, has_aux: bool = False,
                   holomorphic: bool = False, *, backend: str = "native",
                   exact_math: bool = False):
    """Like :func:`grad`, returning ``(value, grad)`` (``((value, aux), grad)`` with
    ``has_aux``)."""
    return _Grad(fun, argnums, has_aux, True, backend, exact_math, holomorphic)
