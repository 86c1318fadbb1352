// llama.cpp (node-llama-cpp's CPU build) as the oracle of rlx's decoder families: for a GGUF file
// and a prompt of token ids, the greedy next token after every prompt position (teacher forced)
// and N greedy tokens after the prompt, as JSON {"prompt_top1": [...], "tokens": [...]}.
//
//   node tests/models/llama_cpp_peer.mjs NPM_DIR MODEL.gguf 1,2,3 N
// NPM_DIR holds node_modules/node-llama-cpp (scripts/install-npm.sh: build/npm/llama-cpp).
import {pathToFileURL} from "node:url";

const [npmDir, modelPath, idsArg, nArg] = process.argv.slice(2);
const {getLlama} = await import(pathToFileURL(`${npmDir}/node_modules/node-llama-cpp/dist/index.js`).href);
const prompt = idsArg.split(",").map(Number);
const n = Number(nArg ?? 16);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error", maxThreads: 1});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: 512, threads: 1, sequences: 1});
const seq = context.getSequence();
const next = {generateNext: {token: true}};
const first = await seq.controlledEvaluate(prompt.map((t) => [t, next]));
const promptTop1 = first.map((r) => r?.next?.token);
const tokens = [promptTop1[promptTop1.length - 1]];
while (tokens.length < n) {
  const r = await seq.controlledEvaluate([[tokens[tokens.length - 1], next]]);
  tokens.push(r[0].next.token);
}
console.log(JSON.stringify({prompt_top1: promptTop1, tokens}));
await context.dispose();
await model.dispose();
await llama.dispose();
