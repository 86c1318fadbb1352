#!/usr/bin/python3
"""`rlx serve` throughput under concurrent clients, against llama.cpp batching the same number
of sequences (node-llama-cpp: one context with C sequences generating at once, the batched
decode llama-server runs), on the same GGUF file and threads; and embeddings/s of a
MiniLM-shaped model under the same concurrency (rlx alone: no peer here serves embeddings).

    scripts/install-npm.sh       # node-llama-cpp into build/npm/llama-cpp
    /usr/bin/python3 bench/serve_bench.py [--rlx build/bin/rlx] [--rounds 2] [--concurrency 1,4,16,32]
        [--family llama] [--type f16] [--prompt 16] [--decode 64] [--threads 2] [--json OUT]

Each round measures, for each concurrency C, rlx then llama.cpp: C clients each ask for a
completion of --decode greedy tokens after a --prompt-token prompt of pseudo-random ids (the
same ids for both), all at once; tokens/s = generated tokens / wall time from the first request
to the last token. rlx's figure includes HTTP and JSON (the official client's path);
llama.cpp's is in-process (no server), which favours it. The table keeps each engine's best
round and says the spread.
"""
import argparse
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LLAMA_NPM = os.path.join(ROOT, "build", "npm", "llama-cpp")


def prompt_ids(i, n):
    x, out = 12345 + i, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) % 2147483648
        out.append(x % 2000)
    return out


class Served:
    def __init__(self, rlx, models, threads, slots, context):
        env = dict(os.environ, RLX_NUM_THREADS=str(threads))
        self.p = subprocess.Popen([rlx, "serve", *models, "--port", "0", "--parallel-slots", str(slots), "--max-context",
                                   str(context), "--max-queue", "256", "--max-batch", "32"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        m = re.search(r":(\d+)", self.p.stdout.readline())
        self.port = int(m.group(1))
        end = time.time() + 600
        while time.time() < end:
            try:
                if self.post("/health", None, "GET")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError("rlx serve did not get ready")

    def post(self, path, body, method="POST"):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        c.request(method, path, body=None if body is None else json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def close(self):
        self.p.terminate()
        self.p.wait(60)


def concurrent(fn, n):
    out = [None] * n
    ts = [threading.Thread(target=lambda i=i: out.__setitem__(i, fn(i))) for i in range(n)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out, time.perf_counter() - t0


def rlx_generate(srv, c, prompt, decode):
    def one(i):
        st, data = srv.post("/v1/completions", {"model": "dec", "prompt": prompt_ids(i, prompt), "max_tokens": decode,
                                                "temperature": 0})
        if st != 200:
            raise RuntimeError(data[:300])
        return json.loads(data)["usage"]["completion_tokens"]
    counts, s = concurrent(one, c)
    return sum(counts) / s


def rlx_embed(srv, c, texts_per_request=8):
    texts = [f"Sentence number {k}, about tensor compilers and their kernels." for k in range(texts_per_request)]

    def one(i):
        st, data = srv.post("/v1/embeddings", {"model": "emb", "input": texts})
        if st != 200:
            raise RuntimeError(data[:300])
        return len(json.loads(data)["data"])
    counts, s = concurrent(one, c)
    return sum(counts) / s


def llama_generate(model, threads, c, prompt, decode):
    env = dict(os.environ, RLX_NODE_LLAMA_CPP=LLAMA_NPM)
    env.pop("CI", None)  # node-llama-cpp refuses an empty CI variable
    r = subprocess.run(["node", os.path.join(HERE, "serve", "llama_batch_peer.mjs"), model, str(threads), str(c), str(prompt),
                        str(decode)], capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])["tokens_per_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "bin", "rlx"))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--concurrency", default="1,4,16,32")
    ap.add_argument("--family", default="llama")
    ap.add_argument("--type", default="f16")
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default="/tmp/rlx-serve-bench")
    ap.add_argument("--json")
    a = ap.parse_args()
    conc = [int(x) for x in a.concurrency.split(",")]
    os.makedirs(a.work, exist_ok=True)
    dec = os.path.join(a.work, f"{a.family}-tiny")
    gguf = os.path.join(dec, f"model-{a.type}.gguf")
    if not os.path.exists(gguf):
        subprocess.run([a.rlx, "make-model", f"{a.family}-tiny", "--out", dec, "--seed", "1", "--gguf-type", a.type], check=True,
                       capture_output=True)
    emb = os.path.join(a.work, "minilm")
    if not os.path.exists(os.path.join(emb, "config.json")):
        subprocess.run([a.rlx, "make-model", "minilm", "--out", emb], check=True, capture_output=True)
    have_llama = os.path.isdir(os.path.join(LLAMA_NPM, "node_modules", "node-llama-cpp"))
    srv = Served(a.rlx, [f"dec={gguf}", f"emb={emb}"], a.threads, max(conc), a.prompt + a.decode + 8)
    results = {}
    try:
        for c in conc:  # warm-up: every batch shape the measured runs use is compiled first
            rlx_generate(srv, c, a.prompt, 4)
            rlx_embed(srv, c)
        for rnd in range(a.rounds):
            for c in conc:
                results.setdefault(("rlx", c), []).append(rlx_generate(srv, c, a.prompt, a.decode))
                srv.close()  # the peer runs alone on the cores
                if have_llama:
                    results.setdefault(("llama.cpp", c), []).append(llama_generate(gguf, a.threads, c, a.prompt, a.decode))
                srv = Served(a.rlx, [f"dec={gguf}", f"emb={emb}"], a.threads, max(conc), a.prompt + a.decode + 8)
                rlx_embed(srv, c)  # (compiles this concurrency's shapes in the new process)
                results.setdefault(("embed", c), []).append(rlx_embed(srv, c))
                print(f"round {rnd + 1} concurrency {c}: " + ", ".join(f"{k[0]} {v[-1]:.0f}/s" for k, v in results.items() if k[1] == c),
                      flush=True)
    finally:
        srv.close()
    print(f"\n{a.family}-tiny {a.type}, {a.threads} threads, prompt {a.prompt} tokens, {a.decode} greedy tokens per request")
    print("| clients | rlx serve tokens/s | llama.cpp tokens/s | ratio | rlx embeddings/s |")
    print("|---|---|---|---|---|")
    rows = []
    for c in conc:
        r, l, e = results[("rlx", c)], results.get(("llama.cpp", c)), results[("embed", c)]
        spread = lambda v: f"{max(v):.0f} ({min(v):.0f}-{max(v):.0f})"
        ratio = f"{max(r) / max(l):.2f}x" if l else "n/a"
        print(f"| {c} | {spread(r)} | {spread(l) if l else 'not installed'} | {ratio} | {spread(e)} |")
        rows.append({"clients": c, "rlx": r, "llama.cpp": l, "embed": e})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"family": a.family, "type": a.type, "threads": a.threads, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
