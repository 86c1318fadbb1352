#!/usr/bin/env bash
# One prepared check of the cuda device on a machine with an NVIDIA GPU (about 10 minutes on
# an H200 machine with 16 cores): builds Release, runs the GPU tests and the op conformance
# suite on cuda, checks MiniLM embeddings and tiny-Qwen3 greedy tokens against the CPU, times
# MiniLM at batches 1, 8, 32 and Qwen3 decode on both, and prints a short table last.
#
#   bench/gpu/check.sh                    # from the repository root
#
# Environment (defaults in brackets):
#   DEVICE [cuda]      the device under test; PEER [cpu] the device it is compared with.
#                      DEVICE=opencl or vulkan runs the same logic without a GPU (a dry run).
#   BUILD [build-gpu]  build folder; SKIP_BUILD=1 uses it as it is
#   OUT [/tmp/rlx-gpu-check]  logs, models, JSON results, ops.md with the device's column
#   CONFORMANCE_FILTER [Ops/*]  gtest filter of the conformance run (empty: skip it)
#   BATCHES [1,8,32] SEQ [128] BENCH_RUNS [20] DECODE_TOKENS [64]
# Exit status: 0 when every check passed; 1 and a line saying which one otherwise. It fails
# at once, saying why, when DEVICE is not available here (`rlx devices` gives the reason).
set -uo pipefail

DEVICE=${DEVICE:-cuda}
PEER=${PEER:-cpu}
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-/tmp/rlx-gpu-check}
CONFORMANCE_FILTER=${CONFORMANCE_FILTER-Ops/*}
BATCHES=${BATCHES:-1,8,32}
SEQ=${SEQ:-128}
BENCH_RUNS=${BENCH_RUNS:-20}
DECODE_TOKENS=${DECODE_TOKENS:-64}
PY=${PY:-python3}
T0=$(date +%s)
mkdir -p "$OUT"
RESULTS=()   # "check|result" lines for the table
FAILED=0

say() { echo "== [$(( $(date +%s) - T0 ))s] $*"; }
fail() { echo "FAILED: $*" >&2; RESULTS+=("$1|FAILED"); FAILED=1; }
die() { echo "check.sh: $*" >&2; exit 1; }

[ -f CMakeLists.txt ] && [ -d src/backends/cuda ] || die "run from the rlx repository root"
command -v "$PY" >/dev/null || die "needs $PY (to compare JSON results)"

# ---------------------------------------------------------------- build
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  say "building Release in $BUILD"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRLX_BUILD_BENCH=OFF > "$OUT/cmake.log" 2>&1 \
    || { tail -20 "$OUT/cmake.log"; die "cmake failed (log: $OUT/cmake.log)"; }
  grep -q "Found CUDAToolkit" "$OUT/cmake.log" || [ "$DEVICE" != cuda ] || die "CMake did not find the CUDA toolkit (see $OUT/cmake.log)"
  ninja -C "$BUILD" rlx rlx_tests_conformance rlx_tests_sci $( [ "$DEVICE" = cuda ] && echo rlx_tests_cuda ) > "$OUT/build.log" 2>&1 \
    || { grep -E "error|FAILED" "$OUT/build.log" | head -20; die "build failed (log: $OUT/build.log)"; }
fi
RLX="$BUILD/bin/rlx"
[ -x "$RLX" ] || die "no $RLX (build first, or unset SKIP_BUILD)"

# ---------------------------------------------------------------- the device
say "devices"
"$RLX" devices | tee "$OUT/devices.txt"
grep -Eq "^$DEVICE +available" "$OUT/devices.txt" \
  || die "device $DEVICE is not available here: $(grep -E "^$DEVICE " "$OUT/devices.txt" | sed -E 's/ +/ /g')"
DESCRIPTION=$(grep -E "^$DEVICE +available" "$OUT/devices.txt" | sed -E "s/^$DEVICE +available +//")

# ---------------------------------------------------------------- GPU tests and conformance
if [ "$DEVICE" = cuda ]; then
  say "tests/cuda (NVRTC compile of every conformance case, GPU runs against ref)"
  if "$BUILD/bin/rlx_tests_cuda" > "$OUT/tests_cuda.log" 2>&1; then
    if grep -q "SKIPPED" "$OUT/tests_cuda.log"; then fail "tests/cuda: GPU tests skipped on a GPU machine"; grep -A1 Skipped "$OUT/tests_cuda.log" | head
    else RESULTS+=("tests/cuda|pass ($(grep -c '\[       OK \]' "$OUT/tests_cuda.log") tests)"); fi
  else
    grep -E "Failure|FAILED|error" "$OUT/tests_cuda.log" | head -20; fail "tests/cuda"
  fi
fi
# splatting (image and every gradient) and the CSR kernels against the cpu on fresh random
# scenes and matrices (tests/sci)
say "splatting and sparse kernels on $DEVICE against the cpu"
if "$BUILD/bin/rlx_tests_sci" --gtest_filter="*SplatGpu*/$DEVICE:GraphSparse.Gpu*" > "$OUT/tests_sci.log" 2>&1; then
  if grep -q "^\[  SKIPPED" "$OUT/tests_sci.log"; then fail "tests/sci on $DEVICE: skipped"; grep "not checked" "$OUT/tests_sci.log" | head -3
  else RESULTS+=("splat + CSR kernels vs cpu|pass ($(grep -c '\[       OK \]' "$OUT/tests_sci.log") tests)"); fi
else
  grep -E "Failure|FAILED|Which is|seed" "$OUT/tests_sci.log" | head -20; fail "splat + CSR kernels on $DEVICE (log: $OUT/tests_sci.log)"
fi
if [ -n "$CONFORMANCE_FILTER" ]; then
  say "op conformance suite on $DEVICE (filter $CONFORMANCE_FILTER)"
  if RLX_CONFORMANCE_DEVICES="$DEVICE" RLX_WRITE_OPS_MD="$OUT/ops.md" timeout 420 \
      "$BUILD/bin/rlx_tests_conformance" --gtest_filter="$CONFORMANCE_FILTER" > "$OUT/conformance.log" 2>&1; then
    RESULTS+=("conformance on $DEVICE|pass ($(grep -c '\[       OK \]' "$OUT/conformance.log") ops)")
  else
    grep -E "FAILED|Failure|unexpected" "$OUT/conformance.log" | head -30
    fail "conformance on $DEVICE (log: $OUT/conformance.log)"
  fi
fi

# ---------------------------------------------------------------- models against the CPU
say "models"
"$RLX" make-model minilm --out "$OUT/minilm" > /dev/null || die "rlx make-model minilm failed"
"$RLX" make-model qwen3-tiny --out "$OUT/qwen3" > /dev/null || die "rlx make-model qwen3-tiny failed"

TEXTS=("the quick brown fox jumps over the lazy dog" "a GPU check of rlx" "short" "embeddings from a random-weight MiniLM in its real layout")
for d in "$PEER" "$DEVICE"; do
  "$RLX" embed "$OUT/minilm" "${TEXTS[@]}" --device "$d" --out "$OUT/embed_$d.json" --quiet > "$OUT/embed_$d.log" 2>&1 \
    || { cat "$OUT/embed_$d.log"; die "rlx embed on $d failed"; }
done
if EMB=$("$PY" - "$OUT/embed_$PEER.json" "$OUT/embed_$DEVICE.json" <<'PYEOF'
import json, math, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert len(a) == len(b) and len(a) > 0, "different numbers of embeddings"
worst, cos = 0.0, 1.0
for x, y in zip(a, b):
    assert len(x) == len(y), "different embedding sizes"
    worst = max(worst, max(abs(p - q) for p, q in zip(x, y)))
    c = sum(p * q for p, q in zip(x, y)) / math.sqrt(sum(p * p for p in x) * sum(q * q for q in y))
    cos = min(cos, c)
print(f"max abs diff {worst:.2e}, min cosine {cos:.7f}")
sys.exit(0 if worst < 1e-3 and cos > 0.99999 else 1)
PYEOF
); then RESULTS+=("MiniLM embeddings vs $PEER|pass: $EMB"); else fail "MiniLM embeddings vs $PEER: $EMB"; fi

for d in "$PEER" "$DEVICE"; do
  "$RLX" generate "$OUT/qwen3" --prompt "The GPU check says" -n "$DECODE_TOKENS" --ignore-eos --device "$d" \
    --json "$OUT/generate_$d.json" --quiet > "$OUT/generate_$d.log" 2>&1 \
    || { cat "$OUT/generate_$d.log"; die "rlx generate on $d failed"; }
done
if GEN=$("$PY" - "$OUT/generate_$PEER.json" "$OUT/generate_$DEVICE.json" <<'PYEOF'
import json, sys
a, b = (json.load(open(p))["tokens"][0] for p in sys.argv[1:3])
same = 0
while same < min(len(a), len(b)) and a[same] == b[same]:
    same += 1
print(f"{same}/{len(a)} greedy tokens equal" + ("" if same == len(a) == len(b) else f", first difference at {same}"))
sys.exit(0 if same == len(a) == len(b) and len(a) > 0 else 1)
PYEOF
); then RESULTS+=("Qwen3-tiny greedy vs $PEER|pass: $GEN"); else fail "Qwen3-tiny greedy vs $PEER: $GEN"; fi

# ---------------------------------------------------------------- timing
say "timing MiniLM (batches $BATCHES, seq $SEQ) and Qwen3 decode"
for d in "$DEVICE" "$PEER"; do
  runs=$BENCH_RUNS; [ "$d" = "$PEER" ] && runs=$(( BENCH_RUNS < 5 ? BENCH_RUNS : 5 ))
  "$RLX" bench "$OUT/minilm" --device "$d" --batch "$BATCHES" --seq "$SEQ" --runs "$runs" --warmup 2 --format json \
    > "$OUT/bench_$d.json" 2> "$OUT/bench_$d.log" || { cat "$OUT/bench_$d.log"; die "rlx bench on $d failed"; }
done
TABLE=$("$PY" - "$OUT" "$DEVICE" "$PEER" <<'PYEOF'
import json, sys
out, dev, peer = sys.argv[1:4]
b = {d: {r["batch"]: r for r in json.load(open(f"{out}/bench_{d}.json"))} for d in (dev, peer)}
rows = []
for batch in sorted(b[dev]):
    x, y = b[dev][batch], b[peer].get(batch)
    ratio = f"{y['p50_ms'] / x['p50_ms']:.2f}x" if y else "-"
    rows.append(f"| MiniLM batch {batch} seq {x['seq']} p50 ms | {x['p50_ms']:.2f} | {y['p50_ms'] if y else float('nan'):.2f} | {ratio} |")
g = {d: json.load(open(f"{out}/generate_{d}.json")) for d in (dev, peer)}
t = {d: g[d]["decode_tokens_per_s"] for d in g}
rows.append(f"| Qwen3-tiny decode tokens/s | {t[dev]:.1f} | {t[peer]:.1f} | {t[dev] / t[peer]:.2f}x |")
print("\n".join(rows))
PYEOF
) || fail "timing table"

# ---------------------------------------------------------------- the table, last
echo
echo "## rlx GPU check: $DEVICE vs $PEER ($(date -u +%Y-%m-%dT%H:%MZ), $(( $(date +%s) - T0 )) s, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo
echo "$DEVICE: $DESCRIPTION"
echo
echo "| check | result |"
echo "|---|---|"
for r in "${RESULTS[@]}"; do echo "| ${r%%|*} | ${r#*|} |"; done
echo
echo "| measure | $DEVICE | $PEER | $PEER time / $DEVICE time |"
echo "|---|---|---|---|"
echo "$TABLE"
[ "$FAILED" = 0 ] && echo && echo "all checks passed" && exit 0
echo; echo "some checks FAILED (logs in $OUT)"; exit 1
