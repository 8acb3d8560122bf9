#!/usr/bin/env bash
# Builds refjit and runs every test: GoogleTest binaries, lit text tests, the installed-package
# example build, then the same suite under AddressSanitizer + UndefinedBehaviorSanitizer.
# Usage: scripts/test.sh [--no-asan]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

run_asan=1
[ "${1:-}" = "--no-asan" ] && run_asan=0
jobs=$(nproc)

echo "== release build =="
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

echo "== examples against the installed package =="
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install build/release --prefix "$prefix" >/dev/null
cmake -G Ninja -S examples -B "$prefix/examples-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER=clang++-19 >/dev/null
cmake --build "$prefix/examples-build" -j "$jobs"
ctest --test-dir "$prefix/examples-build" --output-on-failure

if [ "$run_asan" = 1 ]; then
  echo "== asan + ubsan build =="
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset asan -j "$jobs"
fi
echo "== all tests passed =="
