#!/usr/bin/env bash
# Builds refjit with its MPI component and trains the example MLP data-parallel on RANKS
# processes of this machine (examples/distributed/train_mlp.cpp, docs/distributed.md). The last
# line printed is `checksum` and the trained parameters' sums, which do not depend on RANKS
# (up to float rounding). Extra arguments go to mpirun (e.g. --hostfile hosts).
# Usage: scripts/distributed.sh RANKS [mpirun options...]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || ! [[ "$1" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/distributed.sh RANKS [mpirun options...]" >&2
  exit 2
fi
ranks=$1
shift
bash scripts/setup.sh >&2
cmake --preset release -DREFJIT_DISTRIBUTED=on >/dev/null
cmake --build --preset release --target train_mlp >&2
# OpenMPI refuses to start as root unless told; containers and CI often run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec timeout 300 mpirun --oversubscribe -np "$ranks" "$@" build/release/examples/distributed/train_mlp
