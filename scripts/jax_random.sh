#!/usr/bin/env bash
# Random JAX programs, values and derivatives compared between JAX and refjit through the
# Python package (docs/testing.md "Random programs against JAX").
#
# Usage: scripts/jax_random.sh COUNT [SEED] [--backend native|interpreter] [--shrink] [-v]
#
# Installs the package into .venv (pip install ., as scripts/test.sh does) and runs programs
# SEED .. SEED+COUNT-1 (SEED defaults to 1) through refjit.jit, grad, vjp, jvp and linearize
# against JAX's. Prints every mismatch with a reproducer, then a summary; exits non-zero if
# there is a mismatch. REFJIT_PYTHONPATH=DIR runs against the package in DIR (a development
# build, e.g. build/release/python) instead of installing.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '5,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
source scripts/python_env.sh

count=$1
shift
seed=1
if [ $# -ge 1 ] && [[ $1 != -* ]]; then
  seed=$1
  shift
fi

if [ -n "${REFJIT_PYTHONPATH:-}" ]; then
  ensure_venv
  export PYTHONPATH=$REFJIT_PYTHONPATH
else
  install_refjit_package
fi
exec .venv/bin/python python/tests/random_programs.py "$count" --seed "$seed" "$@"
