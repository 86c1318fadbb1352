#!/usr/bin/python3
"""f32 vs bf16 vs int8 vs int4 in one run, speed and accuracy side by side (docs/benchmarks.md,
docs/precision.md, docs/quantization.md). Builds nothing: give it the rlx program.

    /usr/bin/python3 bench/precision_bench.py [--rlx build/bin/rlx] [--threads 2] [--rounds 5]
        [--runs 5] [--batches 8,1] [--prompt 64] [--decode 32] [--dir DIR] [--smoke] [--no-qwen3]

It writes the random-weight models of `rlx make-model` into a temporary folder (or --dir) and
makes the variants with rlx itself: bf16 is the f32 model under `--precision bf16` (the autocast
pass: matmul operands in bf16, f32 accumulation); int8 is `rlx quantize --scheme int8` (i8
weights, activations per token, int8_matmul), for MiniLM also with `--attention-scores int8`
(attention's q and k quantized too); int4 is `rlx quantize --scheme int4-g32` (q4_0)
and `int4-g128` (weight-only 4-bit groups, qmatmul). The peer of every ratio is rlx's own f32
run in the same invocation (ratio > 1: faster than f32).

MiniLM (all-MiniLM-L6-v2 shape, `rlx make-model minilm`): `rlx bench` p50 latency of a batch of
8 x 128 tokens and of 1 x 128, and the worst cosine similarity between the variant's and f32's
sentence embeddings (`rlx embed`) over the 64 sentences of tests/quant/calib_sentences.txt.

Qwen3 (`rlx make-model qwen3-tiny`: hidden 512, 8 layers, 8 query / 4 KV heads of 64,
intermediate 1408, vocab 32000): `rlx generate` prefill tokens/s for a prompt of --prompt token
ids and greedy decode tokens/s at batch 1 (bench/qwen3_bench.py's run_rlx: best of 3 generations
in one process), and top-1 agreement with f32: `rlx generate --prompt-top1` gives the argmax of
the logits after every prompt token (teacher forced: every position sees the same prefix), and
the figure is the fraction of the prompt's positions where the variant's argmax equals f32's.
Random weights make the logits nearly flat, so near-ties flip easily: agreement is a lower figure
than a trained model would give, and it compares the variants with each other.

Each round runs every variant back to back (the machine is shared); the tables keep each
variant's best round: with 2 threads on 2 shared cores a run is either at full speed or about
twice as slow (one thread waiting for a core another process holds), so several short rounds
find the quiet windows better than one long one. Below the MiniLM table, each variant's time
over f32's time in the same round, median and range over the rounds (the figure #31's targets
are stated in: `--batches 8,32 --rounds 6 --no-qwen3`). --smoke: tiny sizes (one round, few runs, batch 1 x 16, 4 sentences, a
1-layer Qwen3, 8 prompt tokens) so that a test checks that the script still runs.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from qwen3_bench import prompt_ids, run_rlx  # noqa: E402

try:
    import numpy as np
except ImportError:
    print("SKIP: bench/precision_bench.py needs numpy for /usr/bin/python3 (apt-get install python3-numpy)")
    sys.exit(77)  # ctest's skip code for bench.precision_smoke


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rlx", default=os.path.join(ROOT, "build", "bin", "rlx"), help="the rlx program")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=5, help="rlx bench runs per MiniLM batch and round")
    ap.add_argument("--prompt", type=int, default=64, help="Qwen3 prompt tokens (also the agreement positions)")
    ap.add_argument("--decode", type=int, default=32, help="Qwen3 greedy tokens decoded")
    ap.add_argument("--batches", default="8,1", help="MiniLM batch sizes (of 128 tokens)")
    ap.add_argument("--no-qwen3", action="store_true", help="MiniLM only")
    ap.add_argument("--dir", help="work folder (default: a temporary one, removed at the end)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, to check that the script runs")
    return ap.parse_args()


def rlx_run(a, *args):
    env = dict(os.environ, RLX_NUM_THREADS=str(a.threads))
    r = subprocess.run([a.rlx] + [str(x) for x in args], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("rlx %s failed (%d):\n%s%s" % (" ".join(map(str, args)), r.returncode, r.stdout, r.stderr))
    return r.stdout


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def ratio(x, ref, higher_is_better):
    if not x or not ref:
        return "-"
    return "%.2fx" % ((x / ref) if higher_is_better else (ref / x))


def minilm(a, work):
    m = os.path.join(work, "minilm")
    rlx_run(a, "make-model", "minilm", "--out", m)
    variants = [("f32", m, []), ("bf16", m, ["--precision", "bf16"])]
    for scheme in ("int8", "int4-g32", "int4-g128"):
        rlx_run(a, "quantize", m, m + "-" + scheme, "--scheme", scheme)
        variants.append((scheme, m + "-" + scheme, []))
    # int8 with attention's q k^T in int8 too (docs/quantization.md, "int8 attention scores")
    rlx_run(a, "quantize", m, m + "-int8-scores", "--scheme", "int8", "--attention-scores", "int8")
    variants.insert(3, ("int8 + int8 scores", m + "-int8-scores", []))
    with open(os.path.join(ROOT, "tests", "quant", "calib_sentences.txt")) as f:
        sentences = [s.strip() for s in f if s.strip()]
    if a.smoke:
        sentences = sentences[:4]
    seq = 16 if a.smoke else 128
    batches = [1] if a.smoke else [int(b) for b in a.batches.split(",")]
    runs = 2 if a.smoke else a.runs
    emb, best, per_round = {}, {}, {}
    for name, path, extra in variants:
        out = os.path.join(work, "emb-%s.npy" % name)
        rlx_run(a, "embed", path, *sentences, "--quiet", "--out", out, *extra)
        emb[name] = np.load(out).astype(np.float64)
    for rnd in range(a.rounds):
        for name, path, extra in variants:
            j = json.loads(rlx_run(a, "bench", path, "--batch", ",".join(map(str, batches)), "--seq", seq, "--runs", runs,
                                   "--warmup", 1 if a.smoke else 2, "--format", "json", *extra))
            for rec in j:
                key = (name, rec["batch"])
                best[key] = min(best.get(key, 1e30), rec["p50_ms"])
                per_round.setdefault(key, []).append(rec["p50_ms"])
        print("MiniLM round %d done (load %s)" % (rnd + 1, load_average()), file=sys.stderr)
    ref = emb["f32"]
    head = "| MiniLM | " + " | ".join("batch %d x %d p50 ms | vs f32" % (b, seq) for b in batches)
    print(head + " | worst cosine vs f32 (%d sentences) |" % len(sentences))
    print("|---" * (1 + 2 * len(batches) + 1) + "|")
    for name, _, _ in variants:
        e = emb[name]
        cos = np.sum(e * ref, axis=1) / (np.linalg.norm(e, axis=1) * np.linalg.norm(ref, axis=1))
        cells = []
        for b in batches:
            cells += ["%.1f" % best[(name, b)], ratio(best[(name, b)], best[("f32", b)], False)]
        print("| %s | %s | %.6f |" % (name, " | ".join(cells), cos.min()))
    print()
    for b in batches:
        f32 = per_round[("f32", b)]
        cells = []
        for name, _, _ in variants[1:]:
            r = sorted(t / f for t, f in zip(per_round[(name, b)], f32))
            cells.append("%s %.3f (%.3f-%.3f)" % (name, r[len(r) // 2] if len(r) % 2 else (r[len(r) // 2 - 1] + r[len(r) // 2]) / 2,
                                                  r[0], r[-1]))
        print("batch %d x %d, time / f32's time in the same round, median (range) over %d rounds: %s"
              % (b, seq, len(f32), ", ".join(cells)))


def qwen3(a, work):
    q = os.path.join(work, "q3")
    size = ["--layers", "1"] if a.smoke else []
    rlx_run(a, "make-model", "qwen3-tiny", "--out", q, *size)
    rlx_run(a, "quantize", q, q + "-int8", "--scheme", "int8")
    variants = [("f32", q, []), ("bf16", q, ["--precision", "bf16"]), ("int8", q + "-int8", [])]
    for scheme in ("int4-g32", "int4-g128"):
        rlx_run(a, "quantize", q, "%s-%s.gguf" % (q, scheme), "--scheme", scheme)
        variants.append((scheme, "%s-%s.gguf" % (q, scheme), []))
    prompt = 8 if a.smoke else a.prompt
    decode = 4 if a.smoke else a.decode
    ids = ",".join(map(str, prompt_ids(prompt)))  # the ids run_rlx feeds too
    top1, best = {}, {}
    for name, path, extra in variants:
        out = os.path.join(work, "top1-%s.json" % name)
        rlx_run(a, "generate", path, "--tokens", ids, "-n", 1, "--quiet", "--prompt-top1", "--json", out, *extra)
        with open(out) as f:
            top1[name] = json.load(f)["prompt_top1"][0]
    for rnd in range(a.rounds):
        for name, path, extra in variants:
            r = run_rlx(a.rlx, path, a.threads, prompt, decode, extra)
            old = best.get(name, {"prefill": 0, "decode": 0})
            best[name] = {k: max(old[k], r[k]) for k in ("prefill", "decode")}
        print("Qwen3 round %d done (load %s)" % (rnd + 1, load_average()), file=sys.stderr)
    print("| Qwen3 | prefill %d tok/s | vs f32 | decode tok/s | vs f32 | top-1 agreement with f32 (%d positions) |"
          % (prompt, prompt))
    print("|---|---|---|---|---|---|")
    for name, _, _ in variants:
        agree = sum(x == y for x, y in zip(top1[name], top1["f32"])) / len(top1["f32"])
        r, f = best[name], best["f32"]
        print("| %s | %.0f | %s | %.1f | %s | %.1f %% |" % (name, r["prefill"], ratio(r["prefill"], f["prefill"], True),
                                                        r["decode"], ratio(r["decode"], f["decode"], True), 100 * agree))


def main():
    a = parse()
    if a.smoke:
        a.rounds = 1
    if not os.access(a.rlx, os.X_OK):
        sys.exit("no rlx program at %s (give --rlx PATH)" % a.rlx)
    t0 = time.time()
    print("rlx precision benchmark: %s, RLX_NUM_THREADS=%d, %d round(s); load average %s" %
          (a.rlx, a.threads, a.rounds, load_average()))
    with tempfile.TemporaryDirectory(prefix="rlx-precision-") as tmp:
        work = a.dir or tmp
        os.makedirs(work, exist_ok=True)
        minilm(a, work)
        if not a.no_qwen3:
            print()
            qwen3(a, work)
    print("\nratios: the f32 run of rlx in this invocation; load average at the end %s; %.0f s in all"
          % (load_average(), time.time() - t0))


if __name__ == "__main__":
    main()
