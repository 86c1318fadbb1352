// Runs ONNX models with ONNX Runtime for Node (the oracle of the opset 18-23 tests) and writes
// their outputs as raw little-endian bytes.
// Usage: node ort_run.cjs JOBS.json   (NODE_PATH must hold onnxruntime-node)
// JOBS.json: [{"model": PATH, "inputs": [{"name", "type", "dims", "file"}], "out_dir": DIR}, ...]
// For each job it writes DIR/ort_out_K.bin and DIR/ort_outputs.json ([{"name", "type", "dims"}]),
// or DIR/ort_error.txt with ONNX Runtime's message when the session or run fails.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

const arrays = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array, int16: Int16Array,
  uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array, uint64: BigUint64Array,
  bool: Uint8Array, float16: Uint16Array,
};

function load(input) {
  const buf = fs.readFileSync(input.file);
  const A = arrays[input.type];
  if (!A) throw new Error(`input ${input.name}: type ${input.type} is not supported by ort_run.cjs`);
  const copy = new Uint8Array(buf.length);
  copy.set(buf);
  const data = new A(copy.buffer, 0, buf.length / A.BYTES_PER_ELEMENT);
  return new ort.Tensor(input.type, data, input.dims);
}

async function main() {
  const jobs = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  let failed = 0;
  for (const job of jobs) {
    try {
      const session = await ort.InferenceSession.create(job.model, {graphOptimizationLevel: 'disabled'});
      const feeds = {};
      for (const input of job.inputs) feeds[input.name] = load(input);
      const out = await session.run(feeds);
      const meta = [];
      session.outputNames.forEach((name, k) => {
        const t = out[name];
        const d = t.data;
        fs.writeFileSync(path.join(job.out_dir, `ort_out_${k}.bin`), Buffer.from(d.buffer, d.byteOffset, d.byteLength));
        meta.push({name, type: t.type, dims: t.dims});
      });
      fs.writeFileSync(path.join(job.out_dir, 'ort_outputs.json'), JSON.stringify(meta));
    } catch (e) {
      ++failed;
      fs.writeFileSync(path.join(job.out_dir, 'ort_error.txt'), String(e && e.message ? e.message : e));
    }
  }
  console.log(`ort_run: ${jobs.length - failed} of ${jobs.length} models ran in onnxruntime-node ${ort.env.versions.common}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
