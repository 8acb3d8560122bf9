"""Constants captured by nested jaxprs, lifted to the top level.

A ``jax.jit`` function that closes over a NumPy array (the seed's ``np.arange`` index
vector) becomes a ``jit`` eqn whose jaxpr has constvars of its own. JAX prints those
constvars but not their values, so the text alone cannot be run. When a traced function has
such constants, it is traced again by evaluating its jaxpr with the nested jits inlined and
scan / cond / while bodies rebuilt through ``lax``: JAX then turns every captured constant
into a constvar of the top-level jaxpr (a scan or while const on the way), whose values
``ClosedJaxpr.consts`` holds. Functions without nested constants are not retraced.
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


def has_nested_consts(jaxpr: jcore.Jaxpr) -> bool:
    """Whether a jaxpr nested anywhere inside ``jaxpr`` has constants of its own."""
    for eqn in jaxpr.eqns:
        for sub in _sub_jaxprs(eqn.params):
            if sub.consts or has_nested_consts(sub.jaxpr):
                return True
    return False


def _read(env: dict, atom) -> Any:
    return atom.val if isinstance(atom, jcore.Literal) else env[atom]


def _evaluate(jaxpr: jcore.Jaxpr, consts: Sequence, *args) -> list:
    """Evaluates ``jaxpr`` on tracers, inlining jits and rebuilding loops and conds."""
    env: dict = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        ins = [_read(env, a) for a in eqn.invars]
        rule = _RULES.get(eqn.primitive.name)
        if rule is not None:
            outs = rule(eqn.params, ins)
        else:
            outs = eqn.primitive.bind(*ins, **eqn.params)
            if not eqn.primitive.multiple_results:
                outs = [outs]
        for v, x in zip(eqn.outvars, outs):
            env[v] = x
    return [_read(env, a) for a in jaxpr.outvars]


def _closed(closed: jcore.ClosedJaxpr):
    return lambda *args: _evaluate(closed.jaxpr, closed.consts, *args)


def _jit(params, ins):
    return _closed(params["jaxpr"])(*ins)


def _scan(params, ins):
    n_consts, n_carry = params["num_consts"], params["num_carry"]
    consts, init, xs = ins[:n_consts], ins[n_consts:n_consts + n_carry], ins[n_consts + n_carry:]
    body = _closed(params["jaxpr"])

    def step(carry, x):
        outs = body(*consts, *carry, *x)
        return list(outs[:n_carry]), list(outs[n_carry:])

    carry, ys = lax.scan(step, list(init), list(xs), length=params["length"],
                         reverse=params["reverse"], unroll=params["unroll"])
    return [*carry, *ys]


def _cond(params, ins):
    index, ops = ins[0], ins[1:]
    branches = [_closed(b) for b in params["branches"]]
    return lax.switch(index, [lambda *o, b=b: b(*o) for b in branches], *ops)


def _while(params, ins):
    nc, nb = params["cond_nconsts"], params["body_nconsts"]
    cond_consts, body_consts, init = ins[:nc], ins[nc:nc + nb], ins[nc + nb:]
    cond, body = _closed(params["cond_jaxpr"]), _closed(params["body_jaxpr"])
    out = lax.while_loop(lambda c: cond(*cond_consts, *c)[0],
                         lambda c: list(body(*body_consts, *c)), list(init))
    return list(out)


_RULES = {"jit": _jit, "pjit": _jit, "scan": _scan, "cond": _cond, "while": _while}


def lift_nested_consts(closed: jcore.ClosedJaxpr) -> jcore.ClosedJaxpr:
    """``closed`` retraced so that only its top level has constants (see the module doc)."""
    specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype, weak_type=v.aval.weak_type)
             for v in closed.jaxpr.invars]
    return jax.make_jaxpr(lambda *args: _evaluate(closed.jaxpr, closed.consts, *args))(*specs)
