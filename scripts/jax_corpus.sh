#!/usr/bin/env bash
# The JAX differential corpus (test/jax_corpus/, docs/testing.md "The JAX corpus").
#   scripts/jax_corpus.sh run        runs refjit on the checked-in corpus (no JAX needed; ctest
#                                    runs the same as the test `jax_corpus`)
#   scripts/jax_corpus.sh generate   regenerates the corpus with JAX from PyPI, installed into
#                                    .venv (a test-generation dependency, never a run-time one)
#   scripts/jax_corpus.sh random COUNT [SEED]
#                                    COUNT random jax.numpy programs (JAX writes them, with their
#                                    gradient and JVP programs), then refjit against JAX's numbers
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python_env.sh

case "${1:-}" in
  run)
    cmake --preset release >/dev/null
    cmake --build --preset release --target refjit_cli
    python3 test/jax_corpus/run_corpus.py build/release/bin/refjit "${@:2}"
    ;;
  generate)
    ensure_venv
    .venv/bin/python test/jax_corpus/generate.py "${@:2}"
    ;;
  random)
    count=${2:?usage: scripts/jax_corpus.sh random COUNT [SEED]}
    seed=${3:-$RANDOM}
    ensure_venv
    cmake --preset release >/dev/null
    cmake --build --preset release --target refjit_cli
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
    .venv/bin/python test/jax_corpus/random_programs.py "$count" "$seed" "$out"
    echo "seed $seed"
    python3 test/jax_corpus/run_corpus.py build/release/bin/refjit --cases "$out"
    ;;
  *)
    echo "usage: scripts/jax_corpus.sh run [-v] | generate [NAME...] | random COUNT [SEED]" >&2
    exit 2
    ;;
esac
