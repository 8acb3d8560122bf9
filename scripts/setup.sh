#!/usr/bin/env bash
# Installs every Debian package refjit needs to build, test, benchmark and fuzz, then the
# Python virtual environment .venv (scripts/python_env.sh: the Python package's build and
# tracing dependencies, pytest). Idempotent: what is already present is skipped, so a second
# run costs well under a second.
set -euo pipefail

packages=(
  cmake ninja-build ccache g++ python3 python3-venv python3-dev
  llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools
  clang-19 libclang-rt-19-dev lld-19
  libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  clang-format
  libopenblas0-pthread liblapack-dev
  libopenmpi-dev openmpi-bin
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}" >&2
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cd "$(dirname "$0")/.."
source scripts/python_env.sh
ensure_venv
