#!/usr/bin/env bash
# Installs the npm packages some tests use as independent peers (node must be installed):
#   @huggingface/gguf   an independent GGUF reader (tests/io/gguf_test.cpp reads our files with it)
#   tokenizers          Hugging Face's tokenizers (the Rust library's official Node binding), the
#                       oracle of tests/unit/wordpiece_test.cpp
#   onnxruntime-node    ONNX Runtime's CPU build, the peer of bench/minilm and the MiniLM ONNX
#                       parity test; its install step would fetch GPU binaries from outside, so
#                       it is skipped (ONNXRUNTIME_NODE_INSTALL=skip): the CPU binary is inside
# into a git-ignored folder, build/npm by default. Tests look for it in $RLX_NPM_DIR, then
# <build dir>/npm, then build/npm; when it is missing they skip with that reason.
# Usage: scripts/install-npm.sh [DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/npm}
if ! command -v npm > /dev/null; then
  echo "install-npm: npm is not installed; the tests that need node packages will skip" >&2
  exit 1
fi
mkdir -p "$dir"
npm install --prefix "$dir" --no-audit --no-fund @huggingface/gguf
npm install --prefix "$dir" --no-audit --no-fund tokenizers@0.23.2
ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix "$dir" --no-audit --no-fund onnxruntime-node
echo "install-npm: installed into $dir"
