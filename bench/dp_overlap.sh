#!/usr/bin/env bash
# Data-parallel training step on 2 ranks of this machine: gradient all-reduces overlapped with
# the backward pass (default) against forced-synchronous ones (RLX_COMM_OVERLAP=0), in
# alternating rounds. Each rank has one compute thread (RLX_NUM_THREADS=1), so 2 ranks fill
# the 2 cores and the communication thread competes with them: on a machine this small the
# gain is bounded. RLX_PROFILE=1 makes each rank print its collectives' time in the
# communicator and the time the step waited for them ("% hidden").
# Usage: bench/dp_overlap.sh [BUILD_DIR] [ROUNDS] [extra rlx_bench_dp_overlap args]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
shift 2 || shift $# || true
bench=$build/bin/rlx_bench_dp_overlap
if [ ! -x "$bench" ]; then
  echo "dp_overlap.sh: $bench not found (build the target rlx_bench_dp_overlap; it needs MPI)" >&2
  exit 1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 RLX_NUM_THREADS=1 RLX_PROFILE=1
mca=(--oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
for r in $(seq "$rounds"); do
  for overlap in 1 0; do
    RLX_COMM_OVERLAP=$overlap timeout -k 5 600 mpirun "${mca[@]}" -np 2 "$bench" "$@" 2>&1 |
      grep -E "^ranks|collectives:" || true
  done
done
