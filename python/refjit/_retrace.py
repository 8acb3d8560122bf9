"""A second trace, for what JAX's printout of a jaxpr leaves out.

- Constants captured by nested jaxprs: a ``jax.jit`` function that closes over a NumPy array
  (the seed's ``np.arange`` index vector) becomes a ``jit`` eqn whose jaxpr has constvars of
  its own. JAX prints those constvars but not their values, so the text alone cannot be run.
- ``jax.custom_vjp`` rules: JAX prints a ``custom_vjp_call`` with its Python ``fwd`` and
  ``bwd`` functions by name only.

A function with either is traced again by evaluating its jaxpr with the nested jits inlined
and scan / cond / while bodies rebuilt through ``lax``: JAX then turns every captured constant
into a constvar of the top-level jaxpr (a scan or while const on the way), whose values
``ClosedJaxpr.consts`` holds. Each custom_vjp call becomes refjit's own form, whose rules are
jaxprs (``custom_vjp_call[call_jaxpr fwd_jaxpr bwd_jaxpr num_res]``, docs/primitives.md):
the fwd rule traced as JAX's vjp of the call (primal outputs, then the residuals), the bwd
rule as the residuals' pullback. Functions with neither are not traced again.
"""

from __future__ import annotations

import itertools
import math
import threading
from typing import Any, Sequence

import jax
import numpy as np
from jax import lax
from jax.extend import core as jcore


def _sub_jaxprs(params: dict):
    """The jaxprs among an eqn's params, each as (jaxpr, consts): closed ones (jit, scan,
    cond, while) and open ones (checkpoint's ``remat2``)."""
    for v in params.values():
        for item in v if isinstance(v, (tuple, list)) else (v,):
            if isinstance(item, jcore.ClosedJaxpr):
                yield item.jaxpr, item.consts
            elif isinstance(item, jcore.Jaxpr):
                yield item, ()


def needs_retrace(jaxpr: jcore.Jaxpr) -> bool:
    """Whether a jaxpr nested anywhere inside ``jaxpr`` has constants of its own, or a
    custom_vjp call with Python rules is inside it."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "custom_vjp_call" and eqn.primitive is not custom_vjp_p:
            return True
        if eqn.primitive.name == "custom_jvp_call" and eqn.primitive is not custom_jvp_p:
            return True
        for sub, consts in _sub_jaxprs(eqn.params):
            if consts or needs_retrace(sub):
                if eqn.primitive.name not in _RULES:
                    raise NotImplementedError(
                        f"refjit: a custom_vjp function or a captured array inside "
                        f"`{eqn.primitive.name}` is not supported yet")
                return True
    return False


def _read(env: dict, atom) -> Any:
    return atom.val if isinstance(atom, jcore.Literal) else env[atom]


def _evaluate(jaxpr: jcore.Jaxpr, consts: Sequence, *args, rules=None) -> list:
    """Evaluates ``jaxpr`` on tracers, inlining jits and rebuilding loops and conds with
    ``rules`` (primitive name -> rule; default: the custom_vjp rules become jaxprs)."""
    rules = _RULES if rules is None else rules
    env: dict = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        ins = [_read(env, a) for a in eqn.invars]
        ours = eqn.primitive is custom_vjp_p or eqn.primitive is custom_jvp_p
        rule = None if ours else rules.get(eqn.primitive.name)
        if rule is not None:
            outs = rule(eqn.primitive, eqn.params, ins, rules)
        else:
            outs = eqn.primitive.bind(*ins, **eqn.primitive.get_bind_params(eqn.params))
            if not eqn.primitive.multiple_results:
                outs = [outs]
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [_read(env, a) for a in jaxpr.outvars]


def _closed(closed: jcore.ClosedJaxpr, rules=None):
    return lambda *args: _evaluate(closed.jaxpr, closed.consts, *args, rules=rules)


def _jit(_, params, ins, rules):
    return _closed(params["jaxpr"], rules)(*ins)


def _scan(_, params, ins, rules):
    n_consts, n_carry = params["num_consts"], params["num_carry"]
    consts, init, xs = ins[:n_consts], ins[n_consts:n_consts + n_carry], ins[n_consts + n_carry:]
    body = _closed(params["jaxpr"], rules)

    def step(carry, x):
        outs = body(*consts, *carry, *x)
        return list(outs[:n_carry]), list(outs[n_carry:])

    carry, ys = lax.scan(step, list(init), list(xs), length=params["length"],
                         reverse=params["reverse"], unroll=params["unroll"])
    return [*carry, *ys]


def _cond(_, params, ins, rules):
    index, ops = ins[0], ins[1:]
    branches = [_closed(b, rules) for b in params["branches"]]
    return lax.switch(index, [lambda *o, b=b: b(*o) for b in branches], *ops)


def _checkpoint(_, params, ins, rules):
    body = lambda *args: _evaluate(params["jaxpr"], (), *args, rules=rules)
    return jax.checkpoint(body, prevent_cse=params["prevent_cse"],
                          policy=params["policy"])(*ins)


def _while(_, params, ins, rules):
    nc, nb = params["cond_nconsts"], params["body_nconsts"]
    cond_consts, body_consts, init = ins[:nc], ins[nc:nc + nb], ins[nc + nb:]
    cond, body = _closed(params["cond_jaxpr"], rules), _closed(params["body_jaxpr"], rules)
    out = lax.while_loop(lambda c: cond(*cond_consts, *c)[0],
                         lambda c: list(body(*body_consts, *c)), list(init))
    return list(out)


# refjit's custom_vjp_call: printed by JAX's generic printer as
# `custom_vjp_call[bwd_jaxpr={...} call_jaxpr={...} fwd_jaxpr={...} num_res=N]`, the form
# refjit's parser reads as its own primitive (the rules kept).
custom_vjp_p = jcore.Primitive("custom_vjp_call")
custom_vjp_p.multiple_results = True
custom_vjp_p.def_abstract_eval(lambda *avals, call_jaxpr, **_: call_jaxpr.out_avals)


def _is_ref_aval(aval) -> bool:
    return isinstance(aval, jax.ref.AbstractRef)


def _spec(aval):
    """What make_jaxpr traces an input of type ``aval`` from: a shape and dtype, or for a ref
    type a (fresh, zero) ref, so that the input is traced as a ref."""
    if _is_ref_aval(aval):
        inner = aval.inner_aval
        with jax.ensure_compile_time_eval():  # a concrete ref, not one of the enclosing trace
            return jax.new_ref(jax.numpy.zeros(inner.shape, inner.dtype))
    # Weak types kept: JAX converts a weakly typed value written into a ref of another dtype.
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _specs(avals):
    return [_spec(a) for a in avals]


def _custom_vjp(prim, params, ins, rules):
    """JAX's custom_vjp_call, its Python rules traced into jaxprs. Arrays the rules capture
    become extra operands (refjit's sub-jaxprs take no constants): the call and fwd rule
    take them after the call's operands, fwd passes the bwd rule's on as residuals, and bwd
    gives them zero cotangents, as it does the arrays the primal captured (JAX's num_consts
    leading operands, which a custom_vjp is not differentiated with respect to).

    The user's rules are called as JAX's own vjp would call them (the eqn's
    ``fwd_jaxpr_thunk``, ``bwd`` and ``out_trees``), so a ref operand gets the cotangent bwd
    returns for it: refjit's transpose adds it into the ref's cotangent when the ref holds a
    differentiated value, and drops it for a plumbing ref. A fwd rule may pass a ref operand
    on as a residual (the seed's stash-gradients pattern: bwd writes into it). JAX cannot
    trace a function returning a ref, so such a residual is left out of JAX's fwd jaxpr and
    put back into refjit's, as the fwd's own ref input (outputs_from_inputs)."""
    in_avals = params["call_jaxpr"].in_avals
    in_specs = _specs(in_avals)
    out_specs = _specs(params["call_jaxpr"].out_avals)
    n_consts = params["num_consts"]  # the call's leading operands: arrays its primal captured
    n_operands = len(in_avals) - n_consts
    user_fwd, user_fwd_consts = params["fwd_jaxpr_thunk"].call_wrapped(*[True] * n_operands)
    _, _, input_fwds = params["out_trees"]()  # per residual: the operand it is, or None
    n_out = len(params["call_jaxpr"].out_avals)
    n_new_res = sum(f is None for f in input_fwds)
    # The residuals that are ref operands: residual position -> operand position.
    ref_res = {k: f for k, f in enumerate(input_fwds)
               if f is not None and _is_ref_aval(in_avals[f])}
    for v in user_fwd.outvars[:n_new_res]:
        if _is_ref_aval(v.aval):  # JAX refuses it too (a ValueError)
            raise ValueError(
                "refjit: the custom_vjp fwd function returns a new ref as a residual; only "
                "the function's own ref arguments may be passed on to bwd")
    res_avals = [in_avals[f] if f is not None else None for f in input_fwds]
    new_res_avals = iter(v.aval for v in user_fwd.outvars[:n_new_res])
    res_avals = [a if a is not None else next(new_res_avals) for a in res_avals]

    def fwd(*args):
        outs = _evaluate(user_fwd, user_fwd_consts, *args[n_consts:], rules=_PRIMAL_RULES)
        new_res, primal_outs = iter(outs[:n_new_res]), outs[n_new_res:]
        residuals = [args[f] if f is not None else next(new_res) for f in input_fwds]
        return [*primal_outs, *[r for k, r in enumerate(residuals) if k not in ref_res]]

    def bwd(*args):
        residuals, cts = args[:len(res_avals)], args[len(res_avals):]
        operand_cts = params["bwd"].call_wrapped(*residuals, *cts)
        return [_zeros_for(a) if _is_symbolic_zero(ct) else ct
                for ct, a in zip(operand_cts, in_avals[n_consts:])]

    call_closed = jax.make_jaxpr(_closed(params["call_jaxpr"]))(*in_specs)
    fwd_closed = _trace_rule(lambda: _primal_only(jax.make_jaxpr(fwd)(*in_specs)))
    res_specs = _specs(res_avals)
    bwd_closed = _trace_bwd(bwd, res_specs, out_specs, params, in_avals[n_consts:])
    cc, fc, bc = list(call_closed.consts), list(fwd_closed.consts), list(bwd_closed.consts)
    n_in, n_res = len(ins), len(res_specs)
    extra = cc + fc + bc
    extra_specs = _specs([jax.typeof(x) for x in extra])
    bc_specs = extra_specs[len(cc) + len(fc):]

    def call_with_extra(*a):
        return _evaluate(call_closed.jaxpr, a[n_in:n_in + len(cc)], *a[:n_in])

    def fwd_with_extra(*a):
        ex = a[n_in:]
        outs = _evaluate(fwd_closed.jaxpr, ex[len(cc):len(cc) + len(fc)], *a[:n_in])
        return [*outs, *ex[len(cc) + len(fc):]]

    def bwd_with_extra(*a):
        res, consts, cts = a[:n_res], a[n_res:n_res + len(bc)], a[n_res + len(bc):]
        grads = _evaluate(bwd_closed.jaxpr, consts, *res, *cts)
        # An integer operand's cotangent is JAX's float0; refjit's is zeros of its dtype.
        grads = [_zeros_for(a) if g.dtype == jax.dtypes.float0 else g
                 for g, a in zip(grads, in_avals[n_consts:])]
        zeros = [_zeros_for(a) for a in in_avals[:n_consts]] + \
            [jax.numpy.zeros(e.shape, e.dtype) for e in extra_specs]
        return [*zeros[:n_consts], *grads, *zeros[n_consts:]]

    fwd_jaxpr = jax.make_jaxpr(fwd_with_extra)(*in_specs, *extra_specs)
    if ref_res:
        fwd_jaxpr = _with_ref_residuals(fwd_jaxpr, n_out, ref_res)
    return custom_vjp_p.bind(
        *ins, *extra,
        call_jaxpr=jax.make_jaxpr(call_with_extra)(*in_specs, *extra_specs),
        fwd_jaxpr=fwd_jaxpr,
        bwd_jaxpr=jax.make_jaxpr(bwd_with_extra)(*res_specs, *bc_specs, *out_specs),
        num_res=n_res + len(bc))


def _trace_bwd(bwd, res_specs, out_specs, params, operand_avals):
    """The bwd rule as a jaxpr. refjit traces it with the function, where JAX waits until a
    cotangent is needed. When tracing it fails, the forward pass must still work (JAX's does),
    so the jaxpr stands in for it: a host call that raises the error, then zero cotangents.
    Running a backward pass that needs the rule raises the error then (its type: a
    TypeError stays one); nothing computes with the zeros, since the raise stops the run."""
    try:
        return _trace_rule(lambda: _primal_only(jax.make_jaxpr(bwd)(*res_specs, *out_specs)))
    except Exception as e:
        name = getattr(params.get("bwd"), "__name__", None) or "bwd"
        message = (f"refjit: the backward pass needs this custom_vjp's bwd rule ({name}), "
                   f"which could not be traced: {e}")
        # Kept until a backward pass needs it, without the frames of this trace (they would
        # keep its objects alive).
        failure, cause, seen = e, e, set()
        while cause is not None and id(cause) not in seen:
            seen.add(id(cause))
            cause.with_traceback(None)
            cause = cause.__cause__ or cause.__context__

        def raise_it(*_):
            try:
                wrapped = type(failure)(message)
            except Exception:
                wrapped = RuntimeError(message)
            raise wrapped from failure

        raise_it.refjit_direct = True  # called as it is (_callbacks), JAX logs nothing

        def stand_in(*_):
            from jax._src import debugging

            debugging.debug_callback_p.bind(callback=raise_it, effect=debugging.debug_effect,
                                            partitioned=False)
            return [_zeros_for(a) for a in operand_avals]

        return jax.make_jaxpr(stand_in)(*res_specs, *out_specs)


def _zeros_for(aval):
    """Zeros of an operand's cotangent type (a ref's: its contents')."""
    inner = aval.inner_aval if _is_ref_aval(aval) else aval
    return jax.numpy.zeros(inner.shape, inner.dtype)


def _is_symbolic_zero(ct) -> bool:
    # JAX's bwd wrapper returns its symbolic Zero for a None cotangent.
    return type(ct).__name__ in ("Zero", "SymbolicZero")


def _with_ref_residuals(fwd_jaxpr, n_out: int, ref_res: dict):
    """refjit's fwd program from JAX's fwd jaxpr, which leaves out the ref residuals: each
    put back at its residual position as the fwd's own ref input. A staged program, printed
    by name (refjit's parser is given it: _staging.staged_programs)."""
    from . import _core
    from ._staging import StagedProgram, printing_for_refjit, staged_programs
    from ._tracing import parse

    with printing_for_refjit():
        text = str(fwd_jaxpr)
    program = parse(text, "<custom_vjp fwd rule>", staged_programs(fwd_jaxpr.jaxpr))
    pairs = sorted((n_out + k, operand) for k, operand in ref_res.items())
    return StagedProgram(_core.outputs_from_inputs(program, pairs), f"fwd_{next(_fwd_names)}")


_fwd_names = itertools.count()


# Custom rules are traced when the function is (JAX traces a rule when it differentiates).
# A rule may call custom functions itself (jax.nn.relu's JVP rule calls relu, slogdet's calls
# slogdet, the seed's fwd rules call the function they define): a custom_jvp call inside a rule
# keeps its own rule, down to kRuleDepth nested rules; deeper, and for every custom_vjp call
# inside a rule, the call is inlined as its primal computation, so the derivatives taken
# through it are the primal's. A derivative program is then exact to as many orders as
# rule levels were kept (exact_derivative_orders), and refjit refuses to differentiate it
# beyond that rather than give a derivative JAX would not.
_RULE_DEPTH_LIMIT = 3


class _RuleTracing(threading.local):
    depth = 0                # rule levels being traced around the current point
    inlined_at = math.inf    # the shallowest rule level where a custom call was inlined


_rule_tracing = _RuleTracing()


def start_exactness_tracking() -> tuple:
    """Starts counting for one function's trace; returns what to give end_exactness_tracking
    (a trace may run inside another's, as a refjit function called in a traced function)."""
    saved = (_rule_tracing.depth, _rule_tracing.inlined_at)
    _rule_tracing.depth = 0
    _rule_tracing.inlined_at = math.inf
    return saved


def end_exactness_tracking(saved: tuple) -> float:
    """How many orders of derivatives of the function just traced refjit computes as JAX
    would (math.inf when no custom call was inlined inside a rule); restores the enclosing
    trace's count."""
    orders = _rule_tracing.inlined_at
    _rule_tracing.depth, _rule_tracing.inlined_at = saved
    return orders


def _trace_rule(make):
    """``make()`` (the tracing of a rule) one rule level deeper."""
    _rule_tracing.depth += 1
    try:
        return make()
    finally:
        _rule_tracing.depth -= 1


def _primal_only(closed: jcore.ClosedJaxpr) -> jcore.ClosedJaxpr:
    """A rule's jaxpr, retraced if needed: the custom calls inside keep their rules or are
    inlined as their primal computation (see _RULE_DEPTH_LIMIT)."""
    if not needs_retrace(closed.jaxpr):
        return closed
    rules = _IN_RULE_RULES if _rule_tracing.depth < _RULE_DEPTH_LIMIT else _PRIMAL_RULES
    return _retrace_with(closed, rules)


def _inline_custom_call(_, params, ins, rules):
    _rule_tracing.inlined_at = min(_rule_tracing.inlined_at, _rule_tracing.depth)
    return _closed(params["call_jaxpr"], rules)(*ins)


# refjit's custom_jvp_call: `custom_jvp_call[call_jaxpr={...} jvp_jaxpr={...}]`, read by
# refjit's parser as a jit of call_jaxpr carrying jvp_jaxpr as its JVP rule.
custom_jvp_p = jcore.Primitive("custom_jvp_call")
custom_jvp_p.multiple_results = True
custom_jvp_p.def_abstract_eval(lambda *avals, call_jaxpr, **_: call_jaxpr.out_avals)


def _custom_jvp(prim, params, ins, rules):
    """JAX's custom_jvp_call, its Python rule traced into a jaxpr: JAX's own jvp of the call
    (which applies the user's rule) on the primals and one tangent per primal, giving the
    outputs then their tangents. Arrays the call or the rule capture become extra operands,
    which have no tangent of their own (zeros)."""
    in_avals = params["call_jaxpr"].in_avals
    if any(_is_ref_aval(a) for a in in_avals):
        raise NotImplementedError("refjit: a jax.custom_jvp function taking refs is not "
                                  "supported yet")
    n = len(in_avals)
    specs = _specs(in_avals)
    bind_params = prim.get_bind_params(params)

    def call(*xs):
        return prim.bind(*xs, **bind_params)

    def jvp(*primals_and_tangents):
        primals, tangents = primals_and_tangents[:n], primals_and_tangents[n:]
        # JAX's tangent of an integer or bool is float0; refjit's is zeros of its dtype.
        tangents = [t if _is_inexact(a) else np.zeros(a.shape, jax.dtypes.float0)
                    for t, a in zip(tangents, in_avals)]
        outs, out_tangents = jax.jvp(call, list(primals), tangents)
        out_tangents = [jax.numpy.zeros(o.shape, o.dtype) if t.dtype == jax.dtypes.float0
                        else t for o, t in zip(outs, out_tangents)]
        return [*outs, *out_tangents]

    call_closed = jax.make_jaxpr(_closed(params["call_jaxpr"], rules))(*specs)
    jvp_closed = _trace_rule(lambda: _primal_only(jax.make_jaxpr(jvp)(*specs, *specs)))
    cc, jc = list(call_closed.consts), list(jvp_closed.consts)
    extra = cc + jc
    extra_specs = _specs([jax.typeof(x) for x in extra])
    n_all = n + len(extra)

    def call_with_extra(*a):
        return _evaluate(call_closed.jaxpr, a[n:n + len(cc)], *a[:n])

    def jvp_with_extra(*a):
        primals, tangents = a[:n_all], a[n_all:]
        return _evaluate(jvp_closed.jaxpr, primals[n + len(cc):], *primals[:n], *tangents[:n])

    return custom_jvp_p.bind(
        *ins, *extra,
        call_jaxpr=jax.make_jaxpr(call_with_extra)(*specs, *extra_specs),
        jvp_jaxpr=jax.make_jaxpr(jvp_with_extra)(*specs, *extra_specs, *specs, *extra_specs))


def _is_inexact(aval) -> bool:
    return jax.numpy.issubdtype(aval.dtype, jax.numpy.inexact)


_RULES = {"jit": _jit, "pjit": _jit, "scan": _scan, "cond": _cond, "while": _while,
          "remat2": _checkpoint, "custom_jvp_call": _custom_jvp, "custom_vjp_call": _custom_vjp}
_PRIMAL_RULES = {**_RULES, "custom_vjp_call": _inline_custom_call,
                 "custom_jvp_call": _inline_custom_call}
_IN_RULE_RULES = {**_RULES, "custom_vjp_call": _inline_custom_call}


def retrace(closed: jcore.ClosedJaxpr) -> jcore.ClosedJaxpr:
    """``closed`` traced again so that only its top level has constants and custom_vjp
    rules are jaxprs (see the module doc)."""
    return _retrace_with(closed, _RULES)


def _retrace_with(closed: jcore.ClosedJaxpr, rules: dict) -> jcore.ClosedJaxpr:
    specs = [_spec(v.aval) if _is_ref_aval(v.aval)
             else jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype, weak_type=v.aval.weak_type)
             for v in closed.jaxpr.invars]
    return jax.make_jaxpr(
        lambda *args: _evaluate(closed.jaxpr, closed.consts, *args, rules=rules))(*specs)
