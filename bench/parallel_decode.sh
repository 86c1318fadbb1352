#!/usr/bin/env bash
# Qwen3 decode tokens/s with tensor and pipeline parallelism next to one process, on this
# machine's cores (docs/benchmarks.md, "Parallel decode"). Writes a random-weight Qwen3 (the
# qwen3-tiny shape: hidden 512, 8 layers, 8/4 heads) unless MODEL is given.
# Usage: bench/parallel_decode.sh [BUILD_DIR] [MODEL]
# One process uses every core; N ranks use cores/N threads each. On one machine this measures
# what splitting costs (the all-reduces per layer, the stage hand-offs), not what a second
# machine's memory bandwidth would bring.
set -euo pipefail
build=${1:-build}
rlx=$build/bin/rlx
cores=$(nproc)
model=${2:-}
if [ -z "$model" ]; then
  model=$build/bench-models/qwen3-parallel
  mkdir -p "$(dirname "$model")"
  [ -d "$model" ] || "$rlx" make-model qwen3-tiny --out "$model" --seed 7 >/dev/null
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(timeout -k 5 600 mpirun --oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
gen=(generate "$model" --tokens 1,2,3,4,5,6,7,8 -n 64 --ignore-eos --quiet --runs 3)
tokps() { /usr/bin/python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('%.1f' % j['decode_tokens_per_s'])" "$1"; }
tmp=$(mktemp -d)
RLX_NUM_THREADS=$cores "$rlx" "${gen[@]}" --json "$tmp/one.json" 2>/dev/null
one=$(tokps "$tmp/one.json")
printf "%-26s %12s %12s %8s\n" "configuration" "peer tok/s" "rlx tok/s" "ratio"
printf "%-26s %12s %12s %8s\n" "1 process, $cores threads" "$one" "$one" "1.00"
for np in 2; do
  threads=$(( cores / np > 0 ? cores / np : 1 ))
  for mode in tp pp; do
    RLX_NUM_THREADS=$threads "${mpi[@]}" -np $np "$rlx" "${gen[@]}" --$mode $np --json "$tmp/$mode$np.json" 2>/dev/null
    v=$(tokps "$tmp/$mode$np.json")
    printf "%-26s %12s %12s %8s\n" "--$mode $np, $threads thread(s) each" "$one" "$v" \
      "$(/usr/bin/python3 -c "print('%.2f' % ($v / $one))")"
  done
done
rm -rf "$tmp"
