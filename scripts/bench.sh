#!/usr/bin/env bash
# Builds and runs refjit's benchmarks with the release preset.
#
#   scripts/bench.sh seed [--json OUT] [refjit_bench_seed options...]
#       the seed grad-scan-slice-update-slow: table on stdout, JSON to OUT (docs/benchmarks.md)
#   scripts/bench.sh peers [--runs N] [--only NAME,...] [--json OUT] [--svg OUT] [--check] [...]
#       refjit against JAX on bench/peers/programs.py (bench/peers/run_peers.py --help):
#       Markdown table on stdout, JSON to OUT, SVG chart of refjit/JAX; JAX from PyPI, installed
#       into .venv (scripts/python_env.sh)
#   scripts/bench.sh python [--runs N] [--repeats 1,10] [--json OUT]
#       the seed's loss from Python: refjit.grad (the package, pip-installed into .venv) against
#       jax.jit(jax.grad) and against the C++ API, gradients compared (bench/python/seed_bench.py);
#       then what crossing between JAX and refjit costs: dispatch, refjit code inside jax.jit as
#       XLA's custom call, the seed's scan inside a JAX gradient (bench/python/interop_bench.py)
#       and inside a flax/optax train step (examples/python/flax_step_with_refjit.py)
#   scripts/bench.sh real [--runs N] [--background-load N] [--only NAME,...] [--json OUT]
#       one training step of each real program (python/tests/real_programs/) under jax.jit and
#       under refjit.jit, unchanged, with refjit's defaults (bench/python/real_programs_bench.py)
#
# Environment: JOBS (build parallelism, default nproc); REFJIT_BENCH_BUILD_DIR to use an
# already configured build directory instead of the release preset's build/release.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/bench.sh seed [--json OUT] [--runs N] [--repeats 1,10] [...]" >&2
  echo "       scripts/bench.sh peers [--json OUT] [--svg OUT] [--runs N] [--only NAME,...] [...]" >&2
  echo "       scripts/bench.sh python [--runs N] [--repeats 1,10] [--json OUT]" >&2
  echo "       scripts/bench.sh real [--runs N] [--background-load N] [--only NAME,...]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
what=$1
shift
jobs=${JOBS:-$(nproc)}

source scripts/python_env.sh

build() {  # build <target>: configure (release preset) and build one target; prints its dir
  local target=$1
  if [ -n "${REFJIT_BENCH_BUILD_DIR:-}" ]; then
    cmake --build "$REFJIT_BENCH_BUILD_DIR" --target "$target" -j "$jobs" >&2
    echo "$REFJIT_BENCH_BUILD_DIR"
  else
    cmake --preset release >&2
    cmake --build --preset release --target "$target" -j "$jobs" >&2
    echo "build/release"
  fi
}

case "$what" in
  seed)
    dir=$(build refjit_bench_seed)
    exec "$dir/bench/refjit_bench_seed" "$@"
    ;;
  peers)
    ensure_venv
    dir=$(build refjit_cli)
    exec .venv/bin/python bench/peers/run_peers.py --refjit "$dir/bin/refjit" "$@"
    ;;
  python)
    dir=$(build refjit_bench_seed)
    install_refjit_package
    .venv/bin/python bench/python/seed_bench.py --cpp-bench "$dir/bench/refjit_bench_seed" "$@"
    echo
    .venv/bin/python bench/python/interop_bench.py
    echo
    exec .venv/bin/python examples/python/flax_step_with_refjit.py
    ;;
  real)
    install_refjit_package
    exec .venv/bin/python bench/python/real_programs_bench.py "$@"
    ;;
  *)
    usage
    ;;
esac
