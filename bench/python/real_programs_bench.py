"""Training steps of each real program (python/tests/real_programs/: flax linen and NNX with
optax, and plain JAX, written as their communities write them), timed under `jax.jit` and
under `refjit.jit` of the same step, unchanged, with refjit's defaults. Each trains as a
user's loop does, the state a step returns going into the next.

    .venv/bin/python bench/python/real_programs_bench.py [--runs N] [--background-load N]
                                                          [--only NAME,...] [--json OUT]

Each step is compiled and run three times first, then timed `--runs` times, JAX and refjit
alternating step by step so that both see the same moments of a busy machine; the table gives
the median and the ratio refjit / JAX per program. `--background-load N` keeps N cores busy
with spinning processes while timing (a shared machine). Needs the refjit package importable
(scripts/bench.sh python installs it; PYTHONPATH=build/release/python works for a build).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "tests"))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))

import jax  # noqa: E402

import real_programs  # noqa: E402
import refjit  # noqa: E402
from run_peers import background_load  # noqa: E402  (the peer benchmark's spinning processes)


def timed_step(step, state, batch):
    """One training step: (seconds, the new state)."""
    start = time.perf_counter()
    state, metrics = step(state, batch)
    jax.block_until_ready((state, metrics))
    return time.perf_counter() - start, state


def measure(name: str, runs: int) -> dict:
    module = importlib.import_module(f"real_programs.{name}")
    program = module.make(jax.value_and_grad)
    steps = {"jax": jax.jit(program.step), "refjit": refjit.jit(program.step)}
    # Each trains as a user's loop does: a step's state is the next step's input (JAX's
    # arrays for jax.jit, refjit's NumPy arrays for refjit.jit), over the program's batches.
    states = {k: program.state for k in steps}
    batches = program.batches
    for k, step in steps.items():  # compile, then warm up on the state's own types
        for i in range(3):
            _, states[k] = timed_step(step, states[k], batches[i % len(batches)])
    times: dict = {k: [] for k in steps}
    for r in range(runs):
        for k, step in steps.items():
            seconds, states[k] = timed_step(step, states[k], batches[r % len(batches)])
            times[k].append(seconds)
    jax_ms = statistics.median(times["jax"]) * 1e3
    refjit_ms = statistics.median(times["refjit"]) * 1e3
    return {"program": name, "jax_median_ms": jax_ms, "refjit_median_ms": refjit_ms,
            "ratio": refjit_ms / jax_ms,
            "jax_min_ms": min(times["jax"]) * 1e3, "refjit_min_ms": min(times["refjit"]) * 1e3}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="timed steps each (default 30)")
    parser.add_argument("--background-load", type=int, default=0, metavar="N")
    parser.add_argument("--only", default="", metavar="NAME,...")
    parser.add_argument("--json", default=None, metavar="OUT")
    options = parser.parse_args(argv)
    names = sorted(m.name for m in pkgutil.iter_modules(real_programs.__path__))
    if options.only:
        wanted = options.only.split(",")
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            parser.error(f"no real program named {', '.join(unknown)} (have: {', '.join(names)})")
        names = [n for n in names if n in wanted]
    rows = []
    with background_load(options.background_load):
        for name in names:
            row = measure(name, options.runs)
            rows.append(row)
            print(f"{name}: JAX {row['jax_median_ms']:.3g} ms, refjit {row['refjit_median_ms']:.3g}"
                  f" ms", file=sys.stderr, flush=True)
    if options.background_load:
        print(f"With {options.background_load} busy process(es) alongside.\n")
    print("| program | JAX median ms | refjit median ms | refjit/JAX |")
    print("| --- | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['program']} | {r['jax_median_ms']:.3g} | {r['refjit_median_ms']:.3g} | "
              f"{r['ratio']:.2f} |")
    if options.json:
        with open(options.json, "w") as f:
            json.dump({"jax_version": jax.__version__, "cpu_count": os.cpu_count(),
                       "runs": options.runs, "background_load": options.background_load,
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
