#!/usr/bin/env python3
"""Random jax.numpy programs for differential runs against refjit (needs JAX).

Usage: random_programs.py COUNT SEED OUTDIR

Each program draws 1-3 float inputs of small shapes and grows a pool of values with random
jax.numpy operations (elementwise math, broadcasting, reductions, cumulative ops, sorting,
matmuls, slicing, indexing, where, concatenation), then returns the sum of a few pool values.
OUTDIR gets the program, JAX's gradient and JVP programs and a manifest.json in the corpus
format, so `run_corpus.py REFJIT --cases OUTDIR` checks refjit against JAX on all of them.
scripts/jax_corpus.sh random COUNT [SEED] does both.
"""
import os
import random
import sys

import numpy as np

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from generate import write_case, write_manifest  # noqa: E402

SHAPES = [(), (3,), (4,), (2, 3), (3, 4), (2, 3, 4)]

# Elementwise maps kept finite on any input (so gradients are comparable everywhere).
UNARY = [
    ("sin", jnp.sin), ("cos", jnp.cos), ("tanh", jnp.tanh), ("sigmoid", jax.nn.sigmoid),
    ("exp_clip", lambda x: jnp.exp(jnp.clip(x, -3.0, 3.0))),
    ("log_abs1", lambda x: jnp.log(jnp.abs(x) + 1.0)),
    ("sqrt_abs", lambda x: jnp.sqrt(jnp.abs(x) + 0.5)),
    ("square", jnp.square), ("softplus", jax.nn.softplus), ("erf", jax.scipy.special.erf),
    ("relu", jax.nn.relu), ("atan", jnp.arctan), ("neg", jnp.negative),
    ("cube", lambda x: x ** 3), ("log1p_abs", lambda x: jnp.log1p(jnp.abs(x))),
]
BINARY = [
    ("add", jnp.add), ("sub", jnp.subtract), ("mul", jnp.multiply),
    ("div_safe", lambda x, y: x / (jnp.abs(y) + 1.0)),
    ("maximum", jnp.maximum), ("minimum", jnp.minimum),
    ("where_gt", lambda x, y: jnp.where(x > y, x, y * 0.5)),
    ("atan2", jnp.arctan2),
    ("pow_safe", lambda x, y: (jnp.abs(x) + 0.5) ** jnp.clip(y, -2.0, 2.0)),
]


def broadcastable(a, b):
    if len(a) != len(b):
        return a == () or b == ()
    return all(x == y or x == 1 or y == 1 for x, y in zip(a, b))


def random_program(rng):
    shapes = [rng.choice(SHAPES) for _ in range(rng.randint(1, 3))]
    steps = []  # (kind, payload) applied to the pool, recorded to replay under tracing

    # Decide the steps with shapes only, so the program is a fixed sequence of jnp calls.
    pool = list(shapes)
    for _ in range(rng.randint(3, 9)):
        k = rng.random()
        i = rng.randrange(len(pool))
        s = pool[i]
        if k < 0.3:
            name, _ = rng.choice(UNARY)
            steps.append(("unary", name, i))
            pool.append(s)
        elif k < 0.55:
            j = rng.randrange(len(pool))
            t = pool[j]
            if not broadcastable(s, t):
                # Make them broadcast: a trailing size-1 axis against the other's shape.
                if len(s) == 1 and len(t) == 1:
                    steps.append(("outer", rng.choice(BINARY)[0], i, j))
                    pool.append((s[0], t[0]))
                continue
            name = rng.choice(BINARY)[0]
            steps.append(("binary", name, i, j))
            pool.append(tuple(np.broadcast_shapes(s, t)))
        elif k < 0.65 and s:
            axis = rng.randrange(len(s))
            how = rng.choice(["sum", "mean", "max", "min", "prod_safe", "logsumexp"])
            steps.append(("reduce", how, i, axis))
            pool.append(s[:axis] + s[axis + 1:])
        elif k < 0.72 and s:
            axis = rng.randrange(len(s))
            how = rng.choice(["cumsum", "cumprod_safe", "cummax", "sort", "softmax", "flip"])
            steps.append(("along", how, i, axis))
            pool.append(s)
        elif k < 0.8 and len(s) >= 1:
            # s[..., n] @ W[n, m] with a fresh constant W drawn now.
            m = rng.choice([2, 3])
            w = np.asarray(np.random.default_rng(rng.randrange(1 << 30)).uniform(
                -1, 1, size=(s[-1], m)), np.float32)
            steps.append(("matmul", w, i))
            pool.append(s[:-1] + (m,))
        elif k < 0.88 and s and s[0] >= 2:
            idx = np.asarray([rng.randrange(s[0]) for _ in range(rng.randint(1, 4))], np.int32)
            steps.append(("take", idx, i))
            pool.append((len(idx),) + s[1:])
        elif k < 0.94 and s and s[0] >= 2:
            steps.append(("slice", i))
            pool.append((s[0] - 1,) + s[1:])
        else:
            j = rng.randrange(len(pool))
            if pool[j] == s and s:
                steps.append(("concat", i, j))
                pool.append((2 * s[0],) + s[1:])
    outs = sorted({len(pool) - 1, rng.randrange(len(pool))})

    unary, binary = dict(UNARY), dict(BINARY)

    def f(*xs):
        vals = list(xs)
        for st in steps:
            kind = st[0]
            if kind == "unary":
                vals.append(unary[st[1]](vals[st[2]]))
            elif kind == "binary":
                vals.append(binary[st[1]](vals[st[2]], vals[st[3]]))
            elif kind == "outer":
                vals.append(binary[st[1]](vals[st[2]][:, None], vals[st[3]][None, :]))
            elif kind == "reduce":
                x, ax = vals[st[2]], st[3]
                r = {"sum": lambda: jnp.sum(x, axis=ax), "mean": lambda: jnp.mean(x, axis=ax),
                     "max": lambda: jnp.max(x, axis=ax), "min": lambda: jnp.min(x, axis=ax),
                     "prod_safe": lambda: jnp.prod(jnp.tanh(x) + 1.5, axis=ax),
                     "logsumexp": lambda: jax.nn.logsumexp(x, axis=ax)}[st[1]]
                vals.append(r())
            elif kind == "along":
                x, ax = vals[st[2]], st[3]
                r = {"cumsum": lambda: jnp.cumsum(x, axis=ax),
                     "cumprod_safe": lambda: jnp.cumprod(jnp.tanh(x) + 1.5, axis=ax),
                     "cummax": lambda: jax.lax.cummax(x, axis=ax),
                     "sort": lambda: jnp.sort(x, axis=ax),
                     "softmax": lambda: jax.nn.softmax(x, axis=ax),
                     "flip": lambda: jnp.flip(x, axis=ax)}[st[1]]
                vals.append(r())
            elif kind == "matmul":
                vals.append(vals[st[2]] @ st[1])
            elif kind == "take":
                vals.append(vals[st[2]][st[1]])
            elif kind == "slice":
                vals.append(vals[st[1]][1:])
            elif kind == "concat":
                vals.append(jnp.concatenate([vals[st[1]], vals[st[2]]]))
        return sum(jnp.sum(vals[o]) for o in outs)

    args = [np.asarray(np.random.default_rng(rng.randrange(1 << 30)).uniform(-2, 2, size=s),
                       np.float32) for s in shapes]
    return f, args


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    count, seed, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(seed)
    manifest = []
    for n in range(count):
        f, args = random_program(rng)
        name = f"random_{seed}_{n}"
        # Sums of many float32 terms: compare with a looser tolerance than the corpus.
        manifest.append(write_case(out, name, f, args, tol=1e-4))
    write_manifest(out, manifest)
    print(f"wrote {count} programs to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
