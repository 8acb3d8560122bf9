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

echo "== distributed training: 1 and 2 ranks train the same model =="
one=$(scripts/distributed.sh 1 | tail -n 1)
two=$(scripts/distributed.sh 2 | tail -n 1)
echo "1 rank:  $one"
echo "2 ranks: $two"
python3 - "$one" "$two" <<'PY'
import sys
a, b = (line.split() for line in sys.argv[1:])
assert a[0] == b[0] == "checksum", (a, b)
for x, y in zip(a[1:], b[1:]):
    x, y = float(x), float(y)
    assert abs(x - y) <= 1e-4 * max(1.0, abs(x)), f"1 rank gives {x}, 2 ranks give {y}"
PY

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
