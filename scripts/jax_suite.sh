#!/usr/bin/env bash
# Runs JAX's own test files against the refjit package and classifies every failure
# (docs/testing.md, "JAX's test suite").
#
# Usage: scripts/jax_suite.sh JAX_CHECKOUT [FILE ...] [--out DIR] [-k EXPR] [--backend B]
#
# JAX_CHECKOUT is a JAX source tree at the installed JAX's tag, which this project never
# includes: git clone --depth 1 --branch jax-v0.10.2 https://github.com/jax-ml/jax
# FILE defaults to lax_autodiff_test.py, lax_control_flow_test.py, mutable_array_test.py,
# state_test.py and linalg_test.py. Installs the package into .venv (pip install ., as
# scripts/test.sh does) and the test files' own dependencies (absl-py, hypothesis);
# REFJIT_PYTHONPATH=DIR runs against the package in DIR (a development build) instead.
# Exits 1 when a wrong number, wrong dtype, crash, hang or internal error was seen.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '5,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
source scripts/python_env.sh

if [ -n "${REFJIT_PYTHONPATH:-}" ]; then
  ensure_venv
  export PYTHONPATH=$REFJIT_PYTHONPATH
else
  install_refjit_package
fi
# What JAX's test files import besides JAX.
.venv/bin/python -c "import absl.testing, hypothesis" 2>/dev/null ||
  .venv/bin/pip install -q absl-py hypothesis
exec .venv/bin/python test/jax_suite/run.py "$@"
