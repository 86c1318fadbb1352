"""A plain PyTorch implementation of Qwen3 (decoder-only, Qwen3ForCausalLM's architecture), written
from the architecture alone -- no transformers library -- and used as an independent reference for
rlx: parity tests and the peer benchmark.

    /usr/bin/python3 scripts/peers/qwen3_torch.py logits MODEL_DIR IDS.npy LENS.npy OUT.npy [--f32]
        IDS [N, L] i64 right-padded token ids, LENS [N] their lengths; OUT [N, L, vocab] f32 logits of
        each sequence computed alone (no padding, causal), zeros past each length. Computes in f64
        unless --f32.
    /usr/bin/python3 scripts/peers/qwen3_torch.py bench MODEL_DIR --prompt 128 --decode 32 [--threads 2]
        prefill tokens/s of a prompt and greedy decode tokens/s with a KV cache, f32, as JSON.

Weights are read from MODEL_DIR/model.safetensors with a small reader (json header + numpy), so
nothing beyond Debian's python3-torch and python3-numpy is needed.
"""
import json
import math
import struct
import sys
import time

import numpy as np
import torch

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def read_safetensors(path, dtype):
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
        out[name] = torch.from_numpy(arr.astype(np.float64)).to(dtype)
    return out


class Qwen3:
    def __init__(self, model_dir, dtype=torch.float64):
        with open(model_dir + "/config.json") as f:
            self.cfg = json.load(f)
        self.w = read_safetensors(model_dir + "/model.safetensors", dtype)
        self.dtype = dtype
        c = self.cfg
        self.hq = c["num_attention_heads"]
        self.hkv = c.get("num_key_value_heads", self.hq)
        self.d = c.get("head_dim", c["hidden_size"] // self.hq)
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.theta = c.get("rope_theta", 10000.0)
        self.layers = c["num_hidden_layers"]
        head = "model.embed_tokens.weight" if c.get("tie_word_embeddings", False) else "lm_head.weight"
        self.head = self.w[head]

    def rms(self, x, name):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w[name]

    def rope(self, x, pos):
        # x [H, S, D]; rotate the two halves (NeoX / Hugging Face rotate_half)
        d = x.shape[-1]
        inv = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        ang = pos[:, None].to(torch.float64) * inv[None, :]
        emb = torch.cat([ang, ang], -1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def layer(self, l, x, pos, cache):
        """x [S, H] new tokens at positions pos; cache (k, v) [Hkv, P, D] of earlier tokens or None."""
        w, p = self.w, "model.layers.%d." % l
        s = x.shape[0]
        h = self.rms(x, p + "input_layernorm.weight")
        q = (h @ w[p + "self_attn.q_proj.weight"].T).view(s, self.hq, self.d)
        k = (h @ w[p + "self_attn.k_proj.weight"].T).view(s, self.hkv, self.d)
        v = (h @ w[p + "self_attn.v_proj.weight"].T).view(s, self.hkv, self.d)
        q = self.rope(self.rms(q, p + "self_attn.q_norm.weight").transpose(0, 1), pos)
        k = self.rope(self.rms(k, p + "self_attn.k_norm.weight").transpose(0, 1), pos)
        v = v.transpose(0, 1)
        if cache is not None:
            k = torch.cat([cache[0], k], 1)
            v = torch.cat([cache[1], v], 1)
        new_cache = (k, v)
        rep = self.hq // self.hkv
        kk = k.repeat_interleave(rep, 0)
        vv = v.repeat_interleave(rep, 0)
        t = kk.shape[1]
        scores = q @ kk.transpose(1, 2) / math.sqrt(self.d)
        # query i (absolute t - s + i) sees keys 0 .. t - s + i
        qi = torch.arange(s)[:, None] + (t - s)
        kj = torch.arange(t)[None, :]
        scores = scores.masked_fill(kj > qi, float("-inf"))
        o = torch.softmax(scores, -1) @ vv
        x = x + o.transpose(0, 1).reshape(s, self.hq * self.d) @ w[p + "self_attn.o_proj.weight"].T
        h = self.rms(x, p + "post_attention_layernorm.weight")
        g = torch.nn.functional.silu(h @ w[p + "mlp.gate_proj.weight"].T)
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g * u) @ w[p + "mlp.down_proj.weight"].T
        return x, new_cache

    def forward(self, ids, caches=None, start=0):
        """ids [S] i64 -> logits [S, vocab], new caches."""
        x = self.w["model.embed_tokens.weight"][ids]
        pos = torch.arange(start, start + ids.shape[0])
        out = []
        for l in range(self.layers):
            x, c = self.layer(l, x, pos, None if caches is None else caches[l])
            out.append(c)
        x = self.rms(x, "model.norm.weight")
        return x @ self.head.T, out


def cmd_logits(argv):
    model_dir, ids_path, lens_path, out_path = argv[:4]
    dtype = torch.float32 if "--f32" in argv else torch.float64
    m = Qwen3(model_dir, dtype)
    ids = np.load(ids_path)
    lens = np.load(lens_path)
    vocab = m.head.shape[0]
    out = np.zeros((ids.shape[0], ids.shape[1], vocab), dtype=np.float32)
    with torch.no_grad():
        for i in range(ids.shape[0]):
            n = int(lens[i])
            logits, _ = m.forward(torch.from_numpy(ids[i, :n].astype(np.int64)))
            out[i, :n] = logits.to(torch.float32).numpy()
    np.save(out_path, out)


def cmd_bench(argv):
    model_dir = argv[0]
    opts = {"--prompt": 128, "--decode": 32, "--threads": 2, "--runs": 3}
    i = 1
    while i < len(argv):
        opts[argv[i]] = int(argv[i + 1])
        i += 2
    torch.set_num_threads(opts["--threads"])
    m = Qwen3(model_dir, torch.float32)
    vocab = m.head.shape[0]
    rng = np.random.default_rng(0)
    prompt = torch.from_numpy(rng.integers(0, vocab, opts["--prompt"]).astype(np.int64))
    best_prefill, best_decode = 0.0, 0.0
    with torch.no_grad():
        for _ in range(opts["--runs"]):
            t0 = time.perf_counter()
            logits, caches = m.forward(prompt)
            t1 = time.perf_counter()
            tok = int(torch.argmax(logits[-1]))
            pos = prompt.shape[0]
            t2 = time.perf_counter()
            for _ in range(opts["--decode"]):
                logits, caches = m.forward(torch.tensor([tok]), caches, pos)
                tok = int(torch.argmax(logits[-1]))
                pos += 1
            t3 = time.perf_counter()
            best_prefill = max(best_prefill, opts["--prompt"] / (t1 - t0))
            best_decode = max(best_decode, opts["--decode"] / (t3 - t2))
    print(json.dumps({"peer": "pytorch " + torch.__version__, "threads": opts["--threads"],
                      "prefill_tokens_per_s": best_prefill, "decode_tokens_per_s": best_decode}))


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("logits", "bench"):
        print(__doc__)
        sys.exit(2)
    {"logits": cmd_logits, "bench": cmd_bench}[sys.argv[1]](sys.argv[2:])
