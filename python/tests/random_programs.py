#!/usr/bin/env python3
"""Random JAX programs run by JAX and by refjit: values and derivatives compared.

    python python/tests/random_programs.py COUNT [--seed S] [--backend native|interpreter]

Program number n (seeds S .. S+COUNT-1) is a random function ``f``, written as Python source:
a random DAG of jax.numpy and lax operations on one to three float arguments (and maybe an
int32 index), with scans, conds, fori and while loops, vmap/jit/checkpoint calls and refs, in
one dtype setting (float32, float64, bfloat16, float16, complex64, complex128). Each program
goes through refjit.jit, grad, vjp, jvp and linearize and through the same transformations
of JAX; refjit's results must have JAX's structure, dtypes and shapes and its values within a
tolerance that grows with the dtype's precision and the program's length.

A ``refjit.Error`` is a refusal: counted and listed, not a failure. Anything else refjit does
differently (a wrong value, dtype or shape, NaN where JAX is finite, an exception that is not a
refjit.Error, a crash, a hang) is a mismatch, printed with a self-contained reproducer; the
exit status is then 1. docs/testing.md, "Random programs against JAX", has the details.

Each chunk of programs runs in a worker process, so a crash or a hang is reported against the
program that caused it and the run goes on with the next one.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import itertools
import json
import linecache
import math
import os
import random
import re
import selectors
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from typing import Callable

# Compiled code's outputs start as 0xff bytes, so an element the code forgot to write shows
# up as NaN (as in the other tests; docs/testing.md). Read when refjit compiles.
os.environ.setdefault("REFJIT_POISON_OUTPUTS", "1")

import numpy as np  # noqa: E402

# ---- dtype settings -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Setting:
    """The dtypes one program computes in, and how closely refjit must agree with JAX."""
    name: str
    real: str                 # the float dtype of the program
    complex: str | None       # its complex dtype, for complex programs
    x64: bool                 # needs jax_enable_x64
    eps: float                # per-operation relative error allowed in the values
    weight: int               # how often programs use this setting
    low_precision: bool = False

    @property
    def mag_limit(self) -> float:
        """Largest magnitude values may reach: float16 overflows at 65504, and the rounding of
        the low-precision types makes large intermediate values meaningless to compare."""
        return 40.0 if self.low_precision else 1e3


SETTINGS = (
    Setting("float32", "float32", None, False, 2e-7, 45),
    Setting("float64", "float64", None, True, 1e-15, 14),
    Setting("bfloat16", "bfloat16", None, False, 1e-3, 8, low_precision=True),
    Setting("float16", "float16", None, False, 2e-4, 8, low_precision=True),
    Setting("complex64", "float32", "complex64", False, 2e-7, 17),
    Setting("complex128", "float64", "complex128", True, 1e-15, 8),
)

# How values of each dtype are written in the generated source.
JNP_DTYPE = {d: f"jnp.{d}" for d in ("float16", "bfloat16", "float32", "float64", "complex64",
                                     "complex128", "int32", "bool")}
NP_DTYPE = {**{d: f"np.{d}" for d in ("float16", "float32", "float64", "complex64",
                                      "complex128", "int32")},
            "bfloat16": "jnp.bfloat16", "bool": "np.bool_"}


def is_complex(dtype: str) -> bool:
    return dtype.startswith("complex")


def is_inexact(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat", "complex"))


def is_int(dtype: str) -> bool:
    return dtype.startswith("int")


# ---- values -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Val:
    """A value of the generated program: its Python name, shape and dtype, a rough bound of
    its elements' magnitude (to keep values finite), and for integers their range."""
    name: str
    shape: tuple
    dtype: str
    mag: float = 1.0
    lo: int = 0               # integers: the smallest and largest possible element
    hi: int = 0
    exact: bool = False       # an argument's elements (or a rearrangement of them): the same
                              # bits in JAX and in refjit, so comparing them is safe

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclasses.dataclass
class RefVar:
    """A ``jax.new_ref`` of the program, and the loop trip count where it was made."""
    name: str
    shape: tuple
    dtype: str
    mag: float
    trip: int


@dataclasses.dataclass
class ArraySpec:
    """An argument, tangent or cotangent: values with few decimals, so the reproducer's
    literal builds exactly the array the run used."""
    dtype: str                # a dtype name, "python_float" (a weakly typed scalar) or "float0"
    shape: tuple
    values: list

    def make(self):
        if self.dtype == "python_float":
            return self.values[0]
        if self.dtype == "float0":
            import jax
            return np.zeros(self.shape, dtype=jax.dtypes.float0)
        import jax.numpy as jnp  # bfloat16 is jnp.bfloat16 (ml_dtypes)
        dtype = jnp.bfloat16 if self.dtype == "bfloat16" else np.dtype(self.dtype)
        return np.array(self.values, dtype=dtype).reshape(self.shape)

    def source(self) -> str:
        if self.dtype == "python_float":
            return repr(self.values[0])
        if self.dtype == "float0":
            return f"np.zeros({self.shape!r}, dtype=jax.dtypes.float0)"
        if self.shape == ():
            return f"np.array({self.values[0]!r}, dtype={NP_DTYPE[self.dtype]})"
        return f"np.array({self.values!r}, dtype={NP_DTYPE[self.dtype]}).reshape({self.shape!r})"


def random_values(rng: random.Random, dtype: str, shape: tuple) -> list:
    """Standard normal values with three decimals (complex: both parts)."""
    def one():
        return round(max(-3.0, min(3.0, rng.gauss(0.0, 1.0))), 3)
    n = math.prod(shape)
    if is_complex(dtype):
        return [complex(one(), one()) for _ in range(n)]
    return [one() for _ in range(n)]


# ---- elementwise operation tables -----------------------------------------------------------

INF = math.inf


@dataclasses.dataclass(frozen=True)
class Unary:
    template: str             # {x}: the operand
    mag: Callable[[float], float] = lambda m: m
    lim: float = INF          # operands larger than this are squashed first (domain, growth)
    jumps: bool = False       # discontinuous: skipped where rounding differences flip it
    to_real: bool = False     # complex -> real (real, imag, abs)


@dataclasses.dataclass(frozen=True)
class Binary:
    template: str             # {x}, {y}: the operands
    mag: Callable[[float, float], float] = lambda a, b: a + b
    lim_x: float = INF
    lim_y: float = INF
    jumps: bool = False


def ONE(m):
    return 1.0


# Domain-safe forms: log, sqrt and friends of x*x + c, inverse trigonometric functions of
# 0.9 tanh(x), so that every input is in the domain and the derivatives are finite.
REAL_UNARY = (
    Unary("jnp.sin({x})", ONE), Unary("jnp.cos({x})", ONE), Unary("jnp.tanh({x})", ONE),
    Unary("jnp.exp({x})", math.exp, lim=3), Unary("jnp.expm1({x})", math.exp, lim=3),
    Unary("jnp.exp2({x})", lambda m: 2 ** m, lim=3),
    Unary("jnp.log({x} * {x} + 0.5)", lambda m: math.log(m * m + 0.5) + 1, lim=30),
    Unary("jnp.log1p({x} * {x})", lambda m: math.log1p(m * m), lim=30),
    Unary("jnp.log2(jnp.abs({x}) + 0.5)", lambda m: math.log2(m + 0.5) + 1, lim=100),
    Unary("jnp.sqrt({x} * {x} + 0.25)", lambda m: m + 0.5, lim=1e3),
    Unary("lax.rsqrt({x} * {x} + 0.5)", lambda m: 1.5),
    Unary("jnp.cbrt({x} * {x} + 0.5)", lambda m: m + 1, lim=30),
    Unary("1.0 / ({x} * {x} + 1.0)", ONE, lim=1e3),
    Unary("({x} * {x} + 0.5) ** 1.5", lambda m: (m * m + 0.5) ** 1.5, lim=5),
    Unary("({x} * {x} + 0.5) ** -0.75", lambda m: 1.7, lim=1e3),
    Unary("{x} ** 2", lambda m: m * m, lim=30), Unary("{x} ** 3", lambda m: m ** 3, lim=10),
    Unary("jnp.square({x})", lambda m: m * m, lim=30),
    Unary("-{x}"), Unary("jnp.abs({x})"), Unary("lax.stop_gradient({x})"),
    Unary("jax.nn.sigmoid({x})", ONE), Unary("jax.nn.softplus({x})", lambda m: m + 1),
    Unary("jax.nn.relu({x})"), Unary("jax.nn.gelu({x})", lambda m: m + 0.2),
    Unary("jax.nn.silu({x})", lambda m: m + 0.3), Unary("jax.nn.elu({x})", lambda m: m + 1),
    Unary("jax.nn.log_sigmoid({x})", lambda m: m + 1),
    Unary("jnp.arctan({x})", lambda m: 1.6), Unary("jnp.arcsinh({x})", lambda m: math.asinh(m)),
    Unary("jnp.arcsin(0.9 * jnp.tanh({x}))", lambda m: 1.2),
    Unary("jnp.arccos(0.9 * jnp.tanh({x}))", lambda m: 2.7),
    Unary("jnp.arctanh(0.9 * jnp.tanh({x}))", lambda m: 1.5),
    Unary("jnp.arccosh({x} * {x} + 1.5)", lambda m: math.acosh(m * m + 1.5), lim=100),
    Unary("jnp.sinh({x})", math.sinh, lim=3), Unary("jnp.cosh({x})", math.cosh, lim=3),
    Unary("jnp.tan(jnp.tanh({x}))", lambda m: 1.6),
    Unary("lax.erf({x})", ONE), Unary("lax.erf_inv(0.9 * jnp.tanh({x}))", lambda m: 1.2),
    Unary("lax.lgamma({x} * {x} + 0.5)", lambda m: (m * m + 0.5) * 3 + 1, lim=4),
    Unary("lax.digamma({x} * {x} + 0.5)", lambda m: math.log(m * m + 0.5) + 2, lim=30),
    Unary("jnp.clip({x}, -1.0, 1.0)", ONE),
    Unary("jnp.floor({x})", lambda m: m + 1, jumps=True),
    Unary("jnp.round({x})", lambda m: m + 1, jumps=True),
    Unary("jnp.sign({x})", ONE, jumps=True),
)

REAL_BINARY = (
    Binary("{x} + {y}"), Binary("{x} - {y}"),
    Binary("{x} * {y}", lambda a, b: a * b, lim_x=30, lim_y=30),
    Binary("{x} / ({y} * {y} + 1.0)", lambda a, b: a, lim_y=1e3),
    Binary("{x} / (jnp.abs({y}) + 0.5)", lambda a, b: 2 * a),
    Binary("jnp.maximum({x}, {y})", max), Binary("jnp.minimum({x}, {y})", max),
    Binary("jnp.arctan2({x}, {y})", lambda a, b: 3.2),
    Binary("(jnp.abs({x}) + 0.5) ** jnp.tanh({y})", lambda a, b: a + 2.5, lim_x=1e3),
    Binary("jnp.hypot({x}, {y})", lambda a, b: a + b),
    Binary("jnp.logaddexp({x}, {y})", lambda a, b: a + b + 1),
    Binary("jnp.fmod({x}, jnp.abs({y}) + 0.5)", lambda a, b: a, jumps=True),
)

# Complex forms keep away from poles and branch cuts: |x| < 3 in log(x + 4), sqrt(x + 4).
COMPLEX_UNARY = (
    Unary("jnp.sin({x})", math.cosh, lim=3), Unary("jnp.cos({x})", math.cosh, lim=3),
    Unary("jnp.exp({x})", math.exp, lim=3), Unary("jnp.expm1({x})", math.exp, lim=3),
    Unary("jnp.tanh({x})", lambda m: 2.0, lim=1),
    Unary("jnp.conj({x})"), Unary("-{x}"), Unary("{x} * (0.6 - 0.8j)"),
    Unary("{x} * {x}", lambda m: m * m, lim=30), Unary("{x} ** 3", lambda m: m ** 3, lim=10),
    Unary("jnp.square({x})", lambda m: m * m, lim=30),
    Unary("jnp.log({x} + 4.0)", lambda m: 5.0, lim=3),
    Unary("jnp.sqrt({x} + 4.0)", lambda m: 3.0, lim=3),
    Unary("1.0 / ({x} + 4.0)", ONE, lim=3),
    Unary("jnp.log1p(0.2 * {x})", lambda m: 1.5, lim=3),
    Unary("jnp.real({x})", to_real=True), Unary("jnp.imag({x})", to_real=True),
    Unary("jnp.abs({x})", to_real=True),
)

COMPLEX_BINARY = (
    Binary("{x} + {y}"), Binary("{x} - {y}"),
    Binary("{x} * {y}", lambda a, b: a * b, lim_x=30, lim_y=30),
    Binary("{x} * jnp.conj({y})", lambda a, b: a * b, lim_x=30, lim_y=30),
    Binary("{x} / ({y} + 4.0)", lambda a, b: a, lim_y=3),
)

# ---- the generator --------------------------------------------------------------------------

MAX_LEVEL = 2                 # nesting of scans, conds, loops and calls
DIMS = (1, 2, 2, 3, 3, 4, 4, 5)


def random_shape(rng: random.Random, rank: int | None = None) -> tuple:
    if rank is None:
        rank = rng.choices((0, 1, 2, 3), (2, 4, 4, 2))[0]
    return tuple(rng.choice(DIMS) for _ in range(rank))


def broadcast_shapes(a: tuple, b: tuple) -> tuple | None:
    """NumPy's broadcast of two shapes, or None."""
    out = []
    for x, y in itertools.zip_longest(reversed(a), reversed(b), fillvalue=1):
        if x != y and x != 1 and y != 1:
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def factorize(n: int) -> list[int]:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


# The names the generator gives values, refs and parameters (v12, a0, k1, c4, r9, ...).
VALUE_NAME = re.compile(r"\b[a-z]\d+\b")


class Block:
    """The statements of one Python function body being generated (``f`` itself, a scan step,
    a cond branch, a loop body), and the values and refs it can use: its own, and those of the
    bodies around it (Python closures)."""

    def __init__(self, gen: "Generator", parent: "Block | None" = None, trip: int = 1,
                 refs_allowed: bool = True):
        self.gen = gen
        self.rng = gen.rng
        self.parent = parent
        self.level = 0 if parent is None else parent.level + 1
        self.trip = trip               # how often this body runs per call of f
        # No refs in a vmap body and what it nests: a write into an outer ref would be
        # batched, and JAX does not batch conds with ref effects.
        self.refs_allowed = refs_allowed and (parent is None or parent.refs_allowed)
        self.lines: list[str] = []
        self.values: list[Val] = []
        self.refs: list[RefVar] = []

    # -- what the block can use

    def visible(self) -> list[Val]:
        return (self.parent.visible() if self.parent else []) + self.values

    def visible_refs(self) -> list[RefVar]:
        if not self.refs_allowed:
            return []
        return (self.parent.visible_refs() if self.parent else []) + self.refs

    def pick(self, accept: Callable[[Val], bool] = lambda v: True,
             result: bool = False) -> Val | None:
        """A value, favouring recent ones and this block's own (so the program is a DAG with
        long chains, not a list of independent expressions). A ``result`` (of f, of a loop
        body, ...) favours values nothing uses yet, so that little of the program is dead."""
        candidates = [v for v in self.visible() if accept(v)]
        if not candidates:
            return None
        own = {v.name for v in self.values}
        used = self.gen.used
        weights = [(i + 1) * (3 if v.name in own else 1) *
                   (8 if result and v.name not in used and v.name[0] == "v" else 1)
                   for i, v in enumerate(candidates)]
        return self.rng.choices(candidates, weights)[0]

    def pick_float(self, accept: Callable[[Val], bool] = lambda v: True,
                   result: bool = False) -> Val | None:
        return self.pick(lambda v: is_inexact(v.dtype) and accept(v), result)

    def int_scalar(self) -> Val | None:
        return self.pick(lambda v: is_int(v.dtype) and v.shape == ())

    # -- emitting statements

    def emit(self, line: str) -> None:
        self.lines.append(line)
        text = line.strip()
        if text.startswith("def "):
            return
        if " = " in text and not text.startswith("return"):
            text = text.split(" = ", 1)[1]  # the names it defines are not uses
        self.gen.used.update(VALUE_NAME.findall(text))

    def define(self, expr: str, shape: tuple, dtype: str, mag: float = 1.0, **kw) -> Val:
        v = Val(self.gen.fresh("v"), tuple(shape), dtype, mag, **kw)
        self.emit(f"{v.name} = {expr}")
        self.values.append(v)
        self.gen.length += 1
        return v

    def define_all(self, results: list[Val], expr: str) -> bool:
        """``results`` (already named) bound by one statement ``expr``; True, for the ops."""
        self.emit(f"{pack([r.name for r in results])} = {expr}")
        self.values += results
        self.gen.length += 1
        return True

    def emit_def(self, header: str, body: "Block", result: str) -> None:
        """A nested function: ``header``, the body's lines, ``return result``."""
        self.emit(header)
        for line in body.lines or ["pass"]:
            self.emit("    " + line)
        self.emit(f"    return {result}")

    # -- keeping values in range, and giving them a shape and a dtype

    def squashed(self, v: Val) -> Val:
        """v mapped smoothly into magnitude 1."""
        if is_complex(v.dtype):
            expr = f"{v.name} * lax.rsqrt(1.0 + jnp.real({v.name} * jnp.conj({v.name})))"
        else:
            expr = f"jnp.tanh({v.name})"
        return self.define(expr, v.shape, v.dtype, 1.0)

    def bounded(self, v: Val, lim: float) -> Val:
        return v if v.mag <= lim or not is_inexact(v.dtype) else self.squashed(v)

    def fitted(self, v: Val, shape: tuple, dtype: str | None = None) -> Val:
        """v as a value of ``shape`` and ``dtype`` (by default its own): broadcast, reshaped,
        cut or tiled, converted."""
        dtype = dtype or v.dtype
        if v.dtype != dtype:
            v = self.converted(v, dtype)
        if v.shape == tuple(shape):
            return v
        shape = tuple(shape)
        n, size = math.prod(shape), v.size
        if broadcast_shapes(v.shape, shape) == shape and self.rng.random() < 0.6:
            expr = f"jnp.broadcast_to({v.name}, {shape!r})"
        elif size == n:
            expr = f"{v.name}.reshape({shape!r})"
        elif size > n:
            expr = f"{v.name}.reshape(-1)[:{n}].reshape({shape!r})"
        else:
            copies = ", ".join([f"{v.name}.reshape(-1)"] * -(-n // size))
            expr = f"jnp.concatenate([{copies}])[:{n}].reshape({shape!r})"
        return self.define(expr, shape, v.dtype, v.mag, lo=v.lo, hi=v.hi, exact=v.exact)

    def converted(self, v: Val, dtype: str) -> Val:
        """v as ``dtype`` (an inexact dtype of the program)."""
        if is_complex(v.dtype) and not is_complex(dtype):
            part = self.rng.choice(("jnp.real", "jnp.imag"))
            return self.define(f"{part}({v.name})", v.shape, dtype, v.mag)
        mag = max(abs(v.lo), abs(v.hi)) if is_int(v.dtype) else (1.0 if v.dtype == "bool"
                                                                  else v.mag)
        return self.define(f"{v.name}.astype({JNP_DTYPE[dtype]})", v.shape, dtype, mag)

    def fitted_float(self, shape: tuple, dtype: str) -> Val:
        """Some value of the program as a float of ``shape``: an existing one of that shape if
        there is one, else any value reshaped."""
        same = self.pick_float(lambda v: v.shape == tuple(shape) and v.dtype == dtype)
        if same is not None and self.rng.random() < 0.6:
            return same
        return self.fitted(self.pick_float(), shape, dtype)

    def carried(self, v: Val, like: Val) -> Val:
        """v as the next value of a loop carry ``like``: its shape and dtype, and no larger
        than ``like``'s bound, so that iterating cannot make values grow."""
        v = self.fitted(v, like.shape, like.dtype)
        return v if v.mag <= like.mag else self.squashed(v)


class Generator:
    """Generates one program from its seed: ``generate(seed)``."""

    def __init__(self, seed: int):
        self.seed = seed
        self.rng = random.Random(seed)
        self.setting = self.rng.choices(SETTINGS, [s.weight for s in SETTINGS])[0]
        self.counter = itertools.count()
        self.params: list[str] = []
        self.args: list[ArraySpec] = []
        self.features: set[str] = set()
        self.reverse_ok = True         # False once a while_loop is used
        self.length = 0                # statements, for the tolerances
        self.used: set[str] = set()    # names some statement reads
        # Each program leans to two kinds of operation, so that some are ref-heavy, some
        # loop-heavy, some mostly shapes.
        self.boost = set(self.rng.sample(sorted(CATEGORIES), 2))

    def fresh(self, prefix: str) -> str:
        return f"{prefix}{next(self.counter)}"

    def add_arg(self, block: Block, dtype: str, shape: tuple) -> Val:
        """A new parameter of f (arguments can be added while the body is generated)."""
        if dtype == "python_float":
            spec = ArraySpec("python_float", (), [random_values(self.rng, "float32", ())[0]])
            dtype = self.setting.real
        elif is_int(dtype):
            spec = ArraySpec("int32", shape, [self.rng.randint(-1, 5) for _ in range(
                math.prod(shape))])
        else:
            spec = ArraySpec(dtype, shape, random_values(self.rng, dtype, shape))
        name = self.fresh("k" if is_int(dtype) else "a")
        v = Val(name, shape, dtype, 3.0, lo=-1, hi=5, exact=True)
        self.params.append(name)
        self.args.append(spec)
        block.gen.top.values.insert(0, v)
        return v

    @property
    def float_dtypes(self) -> tuple[str, ...]:
        s = self.setting
        return (s.real, s.complex) if s.complex else (s.real,)

    def generate(self) -> "Program":
        s = self.setting
        self.top = top = Block(self)
        for _ in range(self.rng.randint(1, 3)):
            dtype = self.rng.choice(self.float_dtypes)
            self.add_arg(top, dtype, random_shape(self.rng))
        if s.complex and not any(is_complex(a.dtype) for a in self.args):
            self.add_arg(top, s.complex, random_shape(self.rng))
        if not s.low_precision and s.complex is None and self.rng.random() < 0.1:
            self.add_arg(top, "python_float", ())
        if self.rng.random() < 0.5:
            self.add_arg(top, "int32", ())
        # The arguments in the order they were added: values were inserted at the front.
        top.values.sort(key=lambda v: self.params.index(v.name))
        run_ops(top, self.rng.randint(4, 14))
        return self.program(top, *choose_outputs(top))

    def program(self, top: Block, outputs: list[Val], structure: str) -> "Program":
        rng = random.Random(self.seed * 7919 + 1)
        tangents = [ArraySpec("float0", a.shape, []) if a.dtype == "int32" else
                    ArraySpec(a.dtype, a.shape, random_values(rng, a.dtype, a.shape))
                    if a.dtype != "python_float" else
                    ArraySpec("python_float", (), random_values(rng, "float32", ()))
                    for a in self.args]
        cotangents = [ArraySpec(v.dtype, v.shape, random_values(rng, v.dtype, v.shape))
                      for v in outputs]
        wrt = tuple(k for k, a in enumerate(self.args) if a.dtype != "int32")
        return Program(self.seed, self.setting, self.params, ["    " + x for x in top.lines],
                       [(v.name, v.shape, v.dtype) for v in outputs], structure, self.args,
                       tangents, cotangents, wrt, self.reverse_ok, self.length,
                       sorted(self.features))


def choose_outputs(top: Block) -> tuple[list[Val], str]:
    """One to three outputs (favouring the last values, which depend on the most), maybe a
    ref's final value; returned as a tuple, one array or a dict. Integers and bools become
    floats."""
    rng, gen = top.rng, top.gen
    chosen: list[Val] = []
    for _ in range(rng.randint(1, 3)):
        v = top.pick(lambda v: v not in chosen, result=True)
        if v is None:
            break
        if not is_inexact(v.dtype):
            v = top.converted(v, gen.setting.real)
        chosen.append(v)
    sinks = [v for v in top.values if v.name not in gen.used and v.name[0] == "v"
             and v not in chosen and is_inexact(v.dtype)]
    if sinks:  # what nothing else uses is not dead code: the means of the rest, one output
        terms = [f"jnp.mean(jnp.real({v.name}))" if is_complex(v.dtype) else
                 f"jnp.mean({v.name})" for v in sinks[-6:]]
        chosen.append(top.define(" + ".join(terms), (), gen.setting.real,
                                 sum(v.mag for v in sinks[-6:])))
    if top.refs and rng.random() < 0.4:
        r = rng.choice(top.refs)
        expr = f"jax.freeze({r.name})" if rng.random() < 0.5 else f"{r.name}[...]"
        chosen.append(top.define(expr, r.shape, r.dtype, r.mag))
    structure = rng.choices(("tuple", "single", "dict"), (6, 2, 2))[0]
    if structure == "single" and len(chosen) > 1:
        structure = "tuple"
    return chosen, structure


def output_paths(structure: str, n: int) -> list[str]:
    """How the loss reads output k of f: out[k], out['outk'] or out."""
    if structure == "single":
        return [""]
    if structure == "dict":
        return [f"['out{k}']" for k in range(n)]
    return [f"[{k}]" for k in range(n)]


def pytree_source(structure: str, items: list[str]) -> str:
    if structure == "single":
        return items[0]
    if structure == "dict":
        return "{" + ", ".join(f"'out{k}': {x}" for k, x in enumerate(items)) + "}"
    return tuple_source(items)


def loss_term(path: str, dtype: str, setting: Setting) -> str:
    x = f"out{path}"
    shape = f"{x}.shape"
    if is_complex(dtype):
        x = f"(jnp.real({x}) + 0.5 * jnp.imag({x}))"
    elif setting.low_precision:
        x = f"{x}.astype(jnp.float32)"  # the loss is summed in float32
    return f"jnp.sum(weights({shape}) * {x})"


def run_ops(block: Block, count: int) -> None:
    """Emits ``count`` random operations into ``block``."""
    for _ in range(count):
        for _attempt in range(30):  # an operation can decline (nothing it applies to)
            category, op = choose_op(block)
            if op(block):
                block.gen.features.add(op.__name__.removeprefix("op_"))
                break


def choose_op(block: Block):
    gen = block.gen
    entries = [(w * (4 if cat in gen.boost else 1), cat, op) for w, cat, op in OPS
               if block.level < MAX_LEVEL or cat != "control"]
    weights = [e[0] for e in entries]
    _, category, op = block.rng.choices(entries, weights)[0]
    return category, op


# ---- operations: each emits one statement (or a few) into a block, or returns False -----------


def op_unary(b: Block) -> bool:
    x = b.pick_float()
    if x is None:
        return False
    if is_complex(x.dtype):
        table = COMPLEX_UNARY
    else:
        table = [u for u in REAL_UNARY if not (u.jumps and b.gen.setting.low_precision)]
    u = b.rng.choice(table)
    x = b.bounded(x, u.lim)
    if u.mag(x.mag) > b.gen.setting.mag_limit:
        x = b.squashed(x)
    dtype = b.gen.setting.real if u.to_real else x.dtype
    b.define(u.template.format(x=x.name), x.shape, dtype, u.mag(x.mag))
    return True


def op_binary(b: Block) -> bool:
    x = b.pick_float()
    if x is None:
        return False
    if b.rng.random() < 0.15:  # a Python scalar operand, weakly typed
        c = b.rng.choice((0.5, -1.25, 2.0, 0.1, 3.0))
        form = b.rng.choice(("{x} + {c}", "{x} * {c}", "{c} - {x}", "{x} / {c}"))
        x = b.bounded(x, b.gen.setting.mag_limit / 4)
        b.define(form.format(x=x.name, c=c), x.shape, x.dtype, x.mag * 10 + 3)
        return True
    y = b.pick_float(lambda v: broadcast_shapes(v.shape, x.shape) is not None)
    if y is None or b.rng.random() < 0.3:
        y = b.fitted_float(broadcast_partner(b.rng, x.shape), b.rng.choice(b.gen.float_dtypes))
    shape = broadcast_shapes(x.shape, y.shape)
    complex_result = is_complex(x.dtype) or is_complex(y.dtype)
    if complex_result:
        table = COMPLEX_BINARY
        dtype = b.gen.setting.complex
    else:
        table = [t for t in REAL_BINARY if not (t.jumps and b.gen.setting.low_precision)]
        dtype = x.dtype
    t = b.rng.choice(table)
    x, y = b.bounded(x, t.lim_x), b.bounded(y, t.lim_y)
    if t.mag(x.mag, y.mag) > b.gen.setting.mag_limit:
        x, y = b.bounded(x, 1.0), b.bounded(y, 1.0)
    b.define(t.template.format(x=x.name, y=y.name), shape, dtype, t.mag(x.mag, y.mag))
    return True


def broadcast_partner(rng: random.Random, shape: tuple) -> tuple:
    """A shape that broadcasts with ``shape``: the same, a suffix, or with axes of size 1."""
    r = rng.random()
    if r < 0.4 or not shape:
        return shape
    if r < 0.7:
        return shape[rng.randrange(len(shape) + 1):]
    return tuple(1 if rng.random() < 0.5 else d for d in shape)


def comparison(b: Block, shape: tuple) -> Val | None:
    """A bool of ``shape`` comparing program values. In low precision only argument values
    are compared: a computed value may round differently in JAX and in refjit and flip."""
    low = b.gen.setting.low_precision
    x = b.pick(lambda v: not is_complex(v.dtype) and v.dtype != "bool"
               and (v.exact or not low) and broadcast_shapes(v.shape, shape) == shape)
    if x is None:
        x = b.pick(lambda v: not is_complex(v.dtype) and v.dtype != "bool"
                   and (v.exact or not low))
        if x is None:
            return None
        x = b.fitted(x, shape)
    if is_int(x.dtype):
        rhs = str(b.rng.randint(0, 3))
    else:
        rhs = b.rng.choice(("0.0", "0.3", "-0.5"))
    op = b.rng.choice((">", "<", ">=", "<="))
    return b.define(f"{x.name} {op} {rhs}", x.shape, "bool", exact=x.exact)


def op_where(b: Block) -> bool:
    x = b.pick_float()
    if x is None:
        return False
    y = b.fitted_float(broadcast_partner(b.rng, x.shape), x.dtype)
    shape = broadcast_shapes(x.shape, y.shape)
    cond = b.pick(lambda v: v.dtype == "bool" and broadcast_shapes(v.shape, shape) == shape)
    if cond is None or b.rng.random() < 0.5:
        cond = comparison(b, b.rng.choice((shape, shape[1:] if shape else ())))
        if cond is None:
            return False
    b.define(f"jnp.where({cond.name}, {x.name}, {y.name})", shape, x.dtype, max(x.mag, y.mag))
    return True


def op_logical(b: Block) -> bool:
    p = b.pick(lambda v: v.dtype == "bool")
    if p is None:
        return False
    q = b.pick(lambda v: v.dtype == "bool" and broadcast_shapes(v.shape, p.shape) is not None)
    form = b.rng.choice(("{p} & {q}", "{p} | {q}", "~{p}", "{p} ^ {q}"))
    b.define(form.format(p=p.name, q=q.name), broadcast_shapes(p.shape, q.shape), "bool",
             exact=p.exact and q.exact)
    return True


def random_axis(rng: random.Random, rank: int, allow_none: bool = True):
    if rank == 0 or (allow_none and rng.random() < 0.25):
        return None
    return rng.randrange(-rank, rank) if rng.random() < 0.2 else rng.randrange(rank)


def reduced_shape(shape: tuple, axis, keepdims: bool) -> tuple:
    axes = range(len(shape)) if axis is None else [
        a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))]
    if keepdims:
        return tuple(1 if k in axes else d for k, d in enumerate(shape))
    return tuple(d for k, d in enumerate(shape) if k not in axes)


def op_reduce(b: Block) -> bool:
    x = b.pick_float()
    if x is None:
        return False
    rng, low = b.rng, b.gen.setting.low_precision
    names = ["sum", "mean", "prod"]
    if not is_complex(x.dtype):
        names += ["max", "min", "logsumexp", "var", "norm"] + ([] if low else ["argmax"])
    name = rng.choice(names)
    axis = random_axis(rng, len(x.shape))
    if name == "sum" and len(x.shape) >= 2 and rng.random() < 0.3:
        axis = tuple(sorted(rng.sample(range(len(x.shape)), 2)))
    keepdims = rng.random() < 0.25
    shape = reduced_shape(x.shape, axis, keepdims)
    n = x.size // max(1, math.prod(shape))
    if name == "argmax":
        if not x.shape:
            return False
        kd = ", keepdims=True" if keepdims and axis is not None else ""
        shape = reduced_shape(x.shape, axis, bool(kd))
        hi = (x.size if axis is None else x.shape[axis]) - 1
        fn = rng.choice(("argmax", "argmin"))
        b.define(f"jnp.{fn}({x.name}, axis={axis}{kd}).astype(jnp.int32)", shape, "int32",
                 lo=0, hi=hi)
        return True
    if name == "prod":
        x = b.bounded(x, min(1.5, b.gen.setting.mag_limit ** (1 / max(n, 1))))
        if x.mag ** n > b.gen.setting.mag_limit:
            x = b.squashed(x)
    kd = ", keepdims=True" if keepdims else ""
    call = {"logsumexp": f"jax.nn.logsumexp({x.name}, axis={axis}{kd})",
            "norm": f"jnp.linalg.norm({x.name}, axis={axis}{kd})"
            if not isinstance(axis, tuple) else None,
            }.get(name) or f"jnp.{name}({x.name}, axis={axis}{kd})"
    # Only the chosen reduction's bound is computed: x.mag ** n of a large x overflows a float
    # (seed 13441's generation raised OverflowError when every bound was computed).
    mag = {"sum": lambda: x.mag * n, "prod": lambda: x.mag ** n,
           "logsumexp": lambda: x.mag + math.log(n) + 1, "var": lambda: x.mag ** 2,
           "norm": lambda: x.mag * math.sqrt(n)}.get(name, lambda: x.mag)()
    dtype = b.gen.setting.real if name in ("var", "norm") else x.dtype
    b.define(call, shape, dtype, mag)
    return True


def op_cumulative(b: Block) -> bool:
    x = b.pick_float(lambda v: len(v.shape) >= 1)
    if x is None:
        return False
    rng = b.rng
    axis = rng.randrange(len(x.shape))
    d = x.shape[axis]
    forms = [("jnp.cumsum({x}, axis={a})", x.mag * d), ("lax.cumsum({x}, axis={a}, reverse=True)",
                                                        x.mag * d),
             ("jnp.cumprod({x}, axis={a})", None)]
    if d >= 2:
        forms.append(("jnp.diff({x}, axis={a})", 2 * x.mag))
    if not is_complex(x.dtype):
        forms += [("lax.cummax({x}, axis={a})", x.mag), ("lax.cummin({x}, axis={a}, reverse=True)",
                                                         x.mag),
                  ("lax.cumlogsumexp({x}, axis={a})", x.mag + math.log(d) + 1),
                  ("jnp.sort({x}, axis={a})", x.mag), ("jax.nn.softmax({x}, axis={a})", 1.0),
                  ("jax.nn.log_softmax({x}, axis={a})", 2 * x.mag + math.log(d) + 1)]
    form, mag = rng.choice(forms)
    if mag is None:  # a product of d values
        x = b.bounded(x, 1.2)
        mag = x.mag ** d
    shape = list(x.shape)
    if form.startswith("jnp.diff"):
        shape[axis] -= 1
    if mag > b.gen.setting.mag_limit:
        x = b.squashed(x)
        mag = d + 1.0
    b.define(form.format(x=x.name, a=axis), tuple(shape), x.dtype, mag)
    return True


def op_reshape(b: Block) -> bool:
    x = b.pick()
    if x is None:
        return False
    rng = b.rng
    if rng.random() < 0.2:
        b.define(f"jnp.ravel({x.name})", (x.size,), x.dtype, x.mag, lo=x.lo, hi=x.hi,
                 exact=x.exact)
        return True
    primes = factorize(x.size)
    rng.shuffle(primes)
    rank = rng.randint(1, 3) if x.size > 1 else rng.randint(0, 2)
    dims = [1] * rank
    for p in primes:
        dims[rng.randrange(rank)] *= p
    shape = tuple(dims)
    text = list(map(str, shape))
    if shape and rng.random() < 0.3:
        text[rng.randrange(len(text))] = "-1"
    arg = f"({', '.join(text)}{',' if len(text) == 1 else ''})"
    b.define(f"{x.name}.reshape({arg})", shape, x.dtype, x.mag, lo=x.lo, hi=x.hi, exact=x.exact)
    return True


def op_transpose(b: Block) -> bool:
    x = b.pick(lambda v: len(v.shape) >= 2)
    if x is None:
        return False
    rng, rank = b.rng, len(x.shape)
    r = rng.random()
    if rank == 2 and r < 0.3:
        expr, perm = f"{x.name}.T", (1, 0)
    elif r < 0.5:
        i, j = rng.sample(range(rank), 2)
        perm = list(range(rank))
        perm[i], perm[j] = perm[j], perm[i]
        expr = f"jnp.swapaxes({x.name}, {i}, {j})"
    elif r < 0.65:
        i, j = rng.randrange(rank), rng.randrange(rank)
        perm = [k for k in range(rank) if k != i]
        perm.insert(j, i)
        expr = f"jnp.moveaxis({x.name}, {i}, {j})"
    else:
        perm = list(range(rank))
        rng.shuffle(perm)
        expr = f"jnp.transpose({x.name}, {tuple(perm)!r})"
    b.define(expr, tuple(x.shape[p] for p in perm), x.dtype, x.mag, lo=x.lo, hi=x.hi,
             exact=x.exact)
    return True


def static_index(rng: random.Random, shape: tuple) -> tuple[str, tuple]:
    """A NumPy basic index of ``shape`` (ints, slices with steps, None, ...) and the shape
    it gives."""
    parts, out = [], []
    for d in shape:
        r = rng.random()
        if r < 0.35:
            parts.append(":")
            out.append(d)
        elif r < 0.55:
            parts.append(str(rng.randrange(-d, d)))
        elif r < 0.7:
            step = rng.choice((-1, -2))
            parts.append(f"::{step}")
            out.append(len(range(d)[::step]))
        else:
            start = rng.randrange(d)
            stop = rng.randint(start + 1, d)
            step = rng.choice((1, 1, 2))
            parts.append(f"{start}:{stop}" + (f":{step}" if step > 1 else ""))
            out.append(len(range(start, stop, step)))
    if rng.random() < 0.15:
        k = rng.randint(0, len(parts))
        parts.insert(k, "None")
        out.insert(sum(1 for p in parts[:k] if not p.lstrip("-").isdigit()), 1)
    while parts and parts[-1] == ":":
        parts.pop()
    # "..." stands for one axis when every axis is indexed explicitly.
    explicit = [p for p in parts if p != "None"]
    if rng.random() < 0.2 and len(explicit) == len(shape) >= 2 and parts[0] == ":":
        parts[0] = "..."
    if not parts:
        return "[...]", tuple(shape)
    return "[" + ", ".join(parts) + "]", tuple(out)


def op_index(b: Block) -> bool:
    x = b.pick(lambda v: len(v.shape) >= 1)
    if x is None:
        return False
    index, shape = static_index(b.rng, x.shape)
    b.define(f"{x.name}{index}", shape, x.dtype, x.mag, lo=x.lo, hi=x.hi, exact=x.exact)
    return True


def index_value(b: Block, d: int) -> str:
    """A dynamic index into an axis of size ``d``: an int scalar of the program, wrapped
    into range when it might not be in it; a literal when there is none."""
    k = b.int_scalar()
    if k is None:
        return str(b.rng.randrange(d))
    if 0 <= k.lo and k.hi < d:
        return k.name
    return f"{k.name} % {d}"


def start_indices(b: Block, shape: tuple, axis: int, k: Val | None) -> str:
    """Start indices of a dynamic slice: the int scalar ``k`` (maybe out of range: starts
    are clamped) on ``axis``, literals elsewhere. An array, so that the literals take k's
    integer type (int32, or a loop counter's int64 under x64)."""
    starts = [k.name if k is not None and a == axis else str(b.rng.randrange(d))
              for a, d in enumerate(shape)]
    if k is None:
        return "(" + ", ".join(starts) + ",)"
    return "jnp.array([" + ", ".join(starts) + "])"


def op_dynamic_index(b: Block) -> bool:
    x = b.pick(lambda v: len(v.shape) >= 1 and v.dtype != "bool")
    k = b.int_scalar()
    if x is None or k is None:
        return False
    rng = b.rng
    axis = rng.randrange(len(x.shape))
    d = x.shape[axis]
    size = rng.randint(1, d)
    r = rng.random()
    shape = list(x.shape)
    if r < 0.3:  # out of range starts clamp, in JAX and in refjit
        expr = f"lax.dynamic_slice_in_dim({x.name}, {k.name}, {size}, axis={axis})"
        shape[axis] = size
    elif r < 0.5:
        expr = f"lax.dynamic_index_in_dim({x.name}, {k.name}, axis={axis}, keepdims=False)"
        del shape[axis]
    elif r < 0.75:
        starts = start_indices(b, x.shape, axis, k)
        sizes = [size if a == axis else rng.randint(1, x.shape[a]) for a in range(len(shape))]
        expr = f"lax.dynamic_slice({x.name}, {starts}, {tuple(sizes)!r})"
        shape = sizes
    else:
        expr = f"{x.name}[{index_value(b, x.shape[0])}]"
        shape = shape[1:]
    b.define(expr, tuple(shape), x.dtype, x.mag, lo=x.lo, hi=x.hi)
    return True


def op_dynamic_update(b: Block) -> bool:
    x = b.pick_float(lambda v: len(v.shape) >= 1)
    if x is None:
        return False
    rng = b.rng
    k = b.int_scalar()
    if rng.random() < 0.5:
        size = [rng.randint(1, d) for d in x.shape]
        update = b.fitted_float(tuple(size), x.dtype)
        starts = start_indices(b, x.shape, 0, k)
        expr = f"lax.dynamic_update_slice({x.name}, {update.name}, {starts})"
    else:
        update = b.fitted_float(x.shape[1:], x.dtype)
        where = index_value(b, x.shape[0])
        how = rng.choice(("set", "add", "add"))
        expr = f"{x.name}.at[{where}].{how}({update.name})"
    b.define(expr, x.shape, x.dtype, x.mag + update.mag)
    return True


def index_array(b: Block, d: int, unique: bool = False) -> tuple[str, int]:
    """An int32 index vector into an axis of size ``d`` (literal, or from the program's ints
    wrapped into range) and its length."""
    rng = b.rng
    k = b.pick(lambda v: is_int(v.dtype) and len(v.shape) == 1)
    if k is not None and not unique and rng.random() < 0.5:
        if 0 <= k.lo and k.hi < d:
            return k.name, k.shape[0]
        return f"{k.name} % {d}", k.shape[0]
    if unique:
        idx = rng.sample(range(d), rng.randint(1, d))
    else:
        idx = [rng.randrange(d) for _ in range(rng.randint(1, 4))]
    return f"jnp.array({idx!r}, dtype=jnp.int32)", len(idx)


def op_gather(b: Block) -> bool:
    x = b.pick(lambda v: len(v.shape) >= 1 and v.dtype != "bool")
    if x is None:
        return False
    rng = b.rng
    axis = rng.randrange(len(x.shape))
    idx, n = index_array(b, x.shape[axis])
    shape = list(x.shape)
    shape[axis] = n
    if rng.random() < 0.5:
        expr = f"jnp.take({x.name}, {idx}, axis={axis})"
    else:  # NumPy indexing: JAX promises in-range indices, and these are
        expr = f"{x.name}[{', '.join([':'] * axis + [idx])}]"
    b.define(expr, tuple(shape), x.dtype, x.mag, lo=x.lo, hi=x.hi, exact=x.exact)
    return True


def op_scatter(b: Block) -> bool:
    x = b.pick_float(lambda v: len(v.shape) >= 1)
    if x is None:
        return False
    rng = b.rng
    how = rng.choice(("add", "add", "set", "mul"))
    # .set with a repeated index keeps an unspecified one of the updates, and JAX
    # differentiates .mul only with unique indices.
    idx, n = index_array(b, x.shape[0], unique=(how in ("set", "mul")))
    shape = (n,) + x.shape[1:] if rng.random() < 0.8 else ()
    update = b.fitted_float(shape, x.dtype)
    mag = x.mag + n * update.mag
    if how == "mul":
        update = b.bounded(update, 1.0)
        x = b.bounded(x, b.gen.setting.mag_limit / 4)
        mag = x.mag
    unique = ", unique_indices=True" if how == "mul" else ""
    b.define(f"{x.name}.at[{idx}].{how}({update.name}{unique})", x.shape, x.dtype, mag)
    return True


def op_pad(b: Block) -> bool:
    x = b.pick(lambda v: len(v.shape) >= 1 and v.dtype != "bool")
    if x is None:
        return False
    rng = b.rng
    if rng.random() < 0.3:  # lax.pad: negative (cutting) and interior padding
        config, shape = [], []
        for d in x.shape:
            while True:
                lo, hi, interior = rng.randint(-1, 2), rng.randint(-1, 2), rng.randint(0, 1)
                n = lo + hi + d + (d - 1) * interior
                if n >= 1:
                    break
            config.append((lo, hi, interior))
            shape.append(n)
        value = f"jnp.array({rng.choice((0, 2))}, {x.name}.dtype)"
        b.define(f"lax.pad({x.name}, {value}, {config!r})", tuple(shape), x.dtype, x.mag + 2,
                 lo=min(x.lo, 0), hi=max(x.hi, 2))
        return True
    mode = rng.choice(("constant", "constant", "edge", "reflect", "wrap", "symmetric"))
    widths, shape = [], []
    for d in x.shape:
        top = {"reflect": d - 1, "wrap": d}.get(mode, 2)
        lo, hi = rng.randint(0, min(2, top)), rng.randint(0, min(2, top))
        widths.append((lo, hi))
        shape.append(d + lo + hi)
    extra = f", mode={mode!r}" if mode != "constant" else rng.choice(("", ", constant_values=1.5"))
    b.define(f"jnp.pad({x.name}, {tuple(widths)!r}{extra})", tuple(shape), x.dtype, x.mag + 1.5,
             lo=min(x.lo, 0), hi=max(x.hi, 1))
    return True


def op_concatenate(b: Block) -> bool:
    x = b.pick(lambda v: v.dtype != "bool")
    if x is None:
        return False
    rng = b.rng
    if len(x.shape) == 0 or rng.random() < 0.3:
        axis = rng.randint(0, len(x.shape))
        y = b.fitted_float(x.shape, x.dtype) if is_inexact(x.dtype) else x
        shape = x.shape[:axis] + (2,) + x.shape[axis:]
        b.define(f"jnp.stack([{x.name}, {y.name}], axis={axis})", shape, x.dtype,
                 max(x.mag, y.mag), lo=x.lo, hi=x.hi)
        return True
    axis = rng.randrange(len(x.shape))
    other = list(x.shape)
    other[axis] = rng.randint(1, 3)
    y = b.fitted_float(tuple(other), x.dtype) if is_inexact(x.dtype) else b.fitted(x, other)
    shape = list(x.shape)
    shape[axis] += other[axis]
    b.define(f"jnp.concatenate([{x.name}, {y.name}], axis={axis})", tuple(shape), x.dtype,
             max(x.mag, y.mag), lo=x.lo, hi=x.hi)
    return True


def op_broadcast(b: Block) -> bool:
    x = b.pick(lambda v: v.size <= 30)
    if x is None:
        return False
    rng = b.rng
    r = rng.random()
    if r < 0.5:
        shape = (rng.choice(DIMS),) + x.shape
        expr = f"jnp.broadcast_to({x.name}, {shape!r})"
    elif r < 0.92 and x.shape:
        axis, reps = rng.randrange(len(x.shape)), rng.randint(2, 3)
        shape = tuple(d * reps if a == axis else d for a, d in enumerate(x.shape))
        expr = f"jnp.repeat({x.name}, {reps}, axis={axis})"
    else:
        reps = tuple(rng.randint(1, 2) for _ in range(max(1, len(x.shape))))
        base = (1,) * (len(reps) - len(x.shape)) + x.shape
        shape = tuple(d * r for d, r in zip(base, reps))
        expr = f"jnp.tile({x.name}, {reps!r})"
    b.define(expr, shape, x.dtype, x.mag, lo=x.lo, hi=x.hi, exact=x.exact)
    return True


def op_rearrange(b: Block) -> bool:
    """flip, roll, expand_dims, squeeze, triu/tril: elements moved, shape (mostly) kept."""
    x = b.pick(lambda v: len(v.shape) >= 1)
    if x is None:
        return False
    rng = b.rng
    axis = rng.randrange(len(x.shape))
    shape = x.shape
    r = rng.random()
    if r < 0.3:
        expr = f"jnp.flip({x.name}, axis={axis})"
    elif r < 0.55:
        expr = f"jnp.roll({x.name}, {rng.randint(-2, 3)}, axis={axis})"
    elif r < 0.7:
        axis = rng.randint(0, len(x.shape))
        expr = f"jnp.expand_dims({x.name}, {axis})"
        shape = x.shape[:axis] + (1,) + x.shape[axis:]
    elif r < 0.85 and 1 in x.shape:
        axis = x.shape.index(1)
        expr = f"jnp.squeeze({x.name}, axis={axis})"
        shape = x.shape[:axis] + x.shape[axis + 1:]
    elif len(x.shape) >= 2 and x.dtype != "bool":
        expr = f"jnp.{rng.choice(('triu', 'tril'))}({x.name}, k={rng.randint(-1, 1)})"
        b.define(expr, shape, x.dtype, x.mag, lo=min(x.lo, 0), hi=max(x.hi, 0))
        return True
    else:
        return False
    b.define(expr, shape, x.dtype, x.mag, lo=x.lo, hi=x.hi, exact=x.exact)
    return True


def op_matmul(b: Block) -> bool:
    x = b.pick_float(lambda v: 1 <= len(v.shape) <= 3)
    if x is None:
        return False
    rng = b.rng
    k = x.shape[-1]
    n = rng.choice(DIMS)
    rank = len(x.shape)
    if rank == 3 and rng.random() < 0.5:
        w_shape, out = (x.shape[0], k, n), (x.shape[0], x.shape[1], n)
        forms = ["{x} @ {w}", "jnp.matmul({x}, {w})", "jnp.einsum('bmk,bkn->bmn', {x}, {w})"]
    elif rng.random() < 0.25:
        w_shape, out = (k,), x.shape[:-1]
        forms = ["{x} @ {w}"] + (["jnp.dot({x}, {w})"] if rank <= 2 else [])
    else:
        w_shape, out = (k, n), x.shape[:-1] + (n,)
        forms = ["{x} @ {w}"] + (["jnp.dot({x}, {w})"] if rank <= 2 else [])
        if rank == 2:
            forms.append("jnp.einsum('mk,kn->mn', {x}, {w})")
    if rng.random() < 0.3:
        w = b.gen.add_arg(b, x.dtype, w_shape)
    else:
        w = b.fitted_float(w_shape, x.dtype)
    if k * x.mag * w.mag > b.gen.setting.mag_limit:
        x, w = b.bounded(x, 1.0), b.bounded(w, 1.0)
    b.define(rng.choice(forms).format(x=x.name, w=w.name), out, x.dtype, k * x.mag * w.mag)
    return True


def op_dot_general(b: Block) -> bool:
    x = b.pick_float(lambda v: 2 <= len(v.shape) <= 3)
    if x is None:
        return False
    rng = b.rng
    axes = list(range(len(x.shape)))
    rng.shuffle(axes)
    cx = axes.pop()
    bx = axes.pop() if len(x.shape) == 3 and rng.random() < 0.7 else None
    roles = ["c", "f"] + (["b"] if bx is not None else [])
    rng.shuffle(roles)
    y_shape = tuple({"c": x.shape[cx], "f": rng.choice(DIMS),
                     "b": x.shape[bx] if bx is not None else 0}[r] for r in roles)
    y = b.fitted_float(y_shape, x.dtype)
    if x.shape[cx] * x.mag * y.mag > b.gen.setting.mag_limit:
        x, y = b.bounded(x, 1.0), b.bounded(y, 1.0)
    cy = roles.index("c")
    batch = ((bx,), (roles.index("b"),)) if bx is not None else ((), ())
    out = ([x.shape[bx]] if bx is not None else []) + [
        d for a, d in enumerate(x.shape) if a not in (cx, bx)] + [
        d for r, d in zip(roles, y_shape) if r == "f"]
    b.define(f"lax.dot_general({x.name}, {y.name}, ((({cx},), ({cy},)), {batch!r}))",
             tuple(out), x.dtype, x.shape[cx] * x.mag * y.mag)
    return True


def op_int(b: Block) -> bool:
    """Integer arithmetic on the program's ints, and ints to floats."""
    rng = b.rng
    k = b.pick(lambda v: is_int(v.dtype))
    if k is None:
        n = rng.randint(2, 5)
        b.define(f"jnp.arange({n}, dtype=jnp.int32)", (n,), "int32", lo=0, hi=n - 1)
        return True
    r = rng.random()
    if r < 0.35:
        b.converted(k, rng.choice(b.gen.float_dtypes))
        return True
    forms = [("{k} * 2 + 1", k.lo * 2 + 1, k.hi * 2 + 1), ("jnp.clip({k}, 0, 3)", 0, 3),
             ("{k} // 2", k.lo // 2, k.hi // 2), ("{k} % 3", 0, 2),
             ("jnp.maximum({k}, 1)", 1, max(k.hi, 1)), ("-{k}", -k.hi, -k.lo),
             ("jnp.abs({k})", 0, max(abs(k.lo), abs(k.hi)))]
    form, lo, hi = rng.choice(forms)
    b.define(form.format(k=k.name), k.shape, k.dtype, lo=lo, hi=hi, exact=k.exact)
    return True


def op_convert(b: Block) -> bool:
    """A round trip through another float type; floats truncated to ints; complex numbers
    made from floats."""
    x = b.pick_float(lambda v: not is_complex(v.dtype))
    if x is None:
        return False
    rng, s = b.rng, b.gen.setting
    r = rng.random()
    if s.complex and r < 0.6:
        y = b.fitted_float(x.shape, s.real)
        form = rng.choice(("lax.complex({x}, {y})", "{x} * (0.5 + 1j)",
                           "{x}.astype(" + JNP_DTYPE[s.complex] + ") + 1j * {y}"))
        b.define(form.format(x=x.name, y=y.name), x.shape, s.complex, x.mag + y.mag)
    elif r < 0.8 or s.low_precision:
        via = {"float32": "float16", "float64": "float32"}.get(s.real, "float32")
        via = rng.choice((via, "bfloat16")) if s.real != "bfloat16" else via
        b.define(f"{x.name}.astype(jnp.{via}).astype({JNP_DTYPE[s.real]})", x.shape, s.real,
                 x.mag * 1.01)
    else:
        m = math.ceil(x.mag)
        b.define(f"{x.name}.astype(jnp.int32)", x.shape, "int32", lo=-m, hi=m)
    return True


# -- control flow: a nested function body, generated into its own Block


def nested_ops(body: Block) -> None:
    run_ops(body, body.rng.randint(1, 4))


def pack(names: list[str]) -> str:
    """How several values are passed as one (a tuple), or one as itself."""
    return names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"


def carry_inits(b: Block, count: int) -> list[Val]:
    vals: list[Val] = []
    for _ in range(count):
        v = b.pick_float(lambda v: v not in vals and v.size <= 40)
        if v is not None:
            vals.append(v)
    return vals


def carry_params(body: Block, inits: list[Val]) -> list[Val]:
    """The body's names for the carries, with a bound no smaller than 1 (the bodies squash
    what they carry into it)."""
    out = []
    for v in inits:
        p = Val(body.gen.fresh("c"), v.shape, v.dtype, max(v.mag, 1.0))
        body.values.append(p)
        out.append(p)
    return out


def carried_results(body: Block, params: list[Val]) -> list[str]:
    """The next values of the carries, from what the body computed."""
    out = []
    for p in params:
        v = body.pick_float(result=True)
        out.append(body.carried(v, p).name)
    return out


def op_scan(b: Block) -> bool:
    rng, gen = b.rng, b.gen
    inits = carry_inits(b, rng.randint(1, 2))
    if not inits:
        return False
    xs: list[Val] = []
    first = b.pick(lambda v: len(v.shape) >= 1 and v.dtype != "bool" and v.shape[0] > 1)
    if first is not None and rng.random() < 0.75:
        xs.append(first)
        length = first.shape[0]
        if rng.random() < 0.4:
            xs.append(b.fitted_float((length,) + random_shape(rng, rng.randint(0, 2)),
                                     rng.choice(gen.float_dtypes)))
    else:
        length = rng.randint(2, 5)
    counter = rng.random() < 0.3
    name = gen.fresh("step")
    body = Block(gen, b, trip=b.trip * length)
    params = carry_params(body, inits)
    slices = []
    for v in xs:
        s = Val(gen.fresh("x"), v.shape[1:], v.dtype, v.mag, lo=v.lo, hi=v.hi, exact=v.exact)
        body.values.append(s)
        slices.append(s)
    if counter:
        i = Val(gen.fresh("i"), (), "int32", lo=0, hi=length - 1)
        body.values.append(i)
    nested_ops(body)
    new = carried_results(body, params)
    ys = []
    for _ in range(rng.randint(0, 2)):
        y = body.pick(lambda v: v not in ys, result=True)
        if y is not None and y.name not in [p.name for p in params]:
            ys.append(y)
    carry_names = [p.name for p in params] + ([i.name] if counter else [])
    new_names = new + ([f"{i.name} + 1"] if counter else [])
    body.lines.insert(0, f"{pack(carry_names)} = carry")
    if xs:
        body.lines.insert(1, f"{pack([s.name for s in slices])} = x")
    header = f"def {name}(carry, {'x' if xs else '_'}):"
    b.emit_def(header, body, f"{pack(new_names)}, {pack([y.name for y in ys]) if ys else None}")
    init = pack([v.name for v in inits] + (["jnp.int32(0)"] if counter else []))
    xs_arg = pack([v.name for v in xs]) if xs else "None"
    options = (f", length={length}" if not xs else "") + (
        ", reverse=True" if rng.random() < 0.2 else "") + (
        ", unroll=2" if rng.random() < 0.1 else "")
    outs_c = [Val(gen.fresh("v"), p.shape, p.dtype, p.mag) for p in params]
    outs_i = [Val(gen.fresh("v"), (), "int32", lo=length, hi=length)] if counter else []
    outs_y = [Val(gen.fresh("v"), (length,) + y.shape, y.dtype, y.mag, lo=y.lo, hi=y.hi)
              for y in ys]
    target = pack([v.name for v in outs_c + outs_i]) + ", " + (
        pack([v.name for v in outs_y]) if ys else "_")
    b.emit(f"{target} = lax.scan({name}, {init}, {xs_arg}{options})")
    b.values += outs_c + outs_i + outs_y
    gen.length += 1
    return True


def branch_body(b: Block, operands: list[Val], out_types: list[Val], params: list[str]):
    """One branch of a cond: its parameters are the operands, its results have the types
    ``out_types``. Returns the block and its result names."""
    body = Block(b.gen, b, trip=b.trip)
    for name, v in zip(params, operands):
        body.values.append(dataclasses.replace(v, name=name))
    nested_ops(body)
    results = []
    for t in out_types:
        v = body.pick_float(result=True)
        v = body.fitted(v, t.shape, t.dtype)
        results.append(body.bounded(v, b.gen.setting.mag_limit / 2))
    return body, results


def op_cond(b: Block) -> bool:
    rng, gen = b.rng, b.gen
    operands = carry_inits(b, rng.randint(1, 2))
    if not operands:
        return False
    outs = [operands[0]] + ([rng.choice(operands)] if rng.random() < 0.4 else [])
    k = b.int_scalar()
    switch = k is not None and rng.random() < 0.3
    if switch:
        selector = k.name  # lax.switch clamps the index into range
    else:
        cond = b.pick(lambda v: v.dtype == "bool" and v.shape == ())
        if cond is None or rng.random() < 0.5:
            cond = comparison(b, ())
            if cond is None:
                return False
        selector = cond.name
    name = gen.fresh("branch")
    params = [gen.fresh("p") for _ in operands]
    branches = []
    mag = 0.0
    for letter in "abc"[:3 if switch else 2]:
        body, results = branch_body(b, operands, outs, params)
        b.emit_def(f"def {name}{letter}({', '.join(params)}):", body,
                   pack([r.name for r in results]) if len(results) > 1 else results[0].name)
        branches.append(f"{name}{letter}")
        mag = max([mag] + [r.mag for r in results])
    args = ", ".join(v.name for v in operands)
    results = [Val(gen.fresh("v"), t.shape, t.dtype, mag) for t in outs]
    if switch:
        call = f"lax.switch({selector}, [{', '.join(branches)}], {args})"
    else:
        call = f"lax.cond({selector}, {branches[0]}, {branches[1]}, {args})"
    return b.define_all(results, call)


def op_fori(b: Block) -> bool:
    rng, gen = b.rng, b.gen
    inits = carry_inits(b, rng.randint(1, 2))
    if not inits:
        return False
    lower = rng.choice((0, 0, 1))
    upper = lower + rng.randint(1, 4)
    name = gen.fresh("loop")
    body = Block(gen, b, trip=b.trip * (upper - lower))
    i = Val(gen.fresh("i"), (), "int32", lo=lower, hi=upper - 1)
    body.values.append(i)
    params = carry_params(body, inits)
    nested_ops(body)
    new = carried_results(body, params)
    if len(params) > 1:
        body.lines.insert(0, f"{pack([p.name for p in params])} = carry")
        header = f"def {name}({i.name}, carry):"
    else:
        header = f"def {name}({i.name}, {params[0].name}):"
    b.emit_def(header, body, pack(new))
    results = [Val(gen.fresh("v"), p.shape, p.dtype, p.mag) for p in params]
    return b.define_all(results, f"lax.fori_loop({lower}, {upper}, {name}, "
                                 f"{pack([v.name for v in inits])})")


def op_while(b: Block) -> bool:
    """A counting while_loop. JAX cannot reverse-differentiate it: the program is then
    compared in forward mode only."""
    rng, gen = b.rng, b.gen
    inits = carry_inits(b, rng.randint(1, 2))
    if not inits:
        return False
    count = rng.randint(1, 4)
    name = gen.fresh("while")
    body = Block(gen, b, trip=b.trip * count)
    i = Val(gen.fresh("i"), (), "int32", lo=0, hi=count - 1)
    body.values.append(i)
    params = carry_params(body, inits)
    nested_ops(body)
    new = carried_results(body, params)
    state = [i.name] + [p.name for p in params]
    body.lines.insert(0, f"{pack(state)} = state")
    b.emit(f"def {name}_cond(state):")
    b.emit(f"    return state[0] < {count}")
    b.emit_def(f"def {name}_body(state):", body, pack([f"{i.name} + 1"] + new))
    results = [Val(gen.fresh("v"), p.shape, p.dtype, p.mag) for p in params]
    init = pack(["jnp.int32(0)"] + [v.name for v in inits])
    b.emit(f"{pack(['_'] + [r.name for r in results])} = lax.while_loop({name}_cond, "
           f"{name}_body, {init})")
    b.values += results
    gen.reverse_ok = False
    gen.length += 1
    return True


def op_vmap(b: Block) -> bool:
    """jax.vmap of a nested function over the leading axis (one operand maybe unbatched)."""
    rng, gen = b.rng, b.gen
    first = b.pick_float(lambda v: len(v.shape) >= 1 and v.size <= 40)
    if first is None:
        return False
    length = first.shape[0]
    operands = [first]
    if rng.random() < 0.5:
        operands.append(b.fitted_float((length,) + random_shape(rng, rng.randint(0, 1)),
                                       rng.choice(gen.float_dtypes)))
    unbatched = b.pick_float(lambda v: v.size <= 12) if rng.random() < 0.3 else None
    in_axes = [0] * len(operands) + ([None] if unbatched is not None else [])
    body = Block(gen, b, trip=b.trip * length, refs_allowed=False)
    params = []
    for v in operands:
        p = Val(gen.fresh("x"), v.shape[1:], v.dtype, v.mag, exact=v.exact)
        body.values.append(p)
        params.append(p)
    if unbatched is not None:
        p = dataclasses.replace(unbatched, name=gen.fresh("u"))
        body.values.append(p)
        params.append(p)
    nested_ops(body)
    outs = []
    for _ in range(rng.randint(1, 2)):
        v = body.pick_float(result=True)
        outs.append(body.bounded(v, gen.setting.mag_limit / 2))
    name = gen.fresh("lane")
    b.emit_def(f"def {name}({', '.join(p.name for p in params)}):", body,
               pack([v.name for v in outs]))
    results = [Val(gen.fresh("v"), (length,) + v.shape, v.dtype, v.mag) for v in outs]
    axes = f", in_axes={tuple(in_axes)!r}" if unbatched is not None else ""
    args = ", ".join(v.name for v in operands + ([unbatched] if unbatched is not None else []))
    return b.define_all(results, f"jax.vmap({name}{axes})({args})")


def op_call(b: Block) -> bool:
    """A nested function called through jax.jit or jax.checkpoint."""
    rng, gen = b.rng, b.gen
    operands = carry_inits(b, rng.randint(1, 2))
    if not operands:
        return False
    params = [gen.fresh("p") for _ in operands]
    body = Block(gen, b, trip=b.trip)
    for name, v in zip(params, operands):
        body.values.append(dataclasses.replace(v, name=name))
    nested_ops(body)
    outs = [body.bounded(body.pick_float(result=True), gen.setting.mag_limit / 2)
            for _ in range(rng.randint(1, 2))]
    name = gen.fresh("inner")
    b.emit_def(f"def {name}({', '.join(params)}):", body, pack([v.name for v in outs]))
    wrapper = rng.choice(("jax.jit", "jax.checkpoint", "jax.checkpoint",
                          "functools.partial(jax.checkpoint, "
                          "policy=jax.checkpoint_policies.dots_saveable)"))
    results = [Val(gen.fresh("v"), v.shape, v.dtype, v.mag) for v in outs]
    return b.define_all(results,
                        f"{wrapper}({name})({', '.join(v.name for v in operands)})")


# -- refs


def op_new_ref(b: Block) -> bool:
    if not b.refs_allowed:
        return False
    rng = b.rng
    if rng.random() < 0.3:
        shape = random_shape(rng, rng.randint(1, 2))
        dtype = rng.choice(b.gen.float_dtypes)
        init, mag = f"jnp.zeros({shape!r}, dtype={JNP_DTYPE[dtype]})", 0.0
    else:
        v = b.pick_float(lambda v: v.size <= 40)
        if v is None:
            return False
        shape, dtype, init, mag = v.shape, v.dtype, v.name, v.mag
    r = RefVar(b.gen.fresh("r"), shape, dtype, mag, b.trip)
    b.emit(f"{r.name} = jax.new_ref({init})")
    b.refs.append(r)
    b.gen.length += 1
    if rng.random() < 0.6:
        op_ref_write(b)
    return True


def ref_index(b: Block, r: RefVar) -> tuple[str, tuple]:
    """An indexer of a ref: all of it, an int, a slice, or a dynamic int; and its shape."""
    rng = b.rng
    if not r.shape or rng.random() < 0.4:
        return "...", r.shape
    d = r.shape[0]
    form = rng.random()
    if form < 0.3:
        return str(rng.randrange(-d, d)), r.shape[1:]
    if form < 0.6 and b.int_scalar() is not None:
        return index_value(b, d), r.shape[1:]
    start = rng.randrange(d)
    stop = rng.randint(start + 1, d)
    return f"{start}:{stop}", (stop - start,) + r.shape[1:]


def op_ref_write(b: Block) -> bool:
    refs = b.visible_refs()
    if not refs:
        return False
    rng, gen = b.rng, b.gen
    r = rng.choice(refs)
    index, shape = ref_index(b, r)
    v = b.fitted_float(shape, r.dtype)
    repeats = max(1, b.trip // r.trip)
    if repeats > 1 or v.mag > gen.setting.mag_limit / 4:
        # Written again on every iteration of a loop: keep it bounded.
        v = b.bounded(v, 1.0)
    how = rng.choice(("=", "+=", "+=", "-="))
    b.emit(f"{r.name}[{index}] {how} {v.name}")
    r.mag = (r.mag + repeats * v.mag) if how != "=" else max(r.mag, v.mag)
    gen.length += 1
    return True


def op_ref_read(b: Block) -> bool:
    refs = b.visible_refs()
    if not refs:
        return False
    r = b.rng.choice(refs)
    index, shape = ref_index(b, r)
    b.define(f"{r.name}[{index}]", shape, r.dtype, max(r.mag, 1.0))
    return True


# (weight, category, operation). A program boosts two categories (Generator.boost).
OPS = (
    (14, "math", op_unary), (12, "math", op_binary), (4, "math", op_where),
    (1, "math", op_logical), (2, "math", op_int), (2, "math", op_convert),
    (7, "reduce", op_reduce), (4, "reduce", op_cumulative),
    (4, "shape", op_reshape), (3, "shape", op_transpose), (5, "shape", op_index),
    (3, "shape", op_pad), (3, "shape", op_concatenate), (2, "shape", op_broadcast),
    (3, "shape", op_rearrange),
    (3, "index", op_dynamic_index), (2, "index", op_dynamic_update), (3, "index", op_gather),
    (3, "index", op_scatter),
    (5, "matmul", op_matmul), (2, "matmul", op_dot_general),
    (4, "control", op_scan), (3, "control", op_cond), (3, "control", op_fori),
    (1.5, "control", op_while), (2, "control", op_vmap), (2, "control", op_call),
    (2, "ref", op_new_ref), (10, "ref", op_ref_write), (6, "ref", op_ref_read),
)
CATEGORIES = {cat for _, cat, _ in OPS}


# ---- programs -------------------------------------------------------------------------------

PRELUDE = '''\
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import refjit


def weights(shape):
    """Fixed weights of a loss term: every element gets its own cotangent."""
    n = int(np.prod(shape))
    return jnp.cos(jnp.arange(n) * 0.7 + 0.3).reshape(shape)


def apply_linear(out, f_jvp, tangents):
    return out, f_jvp(*tangents)


def pull_back(out, f_vjp, cotangents):
    return out, f_vjp(cotangents)
'''


@dataclasses.dataclass
class Program:
    seed: int
    setting: Setting
    params: list[str]         # f's parameters
    body: list[str]           # f's statements (indented), without the return
    outputs: list[tuple]      # (name, shape, dtype) of each output, as the generator sees them
    structure: str            # how f returns them: "tuple", "single" or "dict"
    args: list[ArraySpec]
    tangents: list[ArraySpec]
    cotangents: list[ArraySpec]  # one per output
    wrt: tuple[int, ...]      # the float arguments: grad's argnums
    reverse_ok: bool          # no while_loop: grad and vjp are compared too
    length: int               # statements, for the tolerances
    features: list[str]

    @property
    def checks(self) -> tuple[str, ...]:
        forward = ("jit", "jvp", "linearize")
        return forward + ("grad", "vjp") if self.reverse_ok else forward

    @property
    def source(self) -> str:
        """def f (the program) and def loss (a real scalar of f's outputs, for grad)."""
        params = ", ".join(self.params)
        paths = output_paths(self.structure, len(self.outputs))
        terms = [loss_term(p, dtype, self.setting) for p, (_, _, dtype) in
                 zip(paths, self.outputs)]
        returned = pytree_source(self.structure, [name for name, _, _ in self.outputs])
        return "\n".join(
            [f"def f({params}):", *self.body, f"    return {returned}", "", "",
             f"def loss({params}):",
             "    # A real scalar of every output; each element gets its own weight.",
             f"    out = f({params})",
             "    return (" + "\n            + ".join(terms) + ")"])

    def module_source(self) -> str:
        x64 = 'jax.config.update("jax_enable_x64", True)\n\n' if self.setting.x64 else ""
        return f"{PRELUDE}\n{x64}\n{self.source}\n"

    def data_source(self) -> str:
        cotangents = pytree_source(self.structure, [c.source() for c in self.cotangents])
        return (f"args = {tuple_source([a.source() for a in self.args])}\n"
                f"tangents = {tuple_source([t.source() for t in self.tangents])}\n"
                f"cotangents = {cotangents}\n")


def tuple_source(items: list[str]) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def generate(seed: int) -> Program:
    return Generator(seed).generate()


def check_code(check: str, program: Program, backend: str) -> tuple[str, str]:
    """The expressions that compute a check's result with JAX and with refjit; the run
    evaluates them and the reproducer prints them."""
    b = f'backend="{backend}"'
    wrt = program.wrt[0] if len(program.wrt) == 1 else program.wrt
    return {
        "jit": ("jax.jit(f)(*args)", f"refjit.jit(f, {b})(*args)"),
        "grad": (f"jax.jit(jax.grad(loss, argnums={wrt}))(*args)",
                 f"refjit.grad(loss, argnums={wrt}, {b})(*args)"),
        "jvp": ("jax.jvp(jax.jit(f), args, tangents)",
                f"refjit.jvp(f, args, tangents, {b})"),
        "linearize": ("jax.jvp(jax.jit(f), args, tangents)",
                      f"apply_linear(*refjit.linearize(f, *args, {b}), tangents)"),
        "vjp": ("pull_back(*jax.vjp(jax.jit(f), *args), cotangents)",
                f"pull_back(*refjit.vjp(f, *args, {b}), cotangents)"),
    }[check]


def reproducer(program: Program, checks: list[str], backend: str) -> str:
    head = (f"# Random program {program.seed} ({program.setting.name}); regenerate it with\n"
            f"#   python python/tests/random_programs.py 1 --seed {program.seed}"
            f" --backend {backend}\n")
    lines = [head + program.module_source(), program.data_source()]
    for check in checks:
        jax_code, refjit_code = check_code(check, program, backend)
        lines.append(f'print("jax    {check}:", {jax_code})')
        lines.append(f'print("refjit {check}:", {refjit_code})')
    return "\n".join(lines) + "\n"


# ---- comparing --------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    check: str
    status: str               # ok, mismatch, refusal, jax_error
    kind: str = ""            # of a mismatch: value, nan, dtype, shape, structure, type, exception
    message: str = ""


def tolerances(program: Program) -> tuple[float, float]:
    """Relative tolerances of values and of derivatives: the dtype's error per operation,
    times the program's length; derivatives go through about twice as many operations, on
    values JAX and refjit already round differently. (On correct programs refjit and JAX
    agreed to within a few percent of these, at most 15%, in the runs that set them.)"""
    value = program.setting.eps * (8 + 2 * program.length)
    return value, 8 * value


def compare(actual, expected, rtol: float) -> tuple[str, str] | None:
    """None when refjit's result ``actual`` matches JAX's ``expected``; else (kind, what)."""
    import jax
    a_leaves, a_tree = jax.tree_util.tree_flatten_with_path(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten_with_path(expected)
    if jax.tree_util.tree_structure(actual) != jax.tree_util.tree_structure(expected):
        return "structure", (f"refjit {jax.tree_util.tree_structure(actual)}, "
                             f"JAX {jax.tree_util.tree_structure(expected)}")
    for (path, a), (_, e) in zip(a_leaves, e_leaves):
        where = jax.tree_util.keystr(path) or "the result"
        if not isinstance(a, (np.ndarray, np.generic)):
            return "type", f"{where}: refjit returned {type(a).__name__}, not a NumPy array"
        e = np.asarray(e)
        if a.shape != e.shape:
            return "shape", f"{where}: refjit {a.shape}, JAX {e.shape}"
        if a.dtype != e.dtype:
            return "dtype", f"{where}: refjit {a.dtype}, JAX {e.dtype}"
        problem = compare_values(a, e, rtol)
        if problem:
            return problem[0], f"{where}: {problem[1]}"
    return None


def compare_values(a: np.ndarray, e: np.ndarray, rtol: float) -> tuple[str, str] | None:
    import jax
    if a.dtype == jax.dtypes.float0:  # JAX's tangent type of integers: no values
        return None
    if not np.issubdtype(e.dtype, np.inexact) and str(e.dtype) not in ("bfloat16",):
        if not np.array_equal(a, e):
            i = tuple(int(k) for k in np.argwhere(a != e)[0])
            return "value", f"at {i}: refjit {a[i]}, JAX {e[i]}"
        return None
    wide = np.complex128 if np.iscomplexobj(e) else np.float64
    a, e = a.astype(wide), e.astype(wide)
    finite = np.isfinite(e)
    bad = finite & ~np.isfinite(a)
    if bad.any():
        i = tuple(int(k) for k in np.argwhere(bad)[0])
        return "nan", f"at {i}: refjit {a[i]}, JAX {e[i]}"
    if not finite.any():
        return None
    # Relative to each element, and to the array's scale: an element that is small after
    # cancellation carries the absolute error of the large values it came from.
    scale = max(1.0, float(np.max(np.abs(e[finite]))))
    err = np.where(finite, np.abs(a - e), 0.0)
    allowed = rtol * (np.abs(e) + scale)
    over = err > np.where(finite, allowed, np.inf)
    if over.any():
        i = tuple(int(k) for k in np.argwhere(over)[np.argmax((err / allowed)[over])])
        return "value", (f"at {i}: refjit {a[i]}, JAX {e[i]} (error {err[i]:.3g}, "
                         f"allowed {allowed[i]:.3g}; rtol {rtol:.2g})")
    return None


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def set_x64(on: bool) -> None:
    import jax
    jax.config.update("jax_enable_x64", on)


def load(program: Program) -> dict:
    """The program's namespace: f, loss, args, tangents, cotangents and the helpers."""
    filename = f"<random program {program.seed}>"
    source = program.module_source() + "\n" + program.data_source()
    # Tracebacks show the generated lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {"__name__": f"random_program_{program.seed}"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def validate(program: Program, ns: dict) -> str | None:
    """A generator bug, if JAX does not see the program as the generator does (its outputs'
    shapes and dtypes)."""
    import jax
    try:
        shapes = jax.eval_shape(ns["f"], *ns["args"])
    except Exception as e:  # noqa: BLE001 - any failure of JAX here is the generator's
        return f"JAX cannot trace the program: {first_line(e)}"
    got = [(tuple(s.shape), str(s.dtype)) for s in jax.tree_util.tree_leaves(shapes)]
    want = [(tuple(shape), dtype) for _, shape, dtype in program.outputs]
    if got != want:
        return f"the generator expected outputs {want}, JAX traced {got}"
    return None


def run_check(check: str, program: Program, ns: dict, backend: str, expected_cache: dict):
    """One check: JAX's result, then refjit's, compared."""
    import refjit
    jax_code, refjit_code = check_code(check, program, backend)
    vtol, dtol = tolerances(program)
    try:
        if jax_code not in expected_cache:
            expected_cache[jax_code] = jax_tree_to_numpy(eval(jax_code, ns))
        expected = expected_cache[jax_code]
    except Exception as e:  # noqa: BLE001 - JAX does not support this: nothing to compare
        return Outcome(check, "jax_error", message=first_line(e))
    if check not in ("jit", "grad"):
        # JAX is the oracle only where it agrees with itself: its transformations' primal
        # outputs must be its jit's values (JAX 0.10.2's vjp of a scan with unroll > 1 whose
        # body writes a ref returns a wrong primal, program 2021).
        jit_code = check_code("jit", program, backend)[0]
        try:
            if jit_code not in expected_cache:
                expected_cache[jit_code] = jax_tree_to_numpy(eval(jit_code, ns))
            if compare(expected[0], expected_cache[jit_code], vtol):
                return Outcome(check, "jax_error",
                               message=f"JAX's {check} gives other primal outputs than its jit")
        except Exception:  # noqa: BLE001 - no jit value to hold JAX to
            pass
    try:
        actual = eval(refjit_code, ns)
    except refjit.Error as e:
        if "internal error" in str(e):  # refjit's own consistency check failed: a bug
            return Outcome(check, "mismatch", "internal", str(e)[:1500])
        return Outcome(check, "refusal", message=first_line(e))
    except Exception as e:  # noqa: BLE001 - anything else refjit raises is a bug
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        return Outcome(check, "mismatch", "exception", first_line(e) + "\n" + "".join(tb[-3:]))
    if check == "jit":
        problem = compare(actual, expected, vtol)
    elif check == "grad":
        problem = compare(actual, expected, dtol)
    else:  # (primal outputs, derivatives)
        if not isinstance(actual, tuple) or len(actual) != 2:
            return Outcome(check, "mismatch", "structure", f"refjit returned {type(actual)}")
        problem = compare(actual[0], expected[0], vtol) or compare(actual[1], expected[1], dtol)
    if problem:
        # XLA's optimisations can make jax.jit disagree with JAX itself (program 10785: NaN
        # cotangents through a min's mask, which XLA's simplifier turns into zeros; program
        # 9880, complex64; program 14141: a dynamic_slice fused into a scatter-mul in a loop
        # body reads past its clamped start). JAX's eager result, every primitive run on its
        # own (jax.disable_jit: loops too), is then the reference: refjit agreeing with it is
        # no bug.
        import jax
        wrt = program.wrt[0] if len(program.wrt) == 1 else program.wrt
        eager_code = {"jit": "f(*[jnp.asarray(a) for a in args])", "grad": f"jax.grad(loss, argnums={wrt})(*args)",
                      "jvp": "jax.jvp(f, args, tangents)",
                      "linearize": "jax.jvp(f, args, tangents)",
                      "vjp": "pull_back(*jax.vjp(f, *args), cotangents)"}[check]

        def differs(a, b):
            if check == "jit":
                return compare(a, b, vtol)
            if check == "grad":
                return compare(a, b, dtol)
            return compare(a[0], b[0], vtol) or compare(a[1], b[1], dtol)

        try:
            with jax.disable_jit():
                eager = jax_tree_to_numpy(eval(eager_code, ns))
            if differs(eager, expected) and not differs(actual, eager):
                return Outcome(check, "jax_error",
                               message=f"jax.jit's {check} differs from JAX's eager {check}, "
                                       "which refjit matches")
        except Exception:  # noqa: BLE001 - no eager value: the mismatch stands
            pass
    if problem:
        return Outcome(check, "mismatch", problem[0], problem[1])
    return Outcome(check, "ok")


def jax_tree_to_numpy(tree):
    import jax
    # A Python scalar JAX hands back typed (a float subclass with a dtype) keeps its dtype.
    return jax.tree_util.tree_map(lambda x: np.asarray(x, dtype=getattr(x, "dtype", None)), tree)


def run_program(seed: int, backend: str) -> dict:
    """Generates program ``seed``, runs every check, and returns the result (JSON-able)."""
    import refjit
    start = time.perf_counter()
    program = generate(seed)
    result = {"seed": seed, "setting": program.setting.name, "length": program.length,
              "features": program.features, "outcomes": [], "invalid": None,
              "reproducer": None}
    previous_x64 = jax_x64()
    set_x64(program.setting.x64)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ns = load(program)
            result["invalid"] = validate(program, ns)
            if result["invalid"] is None:
                cache: dict = {}
                outcomes = [run_check(c, program, ns, backend, cache) for c in program.checks]
                result["outcomes"] = [dataclasses.asdict(o) for o in outcomes]
                bad = [o.check for o in outcomes if o.status == "mismatch"]
                if bad:
                    result["reproducer"] = reproducer(program, bad, backend)
            else:
                result["reproducer"] = reproducer(program, ["jit"], backend)
    finally:
        refjit.clear_cache()
        set_x64(previous_x64)
    result["seconds"] = time.perf_counter() - start
    return result


def jax_x64() -> bool:
    import jax
    return bool(jax.config.read("jax_enable_x64"))


# ---- shrinking a mismatch ------------------------------------------------------------------------


def statements(body: list[str]) -> list[tuple[int, int]]:
    """(first, end) line ranges of f's statements that can be deleted: a line with the lines
    indented under it (a nested def), but not a return or the unpacking of a body's
    parameters."""
    out = []
    for k, line in enumerate(body):
        text = line.strip()
        indent = len(line) - len(line.lstrip())
        if text.startswith("return") or text.endswith(("= carry", "= x", "= state")):
            continue
        end = k + 1
        while end < len(body) and len(body[end]) - len(body[end].lstrip()) > indent:
            end += 1
        out.append((k, end))
    return out


def without_output(program: Program, k: int) -> Program:
    keep = [j for j in range(len(program.outputs)) if j != k]
    return dataclasses.replace(program, outputs=[program.outputs[j] for j in keep],
                               cotangents=[program.cotangents[j] for j in keep])


def fewer_terms(program: Program, k: int):
    """Line k with one term fewer, if it is a sum of terms (the output that collects the values
    nothing else uses)."""
    name, _, expr = program.body[k].partition(" = ")
    terms = expr.split(" + jnp.mean(")
    if len(terms) < 2 or not terms[0].startswith("jnp.mean("):
        return
    terms = [terms[0]] + ["jnp.mean(" + t for t in terms[1:]]
    for j in range(len(terms)):
        line = f"{name} = " + " + ".join(terms[:j] + terms[j + 1:])
        yield dataclasses.replace(program, body=program.body[:k] + [line] + program.body[k + 1:])


def shrink(program: Program, check: str, kind: str, backend: str) -> Program:
    """The program with every output and statement deleted whose deletion keeps the mismatch
    (same check, same kind): outputs first, then statements from the last to the first, in
    passes until one deletes nothing."""
    def fails(candidate: Program) -> bool:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ns = load(candidate)
                if validate(candidate, ns):
                    return False
                outcome = run_check(check, candidate, ns, backend, {})
        except Exception:  # noqa: BLE001 - a candidate that does not even load
            return False
        finally:
            import refjit
            refjit.clear_cache()
        return outcome.status == "mismatch" and outcome.kind == kind

    def one_pass(program: Program) -> Program:
        for k in reversed(range(len(program.outputs))):
            if len(program.outputs) > 1 and fails(without_output(program, k)):
                program = without_output(program, k)
        for k, line in enumerate(program.body):  # the terms of the sinks' output
            for candidate in fewer_terms(program, k):
                if fails(candidate):
                    program = candidate
                    break
        position = len(program.body)
        while True:
            # Deleting a statement leaves the lines before it where they were.
            earlier = [r for r in statements(program.body) if r[0] < position]
            if not earlier:
                return program
            first, end = earlier[-1]
            position = first
            candidate = dataclasses.replace(program,
                                            body=program.body[:first] + program.body[end:])
            if fails(candidate):
                program = candidate

    previous_x64 = jax_x64()
    set_x64(program.setting.x64)
    try:
        while True:
            smaller = one_pass(program)
            if smaller == program:
                break
            program = smaller
    finally:
        set_x64(previous_x64)
    return program


def shrunk_reproducer(result: dict, backend: str) -> str | None:
    """A reproducer of the result's first mismatch, shrunk; None if it cannot be shrunk
    in-process (a crash or a hang)."""
    bad = [o for o in result["outcomes"] if o["status"] == "mismatch"]
    if not bad or bad[0]["kind"] in ("crash", "hang") or result["invalid"]:
        return None
    program = shrink(generate(result["seed"]), bad[0]["check"], bad[0]["kind"], backend)
    return reproducer(program, [bad[0]["check"]], backend)


# ---- running many programs, the summary ---------------------------------------------------------

PROTOCOL = "@@random_programs "   # prefix of the worker's lines to its parent


def worker(first: int, count: int, backend: str) -> None:
    """Runs programs first .. first+count-1, one JSON line each on stdout."""
    import jax
    out = sys.stdout
    sys.stdout = sys.stderr  # anything else printed must not mix with the protocol
    for seed in range(first, first + count):
        print(PROTOCOL + json.dumps({"start": seed}), file=out, flush=True)
        result = run_program(seed, backend)
        print(PROTOCOL + json.dumps({"result": result}), file=out, flush=True)
        if (seed - first) % 25 == 24:
            jax.clear_caches()


def run_isolated(first: int, count: int, backend: str, timeout: float,
                 report: Callable[[dict], None]) -> None:
    """Runs the programs in worker processes; a worker that dies or stalls for ``timeout``
    seconds is reported as a crash or a hang of the program it was running, and a new worker
    goes on with the next program."""
    seed, end = first, first + count
    while seed < end:
        with tempfile.TemporaryFile("w+") as stderr:
            proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--worker", str(end - seed),
                 "--seed", str(seed), "--backend", backend],
                stdout=subprocess.PIPE, stderr=stderr, text=True)
            current, failure = None, None
            selector = selectors.DefaultSelector()
            selector.register(proc.stdout, selectors.EVENT_READ)
            while True:
                if not selector.select(timeout):
                    proc.kill()
                    failure = ("hang", f"no result after {timeout:.0f} s")
                    break
                line = proc.stdout.readline()
                if not line:
                    break
                if not line.startswith(PROTOCOL):
                    continue
                message = json.loads(line[len(PROTOCOL):])
                if "start" in message:
                    current = message["start"]
                else:
                    report(message["result"])
                    seed = message["result"]["seed"] + 1
                    current = None
            code = proc.wait()
            selector.close()
            if current is None and failure is None and code == 0:
                continue
            if current is None:  # died before its first program: nothing to blame
                stderr.seek(0)
                raise RuntimeError(f"worker exited with {code}:\n{stderr.read()[-3000:]}")
            if failure is None:
                failure = ("crash", f"the worker process exited with status {code}")
            stderr.seek(0)
            tail = stderr.read()[-2000:]
            report(failed_program_result(current, backend, failure, tail))
            seed = current + 1


def failed_program_result(seed: int, backend: str, failure: tuple[str, str], tail: str) -> dict:
    program = generate(seed)
    message = failure[1] + ("\n" + tail if tail.strip() else "")
    return {"seed": seed, "setting": program.setting.name, "length": program.length,
            "features": program.features, "invalid": None, "seconds": 0.0,
            "outcomes": [{"check": "program", "status": "mismatch", "kind": failure[0],
                          "message": message}],
            "reproducer": reproducer(program, list(program.checks), backend)}


def refusal_key(message: str) -> str:
    """Refusals grouped by message, numbers and names masked."""
    return re.sub(r"\d+", "N", message)[:160]


def has_mismatch(result: dict) -> bool:
    """Whether a program's result fails the run: a mismatch, or a generator bug."""
    return bool(result["invalid"]) or any(o["status"] == "mismatch" for o in result["outcomes"])


class Summary:
    def __init__(self):
        self.results: list[dict] = []

    def add(self, result: dict) -> None:
        self.results.append(result)

    def mismatches(self) -> list[dict]:
        return [r for r in self.results if has_mismatch(r)]

    def text(self, backend: str, first: int, seconds: float) -> str:
        rs = self.results
        compared = [r for r in rs if not r["invalid"]]
        checks = collections.Counter()
        kinds = collections.Counter()
        refusals: dict[str, list] = {}
        jax_errors: dict[str, list] = {}
        for r in compared:
            for o in r["outcomes"]:
                checks[(o["check"], o["status"])] += 1
                if o["status"] == "mismatch":
                    kinds[f"{o['check']}: {o['kind']}"] += 1
                elif o["status"] == "refusal":
                    refusals.setdefault(refusal_key(o["message"]), []).append(r["seed"])
                elif o["status"] == "jax_error":
                    jax_errors.setdefault(refusal_key(o["message"]), []).append(r["seed"])
        lines = [f"random programs: seeds {first}..{first + len(rs) - 1}, backend {backend}",
                 f"generated {len(rs)}, compared {len(compared)}"
                 f" (generator bugs: {len(rs) - len(compared)})"]
        settings = collections.Counter(r["setting"] for r in rs)
        lines.append("dtypes: " + ", ".join(f"{k} {v}" for k, v in settings.most_common()))
        names = sorted({c for c, _ in checks}, key=["jit", "grad", "vjp", "jvp", "linearize",
                                                    "program"].index)
        for c in names:
            lines.append(f"  {c:10s}" + ", ".join(
                f"{s} {checks[(c, s)]}" for s in ("ok", "mismatch", "refusal", "jax_error")
                if checks[(c, s)]))
        bad = self.mismatches()
        lines.append(f"mismatches: {sum(kinds.values())} in {len(bad)} programs")
        for k, n in kinds.most_common():
            lines.append(f"  {n:5d}  {k}")
        lines.append(f"refusals: {sum(len(v) for v in refusals.values())}")
        for k, seeds in sorted(refusals.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"  {len(seeds):5d}  {k}  (e.g. seed {seeds[0]})")
        if jax_errors:
            lines.append("not compared, JAX failed: "
                         f"{sum(len(v) for v in jax_errors.values())}")
            for k, seeds in sorted(jax_errors.items(), key=lambda kv: -len(kv[1])):
                lines.append(f"  {len(seeds):5d}  {k}  (e.g. seed {seeds[0]})")
        per = seconds / max(1, len(rs))
        lines.append(f"time: {seconds:.0f} s, {per:.2f} s per program")
        lines.append(f"random_programs: {len(rs)} programs, {len(bad)} with mismatches")
        return "\n".join(lines)


def mismatch_report(result: dict) -> str:
    lines = [f"==== MISMATCH: program {result['seed']} ({result['setting']}, "
             f"{result['length']} statements)"]
    if result["invalid"]:
        lines.append(f"  generator bug: {result['invalid']}")
    for o in result["outcomes"]:
        if o["status"] == "mismatch":
            lines.append(f"  {o['check']}: {o['kind']}: {o['message']}")
    lines.append("---- reproducer")
    lines.append(result["reproducer"] or "")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("count", type=int, help="number of programs")
    parser.add_argument("--seed", type=int, default=1, help="first program (default 1)")
    parser.add_argument("--backend", choices=("native", "interpreter"), default="native")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds without a result before a program counts as a hang")
    parser.add_argument("--in-process", action="store_true",
                        help="no worker processes (a crash ends the run)")
    parser.add_argument("--print", action="store_true",
                        help="print the programs' reproducers instead of running them")
    parser.add_argument("--shrink", action="store_true",
                        help="also print each mismatch's reproducer with the statements "
                             "that do not matter to it deleted")
    parser.add_argument("-v", "--verbose", action="store_true", help="a line per program")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        worker(args.seed, args.count, args.backend)
        return 0
    if args.print:
        for seed in range(args.seed, args.seed + args.count):
            program = generate(seed)
            print(reproducer(program, list(program.checks), args.backend))
        return 0

    summary = Summary()
    start = time.perf_counter()

    def report(result: dict) -> None:
        summary.add(result)
        if args.verbose:
            status = ",".join(f"{o['check']}={o['status']}" for o in result["outcomes"])
            print(f"program {result['seed']} {result['setting']} {result['length']} "
                  f"statements {result['seconds']:.2f} s: {result['invalid'] or status}",
                  flush=True)
        if has_mismatch(result):
            print(mismatch_report(result), flush=True)
            if args.shrink:
                shrunk = shrunk_reproducer(result, args.backend)
                if shrunk:
                    print("---- shrunk reproducer\n" + shrunk, flush=True)

    if args.in_process:
        for seed in range(args.seed, args.seed + args.count):
            report(run_program(seed, args.backend))
    else:
        run_isolated(args.seed, args.count, args.backend, args.timeout, report)
    print(summary.text(args.backend, args.seed, time.perf_counter() - start))
    return 1 if summary.mismatches() else 0


if __name__ == "__main__":
    sys.exit(main())
