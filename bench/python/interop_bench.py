"""What crossing between JAX and refjit costs, in one run (scripts/bench.sh python; docs/
benchmarks.md, "From Python"):

- dispatch: a cached call on 16 floats of refjit.jit(f) and of jax.jit(f) from Python;
- the custom call: jax.jit of a function calling refjit.jit(f) (XLA calls refjit's compiled
  code, python/src/xla_ffi.cpp) against jax.jit(f), on 16 floats and on 1M;
- the seed inside a JAX program: jax.jit(jax.grad(loss)) where the loss calls refjit.jit of
  the seed's row-updating scan, against the same with JAX's own scan, gradients compared.

Each figure is the median of --runs calls after a warm-up call, all in this process.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
import seed_insert  # noqa: E402

import refjit  # noqa: E402


def median_us(call, runs: int) -> float:
    call()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return 1e6 * float(np.median(times))


def affine(x):
    return x * 2.0 + 1.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=2001)
    p.add_argument("--seed-runs", type=int, default=11)
    args = p.parse_args()
    ok = True
    rows = []

    small = np.linspace(0, 1, 16, dtype=np.float32)
    big = np.linspace(0, 1, 1 << 20, dtype=np.float32)
    r_affine, j_affine = refjit.jit(affine), jax.jit(affine)
    rows.append(("refjit.jit(f)(x), 16 floats (dispatch)",
                 median_us(lambda: r_affine(small), args.runs),
                 "jax.jit(f)(x)", median_us(lambda: j_affine(small).block_until_ready(),
                                            args.runs)))
    inside = jax.jit(lambda x: r_affine(x))
    for x, what in ((small, "16 floats"), (big, "1M floats")):
        runs = args.runs if x.size < 1000 else max(args.runs // 20, 11)
        ok &= bool(np.array_equal(np.asarray(inside(x)), np.asarray(j_affine(x))))
        rows.append((f"jax.jit(refjit.jit(f))(x), {what} (custom call)",
                     median_us(lambda: inside(x).block_until_ready(), runs),
                     "jax.jit(f)(x)", median_us(lambda: j_affine(x).block_until_ready(), runs)))

    w = np.float32(2)
    loss = seed_insert.loss_fns(n_row_repeats=1)["slice1"]
    inner = refjit.jit(loss)
    mixed = jax.jit(jax.grad(lambda w: inner(w) * 1.0))
    pure = jax.jit(jax.grad(loss))
    g_mixed, g_pure = float(mixed(w)), float(pure(w))
    agree = bool(np.isclose(g_mixed, g_pure, rtol=1e-4, atol=0))
    ok &= agree
    rows.append(("jax.jit(jax.grad(loss calling refjit.jit(seed scan)))",
                 median_us(lambda: mixed(w).block_until_ready(), args.seed_runs),
                 "jax.jit(jax.grad(loss))",
                 median_us(lambda: pure(w).block_until_ready(), args.seed_runs)))

    print("| call | refjit us | JAX equivalent | JAX us | JAX / refjit |")
    print("| --- | --- | --- | --- | --- |")
    for what, ours, theirs_what, theirs in rows:
        print(f"| {what} | {ours:.1f} | {theirs_what} | {theirs:.1f} | {theirs / ours:.2f} |")
    print(f"\nseed gradient inside jax.jit: {g_mixed:.8f}, JAX's {g_pure:.8f}: "
          f"{'agree' if agree else 'DIFFER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
