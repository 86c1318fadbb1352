// llama.cpp (node-llama-cpp's prebuilt CPU binaries) as the peer of bench/serve_bench.py: C
// sequences of one context generating at once (llama.cpp batches their decode steps), each a
// prompt of pseudo-random ids and then greedy tokens; prints the aggregate tokens/s.
//
//   node bench/serve/llama_batch_peer.mjs MODEL.gguf THREADS CONCURRENCY PROMPT_TOKENS DECODE_TOKENS
// node-llama-cpp comes from $RLX_NODE_LLAMA_CPP/node_modules (scripts/install-npm.sh installs it
// in build/npm/llama-cpp).
import {pathToFileURL} from "node:url";

const {getLlama} = await import(pathToFileURL(`${process.env.RLX_NODE_LLAMA_CPP}/node_modules/node-llama-cpp/dist/index.js`).href);
const [modelPath, threadsArg, concArg, promptArg, decodeArg] = process.argv.slice(2);
const threads = Number(threadsArg), conc = Number(concArg), promptLen = Number(promptArg), decodeN = Number(decodeArg);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error", maxThreads: threads});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: conc * (promptLen + decodeN + 16), threads, batchSize: 512, sequences: conc});
// the same pseudo-random prompts as serve_bench.py (ids below 2000)
function prompt(i) {
  let x = 12345 + i;
  const p = [];
  for (let k = 0; k < promptLen; ++k) {
    x = (x * 1103515245 + 12345) % 2147483648;
    p.push(x % 2000);
  }
  return p;
}
const seqs = Array.from({length: conc}, () => context.getSequence());
const t0 = performance.now();
const counts = await Promise.all(seqs.map(async (seq, i) => {
  let n = 0;
  for await (const token of seq.evaluate(prompt(i), {temperature: 0})) {
    if (++n >= decodeN) break;
  }
  return n;
}));
const s = (performance.now() - t0) / 1000;
const tokens = counts.reduce((a, b) => a + b, 0);
console.log(JSON.stringify({peer: "llama.cpp (node-llama-cpp)", threads, concurrency: conc, tokens, seconds: s, tokens_per_s: tokens / s}));
await context.dispose();
await model.dispose();
await llama.dispose();
