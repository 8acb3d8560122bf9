#!/usr/bin/env bash
# Builds and runs refjit's libFuzzer targets (docs/testing.md "Fuzzing").
#
# Usage:
#   scripts/fuzz.sh list                 names the targets
#   scripts/fuzz.sh TARGET SECONDS       builds TARGET (in build/fuzz) and fuzzes it for SECONDS
#
# TARGET is parse, interpret or transforms (fuzz_ prefix optional). The run starts from the
# seed corpus fuzz/corpus/TARGET (read only; new inputs go to BUILD/fuzz-corpus/TARGET).
# On a crash the script prints the reproducer path and exits non-zero; replay it with
#   BUILD/fuzz/fuzz_TARGET REPRODUCER
# Environment: REFJIT_FUZZ_BUILD_DIR (default build/fuzz), REFJIT_FUZZ_JOBS (ninja -j, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(parse interpret transforms)
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

[ $# -ge 1 ] || usage
if [ "$1" = list ]; then
  printf 'fuzz_%s\n' "${targets[@]}"
  exit 0
fi
[ $# -eq 2 ] || usage
target=${1#fuzz_}
seconds=$2
[[ " ${targets[*]} " == *" $target "* ]] || { echo "fuzz.sh: unknown target '$1'" >&2; usage; }
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a number" >&2; usage; }

build=${REFJIT_FUZZ_BUILD_DIR:-build/fuzz}
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    -DREFJIT_BUILD_FUZZERS=ON -DREFJIT_BUILD_TESTS=OFF -DREFJIT_BUILD_BENCH=OFF >/dev/null
fi
ninja -C "$build" -j "${REFJIT_FUZZ_JOBS:-2}" "fuzz_$target"

binary=$build/fuzz/fuzz_$target
work=$build/fuzz-corpus/$target
artifacts=$build/fuzz-artifacts/$target/
mkdir -p "$work" "$artifacts"
log=$build/fuzz-$target.log
echo "fuzz.sh: running fuzz_$target for ${seconds}s (log: $log)"
set +e
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  "$binary" "$work" "fuzz/corpus/$target" -max_total_time="$seconds" -timeout=10 \
  -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 -artifact_prefix="$artifacts" \
  >"$log" 2>&1
status=$?
set -e
grep -E '^stat::number_of_executed_units|^Done [0-9]+ runs' "$log" || true
if [ $status -ne 0 ]; then
  tail -n 60 "$log"
  reproducer=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -n 1 | sed 's/Test unit written to //')
  echo "fuzz.sh: fuzz_$target found a crash (exit $status)"
  [ -n "$reproducer" ] && echo "fuzz.sh: reproducer: $reproducer"
  echo "fuzz.sh: replay with: $binary ${reproducer:-<reproducer>}"
  exit 1
fi
echo "fuzz.sh: fuzz_$target ran ${seconds}s without findings"
