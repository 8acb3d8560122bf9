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

from typing import Any, Sequence

import jax
from jax import lax
from jax.extend import core as jcore


def _sub_jaxprs(params: dict):
    for v in params.values():
        if isinstance(v, jcore.ClosedJaxpr):
            yield v
        elif isinstance(v, (tuple, list)):
            for item in v:
                if isinstance(item, jcore.ClosedJaxpr):
                    yield item


def needs_retrace(jaxpr: jcore.Jaxpr) -> bool:
    """Whether a jaxpr nested anywhere inside ``jaxpr`` has constants of its own, or a
    custom_vjp call with Python rules is inside it."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "custom_vjp_call" and eqn.primitive is not custom_vjp_p:
            return True
        for sub in _sub_jaxprs(eqn.params):
            if sub.consts or needs_retrace(sub.jaxpr):
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
        rule = None if eqn.primitive is custom_vjp_p else rules.get(eqn.primitive.name)
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


def _specs(avals):
    return [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]


def _custom_vjp(prim, params, ins, rules):
    """JAX's custom_vjp_call, its Python rules traced into jaxprs. Arrays the rules capture
    become extra operands (refjit's sub-jaxprs take no constants): the call and fwd rule
    take them after the call's operands, fwd passes the bwd rule's on as residuals, and bwd
    gives them zero cotangents, as it does the arrays the primal captured (JAX's num_consts
    leading operands, which a custom_vjp is not differentiated with respect to)."""
    bind_params = prim.get_bind_params(params)

    def call(*args):
        return prim.bind(*args, **bind_params)

    in_specs = _specs(params["call_jaxpr"].in_avals)
    out_specs = _specs(params["call_jaxpr"].out_avals)
    store = {}

    n_consts = params["num_consts"]  # the call's leading operands: arrays its primal captured

    def fwd(*args):
        consts = args[:n_consts]
        out, pullback = jax.vjp(lambda *x: call(*consts, *x), *args[n_consts:])
        residuals, store["tree"] = jax.tree_util.tree_flatten(pullback)
        store["num_out"] = len(out)
        return [*out, *residuals]

    call_closed = jax.make_jaxpr(_closed(params["call_jaxpr"]))(*in_specs)
    fwd_closed = _primal_only(jax.make_jaxpr(fwd)(*in_specs))
    n_out = store["num_out"]
    res_specs = _specs([v.aval for v in fwd_closed.jaxpr.outvars[n_out:]])

    def bwd(*args):
        residuals, cts = args[:len(res_specs)], args[len(res_specs):]
        pullback = jax.tree_util.tree_unflatten(store["tree"], residuals)
        return list(pullback(list(cts)))

    bwd_closed = _primal_only(jax.make_jaxpr(bwd)(*res_specs, *out_specs))
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
        grads = [jax.numpy.zeros(spec.shape, spec.dtype) if g.dtype == jax.dtypes.float0 else g
                 for g, spec in zip(grads, in_specs[n_consts:])]
        zeros = [jax.numpy.zeros(e.shape, e.dtype) for e in in_specs[:n_consts] + extra_specs]
        return [*zeros[:n_consts], *grads, *zeros[n_consts:]]

    return custom_vjp_p.bind(
        *ins, *extra,
        call_jaxpr=jax.make_jaxpr(call_with_extra)(*in_specs, *extra_specs),
        fwd_jaxpr=jax.make_jaxpr(fwd_with_extra)(*in_specs, *extra_specs),
        bwd_jaxpr=jax.make_jaxpr(bwd_with_extra)(*res_specs, *bc_specs, *out_specs),
        num_res=n_res + len(bc))


def _primal_only(closed: jcore.ClosedJaxpr) -> jcore.ClosedJaxpr:
    """A rule's jaxpr, retraced if needed, its own custom_vjp calls inlined as their primal
    computation: the rules are run, never differentiated (the seed's fwd rules call the very
    custom_vjp function they define)."""
    if not needs_retrace(closed.jaxpr):
        return closed
    return _retrace_with(closed, _PRIMAL_RULES)


def _inline_custom_vjp(_, params, ins, rules):
    return _closed(params["call_jaxpr"], rules)(*ins)


_RULES = {"jit": _jit, "pjit": _jit, "scan": _scan, "cond": _cond, "while": _while,
          "custom_vjp_call": _custom_vjp}
_PRIMAL_RULES = {**_RULES, "custom_vjp_call": _inline_custom_vjp}


def retrace(closed: jcore.ClosedJaxpr) -> jcore.ClosedJaxpr:
    """``closed`` traced again so that only its top level has constants and custom_vjp
    rules are jaxprs (see the module doc)."""
    return _retrace_with(closed, _RULES)


def _retrace_with(closed: jcore.ClosedJaxpr, rules: dict) -> jcore.ClosedJaxpr:
    specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype, weak_type=v.aval.weak_type)
             for v in closed.jaxpr.invars]
    return jax.make_jaxpr(
        lambda *args: _evaluate(closed.jaxpr, closed.consts, *args, rules=rules))(*specs)
