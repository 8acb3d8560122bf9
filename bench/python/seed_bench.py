"""The seed's loss in Python: refjit.grad against jax.jit(jax.grad(...)) and against refjit's
C++ API, in one run (scripts/bench.sh python; docs/benchmarks.md, "From Python").

For every insert mode and N_ROW_REPEATS in --repeats, the seed's own JAX code
(examples/python/seed_insert.py) is differentiated at w = 2 by refjit.grad (the Python
package) and by jax.jit(jax.grad(...)), the two gradients are compared, and each is timed:
the median of --runs calls after one warm-up call (JAX's slow rows stop after --jax-seconds).
The C++ API's time for the same row comes from bench/seed_bench.cpp, run in the same
invocation (--cpp-bench, one round). Prints a Markdown table; --json writes the rows.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
import seed_insert  # noqa: E402

import refjit  # noqa: E402


def median_ms(call, runs: int, budget_s: float | None = None) -> tuple[float, int]:
    times = []
    start = time.perf_counter()
    for _ in range(runs):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
        if budget_s is not None and len(times) >= 3 and time.perf_counter() - start > budget_s:
            break
    return 1e3 * float(np.median(times)), len(times)


def cpp_api_times(binary: str, repeats: list[int], runs: int) -> dict:
    """(mode, R) -> the C++ API's median grad time in ms, from one round of refjit_bench_seed."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "seed.json")
        subprocess.run([binary, "--rounds", "1", "--runs", str(runs), "--repeats",
                        ",".join(map(str, repeats)), "--json", out],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            rows = json.load(f)["rows"]
    return {(r["program"], r["n_row_repeats"]): r["median_ms"] for r in rows
            if r["part"] == "loss_fn" and r["variant"] == "grad"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=21)
    p.add_argument("--repeats", default="1,10", help="N_ROW_REPEATS values")
    p.add_argument("--modes", default=",".join(seed_insert.MODES))
    p.add_argument("--jax-seconds", type=float, default=4.0,
                   help="time budget of one JAX row (at least 3 calls)")
    p.add_argument("--cpp-bench", help="path of refjit_bench_seed (omit to skip the C++ column)")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args()
    repeats = [int(r) for r in args.repeats.split(",")]
    modes = args.modes.split(",")

    cpp = cpp_api_times(args.cpp_bench, repeats, args.runs) if args.cpp_bench else {}
    w = np.float32(2)
    rows = []
    for r in repeats:
        fns = seed_insert.loss_fns(n_row_repeats=r)
        for mode in modes:
            f = fns[mode]
            g_refjit = refjit.grad(f)
            t0 = time.perf_counter()
            ours = float(g_refjit(w))
            compile_ms = 1e3 * (time.perf_counter() - t0)
            refjit_ms, _ = median_ms(lambda: g_refjit(w), args.runs)
            g_jax = jax.jit(jax.grad(f))
            theirs = float(g_jax(w))
            jax_ms, jax_runs = median_ms(lambda: g_jax(w).block_until_ready(), args.runs,
                                         args.jax_seconds)
            rows.append({
                "mode": mode, "n_row_repeats": r, "refjit_python_ms": refjit_ms,
                "refjit_cpp_ms": cpp.get((mode, r)), "jax_ms": jax_ms, "jax_runs": jax_runs,
                "refjit_compile_ms": compile_ms, "grad_refjit": ours, "grad_jax": theirs,
                "grads_agree": bool(np.isclose(ours, theirs, rtol=1e-4, atol=0)),
            })

    print("| mode | R | refjit.grad (Python) ms | refjit C++ API ms | Python / C++ | "
          "jax.jit(jax.grad) ms | JAX / refjit | gradients agree |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        c = row["refjit_cpp_ms"]
        ratio = f"{row['refjit_python_ms'] / c:.2f}" if c else "n/a"
        print(f"| {row['mode']} | {row['n_row_repeats']} | {row['refjit_python_ms']:.3f} | "
              f"{c:.3f} | {ratio} | " if c else
              f"| {row['mode']} | {row['n_row_repeats']} | {row['refjit_python_ms']:.3f} | n/a | "
              f"n/a | ", end="")
        print(f"{row['jax_ms']:.2f} | {row['jax_ms'] / row['refjit_python_ms']:.0f}x | "
              f"{'yes' if row['grads_agree'] else 'NO'} ({row['grad_refjit']:.8f}) |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "seed grad from Python",
                       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                       "machine": platform.machine(), "python": platform.python_version(),
                       "jax": jax.__version__, "runs": args.runs, "rows": rows}, f, indent=1)
    return 0 if all(row["grads_agree"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
