// Greedy tokens from llama.cpp (node-llama-cpp) for a prompt of token ids: a cross-check that
// GGUF files written by rlx mean the same to llama.cpp as to rlx.
//
//   node bench/qwen3/llama_generate.mjs MODEL.gguf 1,2,3 N
import {getLlama} from "node-llama-cpp";

const [modelPath, idsArg, nArg] = process.argv.slice(2);
const prompt = idsArg.split(",").map(Number);
const n = Number(nArg ?? 16);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error", maxThreads: 1});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: 512, threads: 1, sequences: 1});
const seq = context.getSequence();
const out = [];
for await (const token of seq.evaluate(prompt, {temperature: 0})) {
  out.push(token);
  if (out.length >= n) break;
}
console.log(JSON.stringify({tokens: out}));
await context.dispose();
await model.dispose();
await llama.dispose();
