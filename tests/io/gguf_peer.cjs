// The independent GGUF peer for tests/io/gguf_test.cpp: @huggingface/gguf under node.
//   node gguf_peer.cjs read FILE    prints {version, metadata: {key: {type, subType, value}},
//                                   tensors: [{name, shape, type}]} as JSON; every number is
//                                   printed as a string (u64/i64 values do not fit a double)
//   node gguf_peer.cjs write FILE   writes a tensor-less GGUF v3 file with the package's own
//                                   writer (serializeGgufMetadata)
// NODE_PATH must point at the node_modules folder holding @huggingface/gguf.
"use strict";
const fs = require("fs");
const { gguf, serializeGgufMetadata, GGUFValueType } = require("@huggingface/gguf");

function text(v) {
  if (Array.isArray(v)) return v.map(text);
  if (typeof v === "bigint" || typeof v === "number" || typeof v === "boolean") return String(v);
  return v;
}

async function read(path) {
  const { metadata, typedMetadata, tensorInfos } = await gguf(path, { allowLocalFile: true, typedMetadata: true });
  const out = { version: metadata.version, metadata: {}, tensors: [] };
  for (const [key, entry] of Object.entries(typedMetadata)) {
    if (key === "version" || key === "tensor_count" || key === "kv_count") continue;
    out.metadata[key] = { type: entry.type, value: text(entry.value) };
    if (entry.subType !== undefined) out.metadata[key].subType = entry.subType;
  }
  for (const t of tensorInfos) out.tensors.push({ name: t.name, shape: t.shape.map(String), type: t.dtype });
  process.stdout.write(JSON.stringify(out));
}

function write(path) {
  const T = GGUFValueType;
  const md = {
    version: { value: 3, type: T.UINT32 },
    tensor_count: { value: 0n, type: T.UINT64 },
    kv_count: { value: 0n, type: T.UINT64 },
    "general.architecture": { value: "llama", type: T.STRING },
    "llama.context_length": { value: 4096, type: T.UINT32 },
    "t.i8": { value: -7, type: T.INT8 },
    "t.i64": { value: -1234567890123n, type: T.INT64 },
    "t.u64": { value: 1234567890123n, type: T.UINT64 },
    "t.f32": { value: 0.25, type: T.FLOAT32 },
    "t.f64": { value: 1.5, type: T.FLOAT64 },
    "t.bool": { value: true, type: T.BOOL },
    "tokenizer.ggml.tokens": { value: ["<s>", "</s>", "hello"], type: T.ARRAY, subType: T.STRING },
    "tokenizer.ggml.scores": { value: [0, -1, -2.5], type: T.ARRAY, subType: T.FLOAT32 },
    "tokenizer.ggml.token_type": { value: [3, 3, 1], type: T.ARRAY, subType: T.INT32 },
  };
  md.kv_count.value = BigInt(Object.keys(md).length - 3);
  fs.writeFileSync(path, serializeGgufMetadata(md, { alignment: 32 }));
}

const [mode, path] = process.argv.slice(2);
if (mode === "read") {
  read(path).catch((e) => {
    console.error(String(e && e.stack ? e.stack : e));
    process.exit(1);
  });
} else if (mode === "write") {
  write(path);
} else {
  console.error("usage: gguf_peer.cjs read|write FILE");
  process.exit(2);
}
