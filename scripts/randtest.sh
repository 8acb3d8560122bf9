#!/usr/bin/env bash
# Differential testing on random programs (docs/testing.md "Random programs").
#
# Usage: scripts/randtest.sh COUNT [SEED] [--no-native] [--no-autodiff]
#
# Builds randgen_tests (in build/randtest, or $REFJIT_RANDTEST_BUILD_DIR) and checks COUNT
# random programs from SEED (default 1): text round trip, interpreter, interpreter vs native
# backend, JVP vs finite differences, transpose identity. Prints every mismatching program
# with the seed that reproduces it (`scripts/randtest.sh 1 SEED`), ends with
# `randtest: N programs, M mismatches`, and exits non-zero if M > 0.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '4,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

build=${REFJIT_RANDTEST_BUILD_DIR:-build/randtest}
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 -DREFJIT_BUILD_BENCH=OFF >/dev/null
fi
ninja -C "$build" -j "${REFJIT_RANDTEST_JOBS:-2}" randgen_tests >&2
exec "$build/test/randgen_tests" randtest "$@"
