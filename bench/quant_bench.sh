#!/usr/bin/env bash
# f32 vs quantized: accuracy and speed in one run (docs/quantization.md, docs/benchmarks.md).
#   bench/quant_bench.sh [BUILD_DIR]      (default build; needs targets rlx and rlx_tests_quant)
# 1. MiniLM (rlx make-model minilm) f32 vs int8: worst cosine similarity of the embeddings on the
#    parity sentences and latency of a batch of 8 x 128 tokens, best of 5 each, back to back
#    (tests/quant/ptq_test.cpp prints both); the same with static activation scales calibrated on
#    tests/quant/calib_sentences.txt (min-max and 99.99th percentile; tests/quant/calib_test.cpp);
#    Qwen3 top-1 agreement with f32 per GGUF scheme (int4-g128 included).
# 2. Qwen3 tiny (rlx make-model qwen3-tiny) decode tokens/s: f32 folder vs q8_0 / q4_k / q4_0 /
#    int4-g128 / int4-g128-asym GGUF
#    written by rlx quantize (and the int8 folder), greedy, 64 new tokens, fastest of 3 runs, alternating twice.
set -euo pipefail
B=${1:-build}
RLX=$B/bin/rlx
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
echo "== accuracy (and MiniLM int8 speed) =="
"$B/bin/rlx_tests_quant" --gtest_filter='Ptq.*:Calibration.StaticInt8*' | grep -E 'cosine|agreement'
echo "== Qwen3 tiny decode =="
"$RLX" make-model qwen3-tiny --out "$T/q3" > /dev/null
for s in q8_0 q4_k q4_0 int4-g128 int4-g128-asym; do "$RLX" quantize "$T/q3" "$T/q3-$s.gguf" --scheme "$s" > /dev/null; done
"$RLX" quantize "$T/q3" "$T/q3-int8" --scheme int8 > /dev/null
tps() { "$RLX" generate "$1" --tokens 1,2,3,4,5,6,7,8 -n 64 --runs 3 --ignore-eos --quiet 2>&1 | sed -n 's/.*decode: .*(\([0-9.]*\) tokens\/s.*/\1/p' | tail -1; }
for pass in 1 2; do
  f32=$(tps "$T/q3")
  line="pass $pass: f32 $f32 tok/s"
  for s in int8 q8_0 q4_k q4_0 int4-g128 int4-g128-asym; do
    if [ "$s" = int8 ]; then q=$(tps "$T/q3-int8"); else q=$(tps "$T/q3-$s.gguf"); fi
    line="$line | $s $q tok/s ($(awk -v a="$q" -v b="$f32" 'BEGIN{printf "%.2fx", a/b}'))"
  done
  echo "$line"
done
