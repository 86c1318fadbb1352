// ONNX Runtime's side of bench/minilm.py (and the ONNX parity test): loads an ONNX export of
// the model with every graph optimization on, then answers commands on stdin like
// bench/minilm_server.cpp: "run N" -> {"ms": [...], "cpu_ms": [...]} (process CPU time), "emb" -> {"emb": [...]} (first row),
// "save FILE" (the whole first output as raw float32), "quit".
// Usage: node minilm_ort.js MODEL.onnx BATCH SEQ IDS.bin MASK.bin TYPES.bin THREADS
// Finds onnxruntime-node through NODE_PATH (scripts/install-npm.sh puts it in DIR/node_modules).
const fs = require('fs');
const readline = require('readline');
const ort = require('onnxruntime-node');

async function main() {
  const [model, batch, seq, idsPath, maskPath, typesPath, threads] = process.argv.slice(2);
  const b = parseInt(batch), s = parseInt(seq);
  const load = (p) => {
    const buf = fs.readFileSync(p);
    return new BigInt64Array(buf.buffer, buf.byteOffset, b * s);
  };
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: parseInt(threads || '2'),
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  const all = {input_ids: load(idsPath), attention_mask: load(maskPath), token_type_ids: load(typesPath)};
  for (const name of session.inputNames) feeds[name] = new ort.Tensor('int64', all[name], [b, s]);
  let out = await session.run(feeds);
  console.log(JSON.stringify({ready: true, inputs: session.inputNames}));
  const rl = readline.createInterface({input: process.stdin});
  for await (const line of rl) {
    const [cmd, arg] = line.trim().split(/\s+/);
    if (cmd === 'run') {
      const ms = [], cpu_ms = [];
      for (let i = 0; i < parseInt(arg); ++i) {
        const c0 = process.cpuUsage();
        const t0 = process.hrtime.bigint();
        out = await session.run(feeds);
        ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
        const c = process.cpuUsage(c0);
        cpu_ms.push((c.user + c.system) / 1e3);
      }
      console.log(JSON.stringify({ms, cpu_ms}));
    } else if (cmd === 'emb') {
      const t = out[session.outputNames[0]];
      const d = t.dims[t.dims.length - 1];
      console.log(JSON.stringify({emb: Array.from(t.data.slice(0, d))}));
    } else if (cmd === 'save') {
      // the whole first output as raw little-endian float32
      const t = out[session.outputNames[0]];
      fs.writeFileSync(arg, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
      console.log(JSON.stringify({saved: arg, dims: t.dims}));
    } else if (cmd === 'quit') {
      break;
    }
  }
  process.exit(0);
}

main().catch((e) => {
  console.error(String(e));
  process.exit(1);
});
