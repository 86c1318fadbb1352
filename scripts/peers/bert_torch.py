"""A plain PyTorch implementation of a BERT-family sentence embedder (all-MiniLM-L6-v2's
architecture), written from the architecture alone -- no transformers library -- and used as
an independent reference for rlx: parity tests, the ONNX export, and the peer benchmark.

    /usr/bin/python3 scripts/peers/bert_torch.py embed MODEL_DIR IDS.npy MASK.npy OUT.npy
    /usr/bin/python3 scripts/peers/bert_torch.py export-onnx MODEL_DIR OUT.onnx
    /usr/bin/python3 scripts/peers/bert_torch.py bench MODEL_DIR --batch 1,8,32 --seq 128 --runs 20
    /usr/bin/python3 scripts/peers/bert_torch.py serve MODEL_DIR BATCH SEQ IDS.bin MASK.bin TYPES.bin [--script]

serve is PyTorch's side of bench/minilm.py: commands on stdin, "run N" -> {"ms": [...], "cpu_ms": [...]},
"emb" -> {"emb": [...]} (first output row), "quit"; .bin files hold BATCH*SEQ int64 values.

Weights are read from MODEL_DIR/model.safetensors with a small reader (json header + numpy),
so nothing beyond Debian's python3-torch and python3-numpy is needed.
"""
import json
import math
import struct
import sys
import time

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[base + b:base + e], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.astype(np.float32) if arr.dtype != np.int64 else arr.copy())
    return out


class Bert(torch.nn.Module):
    def __init__(self, cfg, w):
        super().__init__()
        self.cfg = cfg
        self.w = {k: torch.nn.Parameter(v, requires_grad=False) for k, v in w.items()}
        for i, (k, v) in enumerate(self.w.items()):
            self.register_parameter("p%d" % i, v)

    def ln(self, x, name):
        n = self.w[name + ".weight"].shape[0]  # a constant (x.shape[-1] would be symbolic in the ONNX export)
        return torch.nn.functional.layer_norm(x, (n,), self.w[name + ".weight"], self.w[name + ".bias"],
                                              self.cfg.get("layer_norm_eps", 1e-12))

    def lin(self, x, name):
        return torch.nn.functional.linear(x, self.w[name + ".weight"], self.w[name + ".bias"])

    def forward(self, input_ids, attention_mask, token_type_ids):
        cfg, w = self.cfg, self.w
        h = cfg["hidden_size"]
        nh = cfg["num_attention_heads"]
        hd = h // nh
        seq = input_ids.shape[1]
        pos = torch.arange(seq, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        x = (w["embeddings.word_embeddings.weight"][input_ids] + w["embeddings.position_embeddings.weight"][pos] +
             w["embeddings.token_type_embeddings.weight"][token_type_ids])
        x = self.ln(x, "embeddings.LayerNorm")
        ext = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min
        b = input_ids.shape[0]
        for l in range(cfg["num_hidden_layers"]):
            p = "encoder.layer.%d." % l

            def heads(t):
                return t.view(b, seq, nh, hd).permute(0, 2, 1, 3)

            q = heads(self.lin(x, p + "attention.self.query"))
            k = heads(self.lin(x, p + "attention.self.key"))
            v = heads(self.lin(x, p + "attention.self.value"))
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd) + ext
            ctx = torch.matmul(torch.softmax(s, dim=-1), v).permute(0, 2, 1, 3).reshape(b, seq, h)
            x = self.ln(self.lin(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            inter = torch.nn.functional.gelu(self.lin(x, p + "intermediate.dense"))
            x = self.ln(self.lin(inter, p + "output.dense") + x, p + "output.LayerNorm")
        m = attention_mask.unsqueeze(-1).to(torch.float32)
        mean = (x * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
        return torch.nn.functional.normalize(mean, p=2, dim=1)


def load(model_dir):
    cfg = json.load(open(model_dir + "/config.json"))
    return Bert(cfg, read_safetensors(model_dir + "/model.safetensors")).eval()


def main():
    cmd = sys.argv[1]
    if cmd == "embed":
        model = load(sys.argv[2])
        ids = torch.from_numpy(np.load(sys.argv[3]).astype(np.int64))
        mask = torch.from_numpy(np.load(sys.argv[4]).astype(np.int64))
        with torch.no_grad():
            out = model(ids, mask, torch.zeros_like(ids))
        np.save(sys.argv[5], out.numpy())
    elif cmd == "export-onnx":
        model = load(sys.argv[2])
        ids = torch.ones((2, 16), dtype=torch.long)
        mask = torch.ones((2, 16), dtype=torch.long)
        types = torch.zeros((2, 16), dtype=torch.long)
        torch.onnx.export(model, (ids, mask, types), sys.argv[3], opset_version=14,
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["sentence_embedding"],
                          dynamic_axes={n: {0: "batch_size", 1: "sequence_length"}
                                        for n in ["input_ids", "attention_mask", "token_type_ids"]} |
                                       {"sentence_embedding": {0: "batch_size"}})
    elif cmd == "bench":
        import argparse
        ap = argparse.ArgumentParser()
        ap.add_argument("dir")
        ap.add_argument("--batch", default="1,8,32")
        ap.add_argument("--seq", type=int, default=128)
        ap.add_argument("--runs", type=int, default=20)
        ap.add_argument("--warmup", type=int, default=3)
        ap.add_argument("--threads", type=int, default=2)
        ap.add_argument("--script", action="store_true", help="TorchScript-freeze the model first")
        a = ap.parse_args(sys.argv[2:])
        torch.set_num_threads(a.threads)
        model = load(a.dir)
        results = []
        for b in [int(x) for x in a.batch.split(",")]:
            ids = torch.randint(0, 100, (b, a.seq))
            mask = torch.ones((b, a.seq), dtype=torch.long)
            types = torch.zeros_like(ids)
            m = model
            with torch.no_grad():
                if a.script:
                    m = torch.jit.freeze(torch.jit.trace(model, (ids, mask, types)))
                for _ in range(a.warmup):
                    m(ids, mask, types)
                times = []
                for _ in range(a.runs):
                    t0 = time.perf_counter()
                    m(ids, mask, types)
                    times.append((time.perf_counter() - t0) * 1000)
            times.sort()
            results.append({"batch": b, "seq": a.seq, "p50_ms": times[len(times) // 2],
                            "p90_ms": times[min(len(times) - 1, len(times) * 9 // 10)], "runs": a.runs})
        print(json.dumps(results))
    elif cmd == "serve":
        threads = int(dict(a.split("=", 1) for a in sys.argv[9:] if "=" in a).get("--threads", "2"))
        torch.set_num_threads(threads)
        model = load(sys.argv[2])
        b, s = int(sys.argv[3]), int(sys.argv[4])
        ids, mask, types = (torch.from_numpy(np.fromfile(p, dtype=np.int64).reshape(b, s)) for p in sys.argv[5:8])
        m = model
        with torch.no_grad():
            if "--script" in sys.argv[8:]:
                m = torch.jit.freeze(torch.jit.trace(model, (ids, mask, types)))
            out = m(ids, mask, types)
            print(json.dumps({"ready": True}), flush=True)
            for line in sys.stdin:
                parts = line.split()
                if not parts:
                    continue
                if parts[0] == "run":
                    ms, cpu_ms = [], []
                    for _ in range(int(parts[1])):
                        c0 = time.process_time()
                        t0 = time.perf_counter()
                        out = m(ids, mask, types)
                        ms.append((time.perf_counter() - t0) * 1000)
                        cpu_ms.append((time.process_time() - c0) * 1000)
                    print(json.dumps({"ms": ms, "cpu_ms": cpu_ms}), flush=True)
                elif parts[0] == "emb":
                    print(json.dumps({"emb": out[0].tolist()}), flush=True)
                elif parts[0] == "quit":
                    break
    else:
        raise SystemExit("unknown command " + cmd)


if __name__ == "__main__":
    main()
