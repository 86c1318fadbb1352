"""A plain PyTorch implementation of the decoder families rlx runs (Llama, Mistral, Qwen2, Qwen3,
Gemma 2, Gemma 3 text, Phi-3), written from the architectures as transformers defines them -- no
transformers library -- and used as an independent reference for rlx: parity tests and the peer
benchmark. The family comes from config.json's model_type.

    /usr/bin/python3 scripts/peers/decoder_torch.py logits MODEL_DIR IDS.npy LENS.npy OUT.npy [--f32]
        IDS [N, L] i64 right-padded token ids, LENS [N] their lengths; OUT [N, L, vocab] f32 logits of
        each sequence computed alone (no padding, causal), zeros past each length. Computes in f64
        unless --f32.
    /usr/bin/python3 scripts/peers/decoder_torch.py bench MODEL_DIR --prompt 128 --decode 32 [--threads 2]
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


class Decoder:
    def __init__(self, model_dir, dtype=torch.float64):
        with open(model_dir + "/config.json") as f:
            self.cfg = json.load(f)
        self.w = read_safetensors(model_dir + "/model.safetensors", dtype)
        self.dtype = dtype
        c = self.cfg
        self.type = c["model_type"]
        self.gemma = self.type in ("gemma2", "gemma3_text")
        self.hq = c["num_attention_heads"]
        self.hkv = c.get("num_key_value_heads", self.hq)
        self.hidden = c["hidden_size"]
        self.d = c.get("head_dim", self.hidden // self.hq)
        self.eps = c.get("rms_norm_eps", 1e-6)
        self.theta = c.get("rope_theta", 10000.0)
        self.layers = c["num_hidden_layers"]
        self.window = c.get("sliding_window") or 0
        if self.type in ("qwen2", "qwen3") and not c.get("use_sliding_window", False):
            self.window = 0
        self.scale = (c.get("query_pre_attn_scalar", self.d) if self.gemma else self.d) ** -0.5
        self.attn_cap = (c.get("attn_logit_softcapping") or 0.0) if self.type == "gemma2" else 0.0
        self.final_cap = (c.get("final_logit_softcapping") or 0.0) if self.type == "gemma2" else 0.0
        act = c.get("hidden_activation", c.get("hidden_act", "silu"))
        self.gelu = act in ("gelu_pytorch_tanh", "gelu_tanh", "gelu")
        self.rope_scaling = c.get("rope_scaling")
        # Phi-3's fused matrices, split as its modeling code chunks them
        for l in range(self.layers):
            p = "model.layers.%d." % l
            if p + "self_attn.qkv_proj.weight" in self.w:
                qkv = self.w.pop(p + "self_attn.qkv_proj.weight")
                nq, nkv = self.hq * self.d, self.hkv * self.d
                self.w[p + "self_attn.q_proj.weight"] = qkv[:nq]
                self.w[p + "self_attn.k_proj.weight"] = qkv[nq:nq + nkv]
                self.w[p + "self_attn.v_proj.weight"] = qkv[nq + nkv:]
            if p + "mlp.gate_up_proj.weight" in self.w:
                gu = self.w.pop(p + "mlp.gate_up_proj.weight")
                n = gu.shape[0] // 2
                self.w[p + "mlp.gate_proj.weight"] = gu[:n]
                self.w[p + "mlp.up_proj.weight"] = gu[n:]
        head = "model.embed_tokens.weight" if c.get("tie_word_embeddings", False) else "lm_head.weight"
        self.head = self.w[head]

    def sliding(self, l):
        if not self.window:
            return False
        if self.type == "gemma2":
            return l % 2 == 0
        if self.type == "gemma3_text":
            return (l + 1) % self.cfg.get("sliding_window_pattern", 6) != 0
        return True

    def longrope(self):
        # Hugging Face's _compute_longrope_parameters: (original context, factor, attention factor)
        r, c = self.rope_scaling, self.cfg
        orig = c.get("original_max_position_embeddings") or r.get("original_max_position_embeddings") or c["max_position_embeddings"]
        factor = c["max_position_embeddings"] / orig if c.get("original_max_position_embeddings") else r.get("factor", 1.0)
        att = r.get("attention_factor") or (math.sqrt(1 + math.log(factor) / math.log(orig)) if factor > 1 else 1.0)
        return orig, factor, att

    def inv_freq(self, l, seq_len=0):
        d = self.d
        local = self.type == "gemma3_text" and self.sliding(l)
        theta = self.cfg.get("rope_local_base_freq", 10000.0) if local else self.theta
        inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        r = self.rope_scaling
        if local or not r:
            return inv
        kind = r.get("rope_type", r.get("type"))
        if kind == "linear":
            return inv / r["factor"]
        if kind in ("longrope", "su"):
            # the long factors once the sequence passes the original context (Hugging Face's
            # dynamic update), else the short ones
            orig = self.longrope()[0]
            ext = r["long_factor"] if seq_len > orig else r["short_factor"]
            return inv / torch.tensor(ext, dtype=torch.float64)
        if kind == "yarn":
            # Hugging Face's _compute_yarn_parameters (truncate = True): pair i extrapolates below
            # the fast correction dimension, interpolates above the slow one, mixes between
            factor, orig = r["factor"], r.get("original_max_position_embeddings", self.cfg["max_position_embeddings"])
            fast, slow = r.get("beta_fast", 32.0), r.get("beta_slow", 1.0)

            def corr(rot):
                return d * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(theta))

            low, high = max(math.floor(corr(fast)), 0), min(math.ceil(corr(slow)), d - 1)
            ramp = ((torch.arange(d // 2, dtype=torch.float64) - low) / max(high - low, 0.001)).clamp(0, 1)
            extrapolate = 1 - ramp
            return inv / factor * (1 - extrapolate) + inv * extrapolate
        if kind == "llama3":
            factor, lo, hi = r["factor"], r["low_freq_factor"], r["high_freq_factor"]
            old = r["original_max_position_embeddings"]
            wavelen = 2 * math.pi / inv
            scaled = torch.where(wavelen > old / lo, inv / factor, inv)
            smooth = (old / wavelen - lo) / (hi - lo)
            smoothed = (1 - smooth) * scaled / factor + smooth * scaled
            medium = (wavelen >= old / hi) & (wavelen <= old / lo)
            return torch.where(medium, smoothed, scaled)
        raise ValueError("rope_scaling %r" % kind)

    def rms(self, x, name):
        w = self.w[name]
        if self.gemma:
            w = 1.0 + w
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * w

    def attention_factor(self, l):
        # what YaRN multiplies cos and sin by (Hugging Face's get_mscale), 1 otherwise
        r = self.rope_scaling
        local = self.type == "gemma3_text" and self.sliding(l)
        if not local and r and r.get("rope_type", r.get("type")) in ("longrope", "su"):
            return self.longrope()[2]
        if local or not r or r.get("rope_type", r.get("type")) != "yarn":
            return 1.0
        if r.get("attention_factor"):
            return r["attention_factor"]

        def get(f, m=1.0):
            return 1.0 if f <= 1 else 0.1 * m * math.log(f) + 1.0

        if r.get("mscale") and r.get("mscale_all_dim"):
            return get(r["factor"], r["mscale"]) / get(r["factor"], r["mscale_all_dim"])
        return get(r["factor"])

    def rope(self, x, pos, l):
        # x [H, S, D]; rotate the two halves (NeoX / Hugging Face rotate_half)
        d = x.shape[-1]
        ang = pos[:, None].to(torch.float64) * self.inv_freq(l, int(pos.max()) + 1)[None, :]
        emb = torch.cat([ang, ang], -1)
        m = self.attention_factor(l)
        cos, sin = (emb.cos() * m).to(x.dtype), (emb.sin() * m).to(x.dtype)
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def proj(self, h, name):
        y = h @ self.w[name + ".weight"].T
        if name + ".bias" in self.w:
            y = y + self.w[name + ".bias"]
        return y

    def layer(self, l, x, pos, cache):
        """x [S, H] new tokens at positions pos; cache (k, v) [Hkv, P, D] of earlier tokens or None."""
        w, p = self.w, "model.layers.%d." % l
        s = x.shape[0]
        h = self.rms(x, p + "input_layernorm.weight")
        q = self.proj(h, p + "self_attn.q_proj").view(s, self.hq, self.d)
        k = self.proj(h, p + "self_attn.k_proj").view(s, self.hkv, self.d)
        v = self.proj(h, p + "self_attn.v_proj").view(s, self.hkv, self.d)
        if p + "self_attn.q_norm.weight" in w:
            q = self.rms(q, p + "self_attn.q_norm.weight")
            k = self.rms(k, p + "self_attn.k_norm.weight")
        q = self.rope(q.transpose(0, 1), pos, l)
        k = self.rope(k.transpose(0, 1), pos, l)
        v = v.transpose(0, 1)
        if cache is not None:
            k = torch.cat([cache[0], k], 1)
            v = torch.cat([cache[1], v], 1)
        new_cache = (k, v)
        rep = self.hq // self.hkv
        kk = k.repeat_interleave(rep, 0)
        vv = v.repeat_interleave(rep, 0)
        t = kk.shape[1]
        scores = q @ kk.transpose(1, 2) * self.scale
        if self.attn_cap:
            scores = torch.tanh(scores / self.attn_cap) * self.attn_cap
        # query i (absolute t - s + i) sees keys 0 .. t - s + i, the last `window` of them on sliding layers
        qi = torch.arange(s)[:, None] + (t - s)
        kj = torch.arange(t)[None, :]
        hidden = kj > qi
        if self.sliding(l):
            hidden = hidden | (qi - kj >= self.window)
        scores = scores.masked_fill(hidden, float("-inf"))
        o = torch.softmax(scores, -1) @ vv
        o = o.transpose(0, 1).reshape(s, self.hq * self.d) @ w[p + "self_attn.o_proj.weight"].T
        if self.gemma:
            o = self.rms(o, p + "post_attention_layernorm.weight")
            x = x + o
            h = self.rms(x, p + "pre_feedforward_layernorm.weight")
        else:
            x = x + o
            h = self.rms(x, p + "post_attention_layernorm.weight")
        g = h @ w[p + "mlp.gate_proj.weight"].T
        g = torch.nn.functional.gelu(g, approximate="tanh") if self.gelu else torch.nn.functional.silu(g)
        u = h @ w[p + "mlp.up_proj.weight"].T
        m = (g * u) @ w[p + "mlp.down_proj.weight"].T
        if self.gemma:
            m = self.rms(m, p + "post_feedforward_layernorm.weight")
        return x + m, new_cache

    def forward(self, ids, caches=None, start=0):
        """ids [S] i64 -> logits [S, vocab], new caches."""
        x = self.w["model.embed_tokens.weight"][ids]
        if self.gemma:
            x = x * torch.tensor(self.hidden ** 0.5, dtype=x.dtype)
        pos = torch.arange(start, start + ids.shape[0])
        out = []
        for l in range(self.layers):
            x, c = self.layer(l, x, pos, None if caches is None else caches[l])
            out.append(c)
        x = self.rms(x, "model.norm.weight")
        logits = x @ self.head.T
        if self.final_cap:
            logits = torch.tanh(logits / self.final_cap) * self.final_cap
        return logits, out


def cmd_logits(argv):
    model_dir, ids_path, lens_path, out_path = argv[:4]
    dtype = torch.float32 if "--f32" in argv else torch.float64
    m = Decoder(model_dir, dtype)
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
    m = Decoder(model_dir, torch.float32)
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
