"""A refjit program as something to call: compiled code on arrays, or, when the arguments are
JAX tracers (a refjit transformation used inside a function that is being traced, e.g.
``refjit.grad(refjit.grad(f))`` or ``refjit.jit(lambda x: refjit.vjp(f, x)[1](x))``), one
equation of the enclosing trace that holds the program.

That equation is the primitive ``refjit_call``. It prints as a ``jit`` whose ``jaxpr`` is the
program's text; where refjit prints the trace to read it back, the ``jaxpr`` names the program
(``jit[name=refjit_grad_f_3 jaxpr=refjit_grad_f_3]``) and refjit's parser is given the
program under that name (``staged_programs``), so when refjit traces the enclosing
function it transforms the inner program like any jit body: the outer derivative
differentiates the inner derivative program refjit derived, not JAX's.

JAX's own transformations of the eqn use refjit's programs too: ``jax.vmap`` refjit's vmap
of the program, ``jax.jvp`` / ``jax.grad`` refjit's linearize (its linear part a
``refjit_linear_call``, which JAX transposes with refjit's transpose), and code XLA compiles
(``jax.jit``) calls refjit's compiled code as the custom call ``refjit_call``.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from typing import Any, Sequence

import jax
import numpy as np
from jax.extend import core as jcore

from . import _core
from ._array import NUMPY_ARRAYS
from ._errors import Error

NOT_DIFFERENTIABLE_AGAIN = (
    "cannot differentiate this refjit derivative program again: it is JAX's derivative to "
    "the order taken so far only (a custom rule inside calls custom functions nested deeper "
    "than refjit traces their rules). Take the inner "
    "derivative with JAX (jax.grad, jax.jvp) and let refjit compile the outer one")

_names = itertools.count()


class Program:
    """A refjit program with its constants: ``program(inputs)`` runs it (compiling it on
    the first call with arrays) or stages it (when an input is a tracer)."""

    def __init__(self, program, consts: Sequence, interpret: bool,
                 donated: Sequence[bool] = (), exact_math: bool = False, name: str = "f",
                 exact_orders: float = float("inf")):
        self.program = program
        self.exact_orders = exact_orders  # _common.exact_orders
        self.consts = list(consts)
        self.interpret = interpret
        self.donated = list(donated)
        self.exact_math = exact_math
        self.name = name
        self._executable = None
        self._staged = None

    @property
    def executable(self):
        if self._executable is None:
            self._executable = _core.Executable(
                self.program, self.consts, interpret=self.interpret, donated=self.donated,
                exact_math=self.exact_math)
        return self._executable

    def __call__(self, inputs: Sequence) -> list:
        for x in inputs:  # (a loop, not any(): this runs per leaf of every call)
            if type(x) not in NUMPY_ARRAYS and isinstance(x, jax.core.Tracer):
                return self.stage(inputs)
        return self.executable(list(inputs))

    def stage(self, inputs: Sequence, num_nonlinear: int | None = None) -> list:
        """One ``refjit_call`` eqn in the enclosing trace; the constants become operands.
        With ``num_nonlinear``, a program without constants that is linear in its inputs
        after the first ``num_nonlinear`` is staged as a ``refjit_linear_call``, which JAX
        can transpose (``jax.linear_transpose`` of linearize's ``f_jvp``)."""
        if self._staged is None:
            closed = _core.consts_to_inputs(self.program, list(range(len(self.consts))))
            self._staged = StagedProgram(closed, f"refjit_{self.name}_{next(_names)}",
                                         self.exact_orders)
        if num_nonlinear is not None and not self.consts:
            return refjit_linear_call_p.bind(*inputs, program=self._staged,
                                             num_nonlinear=num_nonlinear)
        return refjit_call_p.bind(*inputs, *self.consts, program=self._staged)


def is_tracer(x: Any) -> bool:
    # A NumPy array (every argument of an ordinary call) is answered without JAX's Tracer
    # metaclass check, which costs microseconds per call.
    return type(x) not in NUMPY_ARRAYS and isinstance(x, jax.core.Tracer)


def inside_jax_trace() -> bool:
    """Whether a JAX transformation is tracing the caller (jax.jit, make_jaxpr, a refjit
    trace): a refjit call that updates refs or calls the host must then be staged into that
    trace, so that it happens when the traced program runs, not once now."""
    from jax._src import core as jax_core

    return not isinstance(jax_core.trace_ctx.trace, jax_core.EvalTrace)


def as_input(x: Any, dtype) -> Any:
    """``x`` as an input of dtype ``dtype``: a C-contiguous NumPy array, or the tracer."""
    if is_tracer(x):
        return x if x.dtype == dtype else jax.lax.convert_element_type(x, dtype)
    return np.asarray(x, dtype=dtype, order="C")


class StagedProgram:
    """The ``program`` param of a ``refjit_call`` eqn: a refjit program without constants,
    and the programs derived from it for JAX's transformations of the eqn (each derived
    once). Printed, it is its name; compared, it is itself (JAX hashes params)."""

    def __init__(self, program, name: str, exact_orders: float = float("inf")):
        self.program = program
        self.name = name
        # How many more times it may be differentiated (_common.exact_orders): 0 refuses.
        self.exact_orders = exact_orders
        self._executable = None
        self._derived: dict = {}
        self.out_avals = [
            jax.core.ShapedArray(tuple(shape), jax.numpy.dtype(dtype))
            for dtype, shape, _, _ in program.output_types
        ]
        self.in_refs = [is_ref for _, _, is_ref, _ in program.input_types]
        self.in_dtypes = [jax.numpy.dtype(dtype) for dtype, _, _, _ in program.input_types]

    def __str__(self) -> str:
        # Where refjit prints a trace to parse it, the program's name (the parser is given the
        # program itself under it: staged_programs); for anyone else, its text.
        return self.name if _printing_for_refjit.active else self.program.text

    def executable(self):
        if self._executable is None:
            self._executable = _core.Executable(self.program, [])
        return self._executable

    def _derive(self, key, make):
        if key not in self._derived:
            self._derived[key] = make()
        return self._derived[key]

    def linearized(self, differentiated: tuple):
        """(primal, linear, num_residuals): refjit's linearize of the program."""
        def make():
            primal, linear, nres = _core.linearize(self.program, list(differentiated))
            once = self.exact_orders - 1  # both are this program differentiated once
            return (StagedProgram(primal, f"{self.name}_primal", once),
                    StagedProgram(linear, f"{self.name}_linear", once), nres)
        return self._derive(("linearize", differentiated), make)

    def transposed(self, num_nonlinear: int, kinds: tuple):
        return self._derive(("transpose", num_nonlinear, kinds), lambda: StagedProgram(
            _core.transpose(self.program, num_nonlinear, list(kinds)), f"{self.name}_T",
            self.exact_orders))

    def discharged(self):
        """The program with its ref inputs taken as values: its outputs, then each ref
        input's final value (JAX discharging the refs of a jax.jit function)."""
        return self._derive("discharge", lambda: StagedProgram(
            _core.discharge(self.program), f"{self.name}_discharged", self.exact_orders))

    def batched(self, in_batched: tuple, size: int):
        """(program, out_batched): refjit's vmap of the program."""
        def make():
            program, out_batched = _core.vmap(self.program, list(in_batched), size)
            return (StagedProgram(program, f"{self.name}_batched", self.exact_orders),
                    tuple(out_batched))
        return self._derive(("vmap", in_batched, size), make)


class _PrintingForRefjit(threading.local):
    active = False


_printing_for_refjit = _PrintingForRefjit()


@contextlib.contextmanager
def printing_for_refjit():
    """While active (in this thread), staged programs print as their names."""
    before = _printing_for_refjit.active
    _printing_for_refjit.active = True
    try:
        yield
    finally:
        _printing_for_refjit.active = before


def printing_for_refjit_active() -> bool:
    """Whether this thread is printing a trace for refjit to read."""
    return _printing_for_refjit.active


def staged_programs(jaxpr) -> list[tuple[str, Any]]:
    """(name, program) of every refjit program staged anywhere inside ``jaxpr``."""
    found: dict[str, Any] = {}

    def walk(j):
        for eqn in j.eqns:
            for v in eqn.params.values():
                for sub in v if isinstance(v, (tuple, list)) else (v,):
                    if isinstance(sub, StagedProgram):  # refjit_call's, a custom_vjp's fwd
                        found[sub.name] = sub.program
                        continue
                    inner = getattr(sub, "jaxpr", sub)
                    if hasattr(inner, "eqns"):
                        walk(inner)

    walk(jaxpr)
    return list(found.items())


# refjit_call: the program applied to its operands. refjit_linear_call: the same, for a
# program linear in its operands after the first `num_nonlinear` (the tangent part of a
# refjit_call's JVP), which JAX may transpose.
refjit_call_p = jcore.Primitive("refjit_call")
refjit_call_p.multiple_results = True
refjit_linear_call_p = jcore.Primitive("refjit_linear_call")
refjit_linear_call_p.multiple_results = True
_CALLS = (refjit_call_p, refjit_linear_call_p)


def _abstract_eval(*avals, program: StagedProgram, **_):
    # A ref operand is read and written by the call (so JAX neither drops a call whose
    # results are unused nor reorders it around other accesses of that ref).
    from jax._src.state.types import ReadEffect, WriteEffect

    effects = set()
    for i, is_ref in enumerate(program.in_refs):
        if is_ref:
            effects |= {ReadEffect(i), WriteEffect(i)}
    return program.out_avals, effects


def _discharge(in_avals, out_avals, *args, program: StagedProgram, **_):
    """JAX's state discharge of a call taking refs (jax.jit of a function that passes a
    jax.Ref to a refjit function): the discharged program on the refs' values, whose extra
    results are the refs' new values."""
    discharged = program.discharged()
    results = refjit_call_p.bind(*args, program=discharged)
    n = len(program.out_avals)
    finals = iter(results[n:])
    return [next(finals) if is_ref else None for is_ref in program.in_refs], results[:n]


def _impl(*args, program: StagedProgram, **_):
    if any(program.in_refs):
        # jax.Refs given to the eqn outside any trace (JAX's eager vmap): the discharged
        # program on their values, the new values written back.
        values = [a[...] if is_ref else a for a, is_ref in zip(args, program.in_refs)]
        new_values, outs = _discharge(None, None, *values, program=program)
        for a, value in zip(args, new_values):
            if value is not None:
                a[...] = value
        return outs
    # Python scalars reach here as themselves (weakly typed): give them the program's dtypes.
    arrays = [np.asarray(a, dtype=d, order="C") for a, d in zip(args, program.in_dtypes)]
    return program.executable()(arrays)


def _is_inexact(aval) -> bool:
    return jax.dtypes.issubdtype(aval.dtype, np.inexact)


def _jvp(primals, tangents, *, program: StagedProgram, **_):
    """refjit's linearize of the program: the primal part now, the tangent part as a
    refjit_linear_call that JAX may transpose (jax.grad of a refjit function)."""
    from jax._src.interpreters import ad

    diff = tuple(type(t) is not ad.Zero for t in tangents)
    if any(program.in_refs):
        raise Error("jax.jvp / jax.grad of a refjit function that takes a jax.Ref is not "
                    "supported; apply refjit's transformation instead")
    if not any(diff):
        outs = refjit_call_p.bind(*primals, program=program)
        return outs, [ad.Zero(a.to_tangent_aval()) for a in program.out_avals]
    if program.exact_orders < 1:
        raise Error(NOT_DIFFERENTIABLE_AGAIN)
    primal, linear, nres = program.linearized(diff)
    outs_res = refjit_call_p.bind(*primals, program=primal)
    n = len(program.out_avals)
    outs, residuals = outs_res[:n], outs_res[n:]
    lin_tangents = [ad.instantiate_zeros(t) for t, d in zip(tangents, diff) if d]
    t_outs = refjit_linear_call_p.bind(*residuals, *lin_tangents, program=linear,
                                       num_nonlinear=nres)
    return outs, [t if _is_inexact(a) else ad.Zero(a.to_tangent_aval())
                  for t, a in zip(t_outs, program.out_avals)]


def _linear_transpose(cts, *args, program: StagedProgram, num_nonlinear: int):
    from jax._src.interpreters import ad

    residuals, linear_args = args[:num_nonlinear], args[num_nonlinear:]
    if any(ad.is_undefined_primal(r) for r in residuals):
        raise Error("refjit: a residual of a linear refjit call is itself being transposed")
    kinds = tuple("value" if ad.is_undefined_primal(x) else "dont_want" for x in linear_args)
    cts = [ad.instantiate_zeros(ct) if type(ct) is ad.Zero else ct for ct in cts]
    cts = [jax.numpy.zeros(a.shape, a.dtype) if ct is None else ct
           for ct, a in zip(cts, program.out_avals)]
    grads = iter(refjit_call_p.bind(*residuals, *cts,
                                    program=program.transposed(num_nonlinear, kinds)))
    return [None] * num_nonlinear + [next(grads) if k == "value" else None for k in kinds]


def _batch(prim):
    def rule(args, dims, *, program: StagedProgram, **params):
        # An unmapped operand's dim is None (JAX's batching.not_mapped).
        size = next(x.shape[d] for x, d in zip(args, dims) if d is not None)
        for is_ref, d in zip(program.in_refs, dims):
            if is_ref and d not in (None, 0):
                raise Error(f"jax.vmap of a refjit function: a jax.Ref argument batched along "
                            f"dim {d} cannot be passed; batch it along dim 0 (in_axes=0)")
        args = [x if d in (None, 0) else jax.numpy.moveaxis(x, d, 0)
                for x, d in zip(args, dims)]
        in_batched = tuple(d is not None for d in dims)
        batched, out_batched = program.batched(in_batched, size)
        outs = prim.bind(*args, program=batched, **params)
        return outs, [0 if b else None for b in out_batched]
    return rule


def _lower(ctx, *args, program: StagedProgram, **_):
    """Inside a program XLA compiles (jax.jit, or a lax loop run eagerly), the refjit program
    runs as XLA's custom call ``refjit_call`` (python/src/xla_ffi.cpp): XLA's compiled code
    calls refjit's compiled code on its own buffers, without Python. A build without jaxlib's
    headers runs it as a host callback instead."""
    from jax._src.interpreters import mlir

    if any(program.in_refs):  # JAX discharges refs before lowering; this is a safeguard
        raise Error("internal: a refjit call still takes a jax.Ref when XLA compiles it")
    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in program.out_avals]
    if _core.have_xla_ffi() and ctx.module_context.platforms == ("cpu",):
        _register_ffi_target()
        call = jax.ffi.ffi_call("refjit_call", shapes)
        program_id = np.int64(program.executable().ffi_id)
        fun = lambda *xs: list(call(*xs, program=program_id))  # noqa: E731
    else:
        def host(*arrays):
            return tuple(_impl(*arrays, program=program))

        fun = lambda *xs: list(jax.pure_callback(host, shapes, *xs))  # noqa: E731
    return mlir.lower_fun(fun, multiple_results=True)(ctx, *args)


_ffi_registered = False


def _register_ffi_target() -> None:
    global _ffi_registered
    if not _ffi_registered:
        jax.ffi.register_ffi_target("refjit_call", _core.xla_ffi_handler(), platform="cpu")
        _ffi_registered = True


# Printed as the `jit` refjit's parser reads: `jit[name=N jaxpr=N]`, N naming the program
# (staged_programs gives the parser the programs by name).
_printed_as_jit = jcore.Primitive("jit")


def _pp_as_jit(eqn, context, settings):
    from jax._src import core as jax_core

    program = eqn.params["program"]
    params = {"name": program.name, "jaxpr": program}
    if program.exact_orders < 1 and _printing_for_refjit.active:
        # refjit's autodiff refuses to differentiate the call (passes/jaxpr_util.h).
        params["custom_rule_missing"] = "derivative_not_exact"
    shown = eqn.replace(primitive=_printed_as_jit, params=params)
    return jax_core._pp_eqn(shown, context, settings, params=list(params))


def _print_ref_kinds() -> None:
    """While printing for refjit, a ref type shows its kind (``Ref{f32[], no_grad_no_remat}``):
    JAX leaves it out of binders, and a ref argument's kind (a ``jax.new_ref(x,
    kind="no_grad_no_remat")`` passed in) is known nowhere else. JAX's own printing is
    unchanged."""
    from jax._src.state.types import AbstractRef

    plain = AbstractRef.str_short

    def str_short(self, *args, **kwargs):
        text = plain(self, *args, **kwargs)
        kind = getattr(self, "kind", None)
        if not _printing_for_refjit.active or kind is None or not text.endswith("}"):
            return text
        return f"{text[:-1]}, {kind}}}"

    AbstractRef.str_short = str_short


def _register() -> None:
    from jax._src import core as jax_core
    from jax._src.interpreters import ad, batching, mlir
    from jax._src.state import discharge as state_discharge

    _print_ref_kinds()

    for prim in _CALLS:
        prim.def_effectful_abstract_eval(_abstract_eval)
        prim.def_impl(_impl)
        jax_core.pp_eqn_rules[prim] = _pp_as_jit
        ad.primitive_jvps[prim] = _jvp
        batching.primitive_batchers[prim] = _batch(prim)
        mlir.register_lowering(prim, _lower)
    ad.primitive_transposes[refjit_linear_call_p] = _linear_transpose
    state_discharge.register_discharge_rule(refjit_call_p)(_discharge)


_register()
