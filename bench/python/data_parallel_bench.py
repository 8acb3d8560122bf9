"""The data-parallel training step of examples/python/data_parallel.py, timed: how much of the
gradient sums' time the overlap hides (docs/distributed.md "Overlapping the sums").

    mpirun -n 2 .venv/bin/python bench/python/data_parallel_bench.py [--width 64] [--steps 400]
    mpirun -n 2 -x REFJIT_OVERLAP_SUMS=0 .venv/bin/python bench/python/data_parallel_bench.py

Every process times, in one run, two programs on its share of one batch (256 / n rows):
  alone  the same step on a mesh of this process alone (an axis bound to MPI_COMM_SELF): the
         computation with no communication;
  step   the step on the mesh of every process: by default with its sums started where each
         gradient is ready, bucketed, and waited for where they are read; with
         REFJIT_OVERLAP_SUMS=0, each psum run in line, where JAX's program has it.
Process 0 prints the median time per step of each, over `--steps` steps after a warm-up, in
rounds that alternate the two so that a busy machine slows both alike. `--width` sets the
hidden layers' width (64 is the example's model; 512 makes sums of several buckets).
"""

import argparse
import os
import statistics
import sys
import time

import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python"))
import data_parallel as example  # noqa: E402

import refjit  # noqa: E402
import refjit.distributed as dist  # noqa: E402


def main():
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--width", type=int, default=64)
    options.add_argument("--steps", type=int, default=400)
    options.add_argument("--rounds", type=int, default=5)
    args = options.parse_args()
    from mpi4py import MPI

    dist.bind_axis("batch")
    n, rank = dist.size(), dist.rank()
    x, y = example.data()
    params = example.init_params(jax.random.key(0), (16, args.width, args.width, 1))
    share = example.BATCH // n
    # The example's axis is "batch": bound to this process alone, the step computes the whole
    # of what it is given, so "alone" is given this process's rows only.
    mine = slice(rank * share, (rank + 1) * share)
    programs = {
        "alone": (lambda: dist.bind_axis("batch", MPI.COMM_SELF), x[mine], y[mine]),
        "step": (lambda: dist.bind_axis("batch"), x[:example.BATCH], y[:example.BATCH]),
    }
    steps = {}
    for name, (bind, xs, ys) in programs.items():  # compile and warm up
        bind()
        steps[name] = refjit.jit(example.sharded_step(dist.mesh("batch")))
        for _ in range(20):
            steps[name](params, xs, ys)
    times = {name: [] for name in programs}
    per_round = max(1, args.steps // args.rounds)
    for _ in range(args.rounds):
        for name, (bind, xs, ys) in programs.items():
            bind()
            step = steps[name]
            MPI.COMM_WORLD.Barrier()
            for _ in range(per_round):
                t0 = time.perf_counter()
                _, loss = step(params, xs, ys)
                jax.block_until_ready(loss)
                times[name].append(time.perf_counter() - t0)
    if rank == 0:
        floats = sum(p.size for p in jax.tree.leaves(params))
        overlap = os.environ.get("REFJIT_OVERLAP_SUMS", "1") != "0"
        print(f"{n} process(es), width {args.width}: {floats} parameters, {share} rows per "
              f"process, {per_round * args.rounds} steps each, sums "
              f"{'started early and bucketed (overlap-sums)' if overlap else 'in line'}")
        alone = statistics.median(times["alone"])
        for name in programs:
            t = statistics.median(times[name])
            print(f"  {name:<10} {t * 1e6:8.1f} us per step  ({t / alone:.2f}x alone)")


if __name__ == "__main__":
    main()
