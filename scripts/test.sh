#!/usr/bin/env bash
# Builds refjit and runs every test: GoogleTest binaries, lit text tests, the installed-package
# example build, the Python package (`pip install .` into .venv, then pytest), then the same
# C++ suite under AddressSanitizer + UndefinedBehaviorSanitizer, then each libFuzzer target
# for a short bounded time (REFJIT_FUZZ_SECONDS each, default 20).
# Usage: scripts/test.sh [--no-asan] [--no-fuzz]
set -euo pipefail
cd "$(dirname "$0")/.."

run_asan=1
run_fuzz=1
for arg in "$@"; do
  case "$arg" in
    --no-asan) run_asan=0 ;;
    --no-fuzz) run_fuzz=0 ;;
    *) echo "usage: scripts/test.sh [--no-asan] [--no-fuzz]" >&2; exit 2 ;;
  esac
done
fuzz_seconds=${REFJIT_FUZZ_SECONDS:-20}
jobs=$(nproc)
bash scripts/setup.sh

echo "== release build =="
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

# Two `checksum a b c ...` lines, from 1 and 2 ranks: the same numbers up to float rounding.
same_checksums() {
  echo "1 rank:  $1"
  echo "2 ranks: $2"
  python3 - "$1" "$2" <<'PY'
import sys
a, b = (line.split() for line in sys.argv[1:])
assert a[0] == b[0] == "checksum" and len(a) == len(b), (a, b)
for x, y in zip(a[1:], b[1:]):
    x, y = float(x), float(y)
    assert abs(x - y) <= 1e-4 * max(1.0, abs(x)), f"1 rank gives {x}, 2 ranks give {y}"
PY
}

echo "== distributed training: 1 and 2 ranks train the same model =="
same_checksums "$(scripts/distributed.sh 1 | tail -n 1)" "$(scripts/distributed.sh 2 | tail -n 1)"

echo "== examples against the installed package =="
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install build/release --prefix "$prefix" >/dev/null
cmake -G Ninja -S examples -B "$prefix/examples-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER=clang++-19 >/dev/null
cmake --build "$prefix/examples-build" -j "$jobs"
ctest --test-dir "$prefix/examples-build" --output-on-failure

echo "== the Python package (pip install . into .venv, pytest) =="
source scripts/python_env.sh
install_refjit_package
.venv/bin/python -m pytest -q python/tests

echo "== the Python package across processes (mpirun): shard_map, data-parallel example, faults =="
# OpenMPI refuses to start as root unless told; containers and CI often run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi_python() { timeout 300 mpirun --oversubscribe -np "$1" .venv/bin/python "${@:2}"; }
for ranks in 1 2; do mpi_python "$ranks" python/tests/mpi/shard_map_checks.py; done
same_checksums "$(mpi_python 1 examples/python/data_parallel.py | tail -n 1)" \
  "$(mpi_python 2 examples/python/data_parallel.py | tail -n 1)"
# A process that leaves mid-run stops the job (no hang); a checkpointed run restarts.
.venv/bin/python python/tests/mpi/fault_checks.py

if [ "$run_asan" = 1 ]; then
  echo "== asan + ubsan build =="
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset asan -j "$jobs"
fi

if [ "$run_fuzz" = 1 ]; then
  # A smoke run, not a fuzzing campaign: replays the seed corpus (past reproducers included)
  # and explores briefly; any crash or sanitizer report fails CI (docs/testing.md "Fuzzing").
  echo "== fuzzers, ${fuzz_seconds}s each =="
  for target in $(scripts/fuzz.sh list); do
    REFJIT_FUZZ_JOBS="$jobs" scripts/fuzz.sh "$target" "$fuzz_seconds"
  done
fi
echo "== all tests passed =="
