#!/usr/bin/env bash
# Builds and runs refjit's benchmarks with the release preset.
#
#   scripts/bench.sh seed [--json OUT] [refjit_bench_seed options...]
#       the seed grad-scan-slice-update-slow: table on stdout, JSON to OUT (docs/benchmarks.md)
#
# Environment: JOBS (build parallelism, default nproc); REFJIT_BENCH_BUILD_DIR to use an
# already configured build directory instead of the release preset's build/release.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/bench.sh seed [--json OUT] [--runs N] [--repeats 1,10] [...]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
what=$1
shift
jobs=${JOBS:-$(nproc)}

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
  *)
    usage
    ;;
esac
