#!/usr/bin/python3
"""MiniLM (all-MiniLM-L6-v2 architecture) sentence embeddings: rlx on the CPU against PyTorch
(eager, and TorchScript-frozen) and ONNX Runtime (onnxruntime-node, all graph optimizations),
on the same generated model, each with the same number of threads, in one invocation.

    /usr/bin/python3 bench/minilm.py [--build build] [--batch 1,8,32] [--seq 128] [--runs 20]

Each engine is its own long-lived process (rlx: bench/minilm_server.cpp; PyTorch:
scripts/peers/bert_torch.py serve; ONNX Runtime: scripts/peers/minilm_ort.js) fed the same
token ids (valid ids, [CLS] ... [SEP], full attention mask). For each batch every engine warms
up, then the runs are taken in rounds, the engines one after the other in a rotating order, so
that a change of the machine's load hits all of them alike, with a pause (--gap) before each
engine's runs so that the previous engine's spinning threads are idle; OpenBLAS sgemm (numpy, same
threads) is timed in every round too. The table gives p50 / p90 over all runs, the ratio of
p50 to the best peer's p50 (below 1: rlx is faster), achieved GFLOP/s (the model's
multiply-adds x 2 over p50), the same as a percentage of sgemm's GFLOP/s measured in this run,
each process's peak resident memory (VmHWM), and the process CPU time per run (p50) with its
ratio to the best peer's: with --threads 1 that measures the work each engine does, whatever
the machine's load (with more threads it also counts threads spinning while they wait). The first output row of every engine is
compared with rlx's (max abs difference) so that all compute the same thing.

oneapi: the engine rlx-oneapi is rlx's oneapi device (oneDNN's matmul, softmax and layer
normalization beside the cpu device's kernels), against the same peers:

    /usr/bin/python3 bench/minilm.py --engines rlx,rlx-oneapi,ort --batch 1,8,32

int8: the engines rlx-int8 (the folder of `rlx quantize --scheme int8`, made beside the model)
and ort-int8 (the same int8 weights in the DynamicQuantizeLinear / MatMulInteger form of ONNX
Runtime's quantize_dynamic, scripts/peers/onnx_quantize_dynamic.py) are compared with each
other: an int8 row's "best peer" is the best int8 peer, an f32 row's the best f32 one.

    /usr/bin/python3 bench/minilm.py --engines rlx,rlx-int8,ort,ort-int8 --batch 8,32

--busy N starts N processes that each spin on one core while the engines are timed: the
slowdown of each engine against a run without them says how it copes with a competing job.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="rlx build folder")
    ap.add_argument("--model", help="model folder (default BUILD/minilm, made with rlx make-model if missing)")
    ap.add_argument("--npm", help="folder of scripts/install-npm.sh (default BUILD/npm, then build/npm)")
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--runs", type=int, default=20, help="timed runs per engine and batch (at least 20)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4, help="the runs are split into this many interleaved rounds")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--engines", default="rlx,torch,torch-script,ort")
    ap.add_argument("--md", help="also write the table (markdown) to this file")
    ap.add_argument("--gap", type=float, default=0.25,
                    help="seconds of pause before each engine's runs in a round (other engines' threads go idle)")
    ap.add_argument("--busy", type=int, default=0,
                    help="competing processes, each a busy loop on one core, running while the engines are timed")
    return ap.parse_args()


a = parse()
# numpy's OpenBLAS reads its thread count at import
os.environ["OPENBLAS_NUM_THREADS"] = str(a.threads)
import numpy as np  # noqa: E402


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def sgemm_gflops(n=1024, calls=8):
    x = np.random.rand(n, n).astype(np.float32)
    y = np.random.rand(n, n).astype(np.float32)
    x @ y
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter()
        x @ y
        ts.append(time.perf_counter() - t0)
    ts.sort()
    time.sleep(0.2)  # OpenBLAS's idle threads spin for a while after a call
    return 2.0 * n ** 3 / ts[len(ts) // 2] / 1e9


def model_flops(cfg, b, s):
    h, inter, layers, heads = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
    t = b * s
    per_layer = 2 * t * (4 * h * h + 2 * h * inter) + 2 * 2 * b * s * s * h
    return layers * per_layer


class Engine:
    def __init__(self, name, argv, env):
        self.name = name
        e = dict(os.environ)
        e.update(env)
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=e)
        self.times = []
        self.cpu = []
        first = self.read()
        if not first.get("ready"):
            raise SystemExit("%s did not start: %s" % (name, first))

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit("%s exited (code %s)" % (self.name, self.p.wait()))
        return json.loads(line)

    def cmd(self, c):
        self.p.stdin.write(c + "\n")
        self.p.stdin.flush()
        return self.read()

    def run(self, n, keep=True):
        r = self.cmd("run %d" % n)
        if keep:
            self.times += r["ms"]
            self.cpu += r.get("cpu_ms", [])
        return r["ms"]

    def peak_rss_mb(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
        return float("nan")

    def close(self):
        try:
            self.cmd("quit")
        except (SystemExit, BrokenPipeError, ValueError):
            pass
        self.p.wait()


def start_busy(n):
    """n processes that each keep one core busy (a competing job on a shared machine)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main():
    busy = start_busy(a.busy)
    try:
        measure()
    finally:
        for p in busy:
            p.kill()
            p.wait()


def measure():
    build = os.path.abspath(a.build)
    model = os.path.abspath(a.model or os.path.join(build, "minilm"))
    rlx = os.path.join(build, "bin", "rlx")
    server = os.path.join(build, "bin", "rlx_bench_minilm_server")
    for exe in (rlx, server):
        if not os.path.exists(exe):
            raise SystemExit("missing %s: ninja -C %s rlx rlx_bench_minilm_server" % (exe, build))
    if not os.path.exists(os.path.join(model, "model.safetensors")):
        subprocess.check_call([rlx, "make-model", "minilm", "--out", model])
    engines = a.engines.split(",")
    onnx = os.path.join(model, "model.onnx")
    if any(e.startswith("ort") for e in engines) and not os.path.exists(onnx):
        subprocess.check_call([sys.executable, os.path.join(ROOT, "scripts/peers/bert_torch.py"), "export-onnx", model, onnx])
    # int8: rlx's `quantize --scheme int8` folder, and the same weights in the form ONNX
    # Runtime's quantize_dynamic writes (scripts/peers/onnx_quantize_dynamic.py)
    model_int8, onnx_int8 = model + "-int8", os.path.join(model, "model-int8.onnx")
    if "rlx-int8" in engines and not os.path.exists(os.path.join(model_int8, "model.safetensors")):
        subprocess.check_call([rlx, "quantize", model, model_int8, "--scheme", "int8"])
    if "ort-int8" in engines and not os.path.exists(onnx_int8):
        subprocess.check_call(["/usr/bin/python3", os.path.join(ROOT, "scripts/peers/onnx_quantize_dynamic.py"), onnx, onnx_int8])
    npm = a.npm or next((d for d in (os.path.join(build, "npm"), os.path.join(ROOT, "build/npm"))
                         if os.path.isdir(os.path.join(d, "node_modules/onnxruntime-node"))), None)
    if any(e.startswith("ort") for e in engines) and not npm:
        raise SystemExit("onnxruntime-node is not installed: scripts/install-npm.sh %s/npm" % build)
    cfg = json.load(open(os.path.join(model, "config.json")))
    th = str(a.threads)
    torch_env = {"OMP_NUM_THREADS": th, "OMP_WAIT_POLICY": "PASSIVE", "MALLOC_MMAP_THRESHOLD_": "33554432",
                 "MALLOC_TRIM_THRESHOLD_": "1073741824"}
    rows, checks = [], []
    loads = [load_average()]
    gemm_all = []
    work = os.path.join(build, "minilm-bench-inputs")
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(0)
    for b in [int(x) for x in a.batch.split(",")]:
        s = a.seq
        ids = rng.integers(1000, cfg["vocab_size"], size=(b, s), dtype=np.int64)
        ids[:, 0], ids[:, -1] = 101, 102  # [CLS] ... [SEP]
        files = []
        for name, arr in (("ids", ids), ("mask", np.ones((b, s), np.int64)), ("types", np.zeros((b, s), np.int64))):
            path = os.path.join(work, "%s_%d_%d.bin" % (name, b, s))
            arr.astype("<i8").tofile(path)
            files.append(path)
        running = []
        for e in engines:
            if e in ("rlx", "rlx-int8"):
                running.append(Engine(e, [server, model if e == "rlx" else model_int8, str(b), str(s)] + files,
                                      {"RLX_NUM_THREADS": th}))
            elif e == "rlx-oneapi":  # the oneapi device: oneDNN primitives (OpenMP threads) beside the cpu's kernels
                running.append(Engine(e, [server, model, str(b), str(s)] + files,
                                      {"RLX_NUM_THREADS": th, "OMP_NUM_THREADS": th, "RLX_BENCH_DEVICE": "oneapi"}))
            elif e in ("torch", "torch-script"):
                argv = ["/usr/bin/python3", os.path.join(ROOT, "scripts/peers/bert_torch.py"), "serve", model, str(b), str(s)]
                argv += files + ["--threads=" + th] + (["--script"] if e == "torch-script" else [])
                running.append(Engine("pytorch" + (" (torchscript)" if e == "torch-script" else ""), argv, torch_env))
            elif e in ("ort", "ort-int8"):
                running.append(Engine("onnxruntime" + (" int8" if e == "ort-int8" else ""),
                                      ["node", os.path.join(ROOT, "scripts/peers/minilm_ort.js"),
                                       onnx if e == "ort" else onnx_int8, str(b), str(s)] + files + [th],
                                      {"NODE_PATH": os.path.join(npm, "node_modules")}))
            else:
                raise SystemExit("unknown engine " + e)
        for en in running:
            en.run(a.warmup, keep=False)
        per_round = max(1, (a.runs + a.rounds - 1) // a.rounds)
        gemm = []
        for r in range(a.rounds):
            gemm.append(sgemm_gflops())
            order = running[r % len(running):] + running[:r % len(running)]
            for en in order:
                # a pause first: ONNX Runtime's worker threads spin for a while after a run,
                # and the rotation keeps the engines' cyclic order, so without it the engine
                # after ORT always ran beside two spinning threads (rlx int8 at batch 1 took
                # 10.3 ms there against 5.5 ms alone)
                time.sleep(a.gap)
                en.run(per_round)
        gemm_all += gemm
        ref = np.array(running[0].cmd("emb")["emb"])
        for en in running[1:]:
            checks.append((b, en.name, float(np.max(np.abs(np.array(en.cmd("emb")["emb"]) - ref)))))
        gemm.sort()
        g = gemm[len(gemm) // 2]
        fl = model_flops(cfg, b, s)
        res = []
        for en in running:
            t = sorted(en.times)
            c = sorted(en.cpu)
            res.append((en.name, t[len(t) // 2], t[min(len(t) - 1, len(t) * 9 // 10)], len(t), en.peak_rss_mb(),
                        c[len(c) // 2] if c else float("nan")))
            en.close()
        # each row against the best peer (not rlx) of its precision: int8 rows against int8 peers
        def best_of(col, int8):
            v = [x[col] for x in res if not x[0].startswith("rlx") and ("int8" in x[0]) == int8]
            return min(v) if v else float("nan")
        for name, p50, p90, n, rss, cpu in res:
            i8 = "int8" in name
            rows.append((name, b, s, p50, p90, p50 / best_of(1, i8), fl / p50 / 1e6, 100 * fl / p50 / 1e6 / g, g, rss,
                         n, cpu, cpu / best_of(5, i8)))
        loads.append(load_average())
        print("batch %d done (load %s)" % (b, loads[-1]), file=sys.stderr, flush=True)
    out = []
    out.append("threads %d, seq %d, %d runs per engine and batch after %d warm-up, %d competing busy processes, "
               "load average %s" % (a.threads, a.seq, a.runs, a.warmup, a.busy, " -> ".join(loads)))
    out.append("")
    out.append("| engine | batch | p50 ms | p90 ms | p50 / best peer | GFLOP/s | % of sgemm | sgemm GFLOP/s | peak RSS MB "
               "| CPU ms p50 | CPU / best peer | runs |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, b, s, p50, p90, ratio, gf, pct, g, rss, n, cpu, cpu_ratio in rows:
        out.append("| %s | %d | %.1f | %.1f | %.2f | %.1f | %.0f%% | %.0f | %.0f | %.1f | %.2f | %d |" %
                   (name, b, p50, p90, ratio, gf, pct, g, rss, cpu, cpu_ratio, n))
    out.append("")
    out.append("first embedding, max abs difference to rlx: " +
               ", ".join("%s b=%d %.1e" % (n, b, d) for b, n, d in checks))
    text = "\n".join(out)
    print(text)
    if a.md:
        with open(a.md, "w") as f:
            f.write(text + "\n")


main()
