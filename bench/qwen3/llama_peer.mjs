// llama.cpp (through node-llama-cpp's prebuilt CPU binaries) as the peer of bench/qwen3_bench.py:
// prefill tokens/s of a prompt of random token ids and greedy decode tokens/s, best of N runs.
//
//   node bench/qwen3/llama_peer.mjs MODEL.gguf THREADS PROMPT_TOKENS DECODE_TOKENS RUNS
// node-llama-cpp comes from $RLX_NODE_LLAMA_CPP/node_modules (scripts/install-npm.sh installs it
// in build/npm/llama-cpp), else from the usual resolution (cd bench/qwen3 && npm install
// --no-save node-llama-cpp@3.22.1).
import {pathToFileURL} from "node:url";

const {getLlama} = process.env.RLX_NODE_LLAMA_CPP
    ? await import(pathToFileURL(`${process.env.RLX_NODE_LLAMA_CPP}/node_modules/node-llama-cpp/dist/index.js`).href)
    : await import("node-llama-cpp");

const [modelPath, threadsArg, promptArg, decodeArg, runsArg] = process.argv.slice(2);
const threads = Number(threadsArg ?? 2), promptLen = Number(promptArg ?? 128);
const decodeN = Number(decodeArg ?? 64), runs = Number(runsArg ?? 3);

const llama = await getLlama({gpu: false, build: "never", logLevel: "error", maxThreads: threads});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
// a fixed pseudo-random prompt (ids below 30000: ordinary tokens of the synthetic vocabularies)
let x = 12345;
const prompt = [];
for (let i = 0; i < promptLen; ++i) {
  x = (x * 1103515245 + 12345) % 2147483648;
  prompt.push(x % 30000);
}
let bestPrefill = 0, bestDecode = 0;
for (let r = 0; r < runs; ++r) {
  const contextSize = Math.max(512, promptLen + decodeN + 16);
  const context = await model.createContext({contextSize, threads, batchSize: Math.max(512, promptLen), sequences: 1});
  const seq = context.getSequence();
  const t0 = performance.now();
  await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, promptLen - 1));
  const t1 = performance.now();
  let n = 0;
  const t2 = performance.now();
  for await (const token of seq.evaluate([prompt[promptLen - 1]], {temperature: 0})) {
    if (++n >= decodeN) break;
  }
  const t3 = performance.now();
  bestPrefill = Math.max(bestPrefill, (promptLen - 1) / ((t1 - t0) / 1000));
  bestDecode = Math.max(bestDecode, n / ((t3 - t2) / 1000));
  await context.dispose();
}
console.log(JSON.stringify({peer: "llama.cpp (node-llama-cpp)", threads, prefill_tokens_per_s: bestPrefill,
                            decode_tokens_per_s: bestDecode}));
await model.dispose();
await llama.dispose();
