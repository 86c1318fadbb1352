#!/usr/bin/env bash
# rlx all_reduce vs MPI_Allreduce (bench/comm_bench.cpp) on 2 and 4 ranks of this machine,
# over Open MPI's default transports (shared memory between ranks of one host), and with
# BENCH_UCX=1 over UCX. Usage: bench/comm_bench.sh [BUILD_DIR] [extra rlx_comm_bench args]
# Loopback on a small machine measures the per-call overhead of rlx's layer, not network
# scaling (4 ranks on 2 cores are oversubscribed).
set -euo pipefail
build=${1:-build}
shift || true
bench=$build/bin/rlx_comm_bench
if [ ! -x "$bench" ]; then
  echo "comm_bench.sh: $bench not found (build the target rlx_comm_bench; it needs MPI)" >&2
  exit 1
fi
mca=(--oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
if [ "${BENCH_UCX:-0}" = 1 ]; then
  mca+=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any)
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for np in 2 4; do
  timeout -k 5 900 mpirun "${mca[@]}" -np "$np" "$bench" "$@"
  echo
done
