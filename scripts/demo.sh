#!/usr/bin/env bash
# The main job: installs what refjit needs, builds it (release preset), runs the seed
# programs of autodiff-with-refs.txt written with the C++ API (traced, printed, evaluated,
# differentiated), then the same programs as jaxpr text through the `refjit` tool, then the
# seed grad-scan-slice-update-slow written in JAX, differentiated by the Python package.
# Usage: scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

echo "== build (release) =="
cmake --preset release && cmake --build --preset release
echo

echo "== the seed programs written with the C++ API (examples/*.cpp) =="
for example in seed_pure2 seed_take seed_autodiff seed_foreach; do
  echo "\$ build/release/examples/$example"
  "build/release/examples/$example"
  echo
done

refjit=build/release/bin/refjit
seeds=test/lit/Inputs
show() {  # prints a command (arguments with spaces quoted), runs it, then a blank line
  local line="\$ refjit" arg
  for arg in "$@"; do
    if [[ "$arg" == *" "* ]]; then line+=" '$arg'"; else line+=" $arg"; fi
  done
  echo "$line"
  "$refjit" "$@"
  echo
}

echo "== pure2: a pure function that uses a ref internally =="
show dump "$seeds/pure2.jaxpr"
show run "$seeds/pure2.jaxpr" 3.0
echo "# grad(pure2)(3.0) is 2.0, as in the seed:"
show run --grad "$seeds/pure2.jaxpr" 3.0
show run --jvp "$seeds/pure2.jaxpr" 3.0 1.0

echo "== take_vjp_jaxpr: one VJP of take(x, 3) accumulating into the gradient ref b =="
echo "# The seed's printout, parsed, verified and printed back (b[c:c+1] += j is the sparse update):"
show dump "$seeds/take_vjp.jaxpr"
echo "# Values: a = arange(10.), then b's initial value (after the seed's VJPs at i = 3 and 5);"
echo "# this third VJP (i = 3) adds 1 at index 3 in place, giving the seed's final grad_ref:"
show run "$seeds/take_vjp.jaxpr" '[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]' '[0, 0, 0, 1, 0, 1, 0, 0, 0, 0]'
show run --interpret "$seeds/take_vjp.jaxpr" '[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]' \
  '[0, 0, 0, 1, 0, 1, 0, 0, 0, 0]'

echo "== grad-scan-slice-update-slow in JAX, differentiated by refjit from Python =="
echo "# pip install . into .venv (scripts/python_env.sh), then examples/python/seed_insert.py:"
source scripts/python_env.sh
install_refjit_package
echo "\$ .venv/bin/python examples/python/seed_insert.py"
.venv/bin/python examples/python/seed_insert.py
