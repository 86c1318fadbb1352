// The llama.cpp peer of tests/unit/tokenizer_peer_test.cpp: node-llama-cpp loads each GGUF
// with vocabOnly (the tokenizer alone, no tensors) and tokenizes each text as llama.cpp's
// common_tokenize(add_special=false, parse_special=true) does.
// Usage: node llama_cpp_tokenize.cjs INPUT.json NPM_DIR   ({"files": [...], "texts": [...]};
// NPM_DIR holds node_modules/node-llama-cpp)
// Prints {"FILE": {"bos": id|null, "eos": id|null, "add_bos": bool, "add_eos": bool, "ids": [[...], ...]}, ...}.
const fs = require('fs');
const path = require('path');
const { pathToFileURL } = require('url');
(async () => {
  const entry = path.join(process.argv[3], 'node_modules', 'node-llama-cpp', 'dist', 'index.js');
  const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
  const input = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const llama = await getLlama({ gpu: false, logLevel: LlamaLogLevel.error, build: 'never' });
  const out = {};
  for (const file of input.files) {
    const model = await llama.loadModel({ modelPath: file, vocabOnly: true });
    out[file] = {
      bos: model.tokens.bos, eos: model.tokens.eos,
      add_bos: model.tokens.shouldPrependBosToken, add_eos: model.tokens.shouldAppendEosToken,
      ids: input.texts.map((t) => Array.from(model.tokenize(t, true))),
    };
    await model.dispose();
  }
  // exit only once the answer is written: a pipe takes large writes asynchronously
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
})().catch((e) => { console.error(String(e && e.stack || e)); process.exit(1); });
