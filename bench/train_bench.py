#!/usr/bin/python3
"""MNIST training speed, rlx against its peers in one run: `rlx train mnist`, a NumPy +
OpenBLAS implementation with hand-written forward and backward (scripts/peers/mnist_numpy.py)
and PyTorch eager (scripts/peers/mnist_torch.py), all on the same synthetic data written as
IDX files, with the same thread count, architecture, batch size, loss and plain SGD.

  /usr/bin/python3 bench/train_bench.py [--rlx build/bin/rlx] [--threads 2] [--rounds 3]
        [--epochs 2] [--configs mlp:128,mlp:1024,tinyconv:128] [--json FILE] [--data DIR]
        [--frameworks rlx,numpy,torch,rlx-bf16,rlx-f16]

rlx-bf16 / rlx-f16 are `rlx train --precision bf16|f16` (mixed precision, docs/precision.md):
their rows add the median over rounds of the per-round images/s ratio to rlx's f32 run.

What it measures: images/s as each program reports it (training images over the training
wall time of an epoch: batch gathering, forward, backward and update; evaluation and compile
time excluded). The first epoch is a warm-up (rlx compiles before its clock starts, but
caches and the peers' allocators warm up in it); the figure of a run is the mean over epochs
2..E. In every round the three programs run back to back, in an order that rotates from round
to round; a figure is the median over rounds, and the ratio rlx / best peer is the median over
rounds of the per-round ratio, which cancels slow drifts of a shared machine's load. The load
average is printed before and after.

Fair settings for the peers (TOOLCHAINS.md): OMP/OpenBLAS threads = --threads,
torch.set_num_threads, OMP_WAIT_POLICY=PASSIVE, glibc malloc kept from returning large blocks
(MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_). rlx gets RLX_NUM_THREADS = --threads.
tinyconv trains on the first --conv-train-size images (NumPy's im2col convolution is slow).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS = os.path.join(ROOT, "scripts", "peers")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run_json(cmd, env, json_path):
    if os.path.exists(json_path):
        os.remove(json_path)
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}")
    with open(json_path) as f:
        return json.load(f)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rlx", default=os.path.join(ROOT, "build", "bin", "rlx"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--configs", default="mlp:128,mlp:1024,tinyconv:128")
    p.add_argument("--conv-train-size", type=int, default=12800)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--data", help="MNIST-format folder to use instead of the synthetic set")
    p.add_argument("--frameworks", default="rlx,numpy,torch")
    p.add_argument("--json", help="write every run's records and the summary here")
    a = p.parse_args()
    if not os.access(a.rlx, os.X_OK):
        raise SystemExit(f"{a.rlx} is not an executable: build it (ninja -C build rlx) or pass --rlx")
    frameworks = a.frameworks.split(",")
    tmp = tempfile.mkdtemp(prefix="rlx_train_bench_")
    data = a.data
    if not data:
        data = os.path.join(tmp, "synthetic")
        subprocess.run([a.rlx, "train", "mnist", "--synthetic", "--export-data", data, "--epochs", "0", "--quiet"],
                       check=True)
    env = dict(os.environ)
    env.update({"RLX_NUM_THREADS": str(a.threads), "OMP_NUM_THREADS": str(a.threads),
                "OPENBLAS_NUM_THREADS": str(a.threads), "MKL_NUM_THREADS": str(a.threads),
                "OMP_WAIT_POLICY": "PASSIVE", "MALLOC_MMAP_THRESHOLD_": "33554432",
                "MALLOC_TRIM_THRESHOLD_": "1073741824"})
    load_before = loadavg()
    print(f"train_bench: {a.threads} threads, {a.rounds} rounds x {a.epochs} epochs, data {data}, "
          f"load average {load_before}", flush=True)
    results, summary = [], []
    out = os.path.join(tmp, "run.json")
    for cfg in a.configs.split(","):
        arch, batch = cfg.split(":")
        common = ["--arch", arch, "--epochs", str(a.epochs), "--batch", batch, "--lr", str(a.lr), "--data", data,
                  "--json", out, "--seed", "1"]
        if arch == "tinyconv":
            common += ["--train-size", str(a.conv_train_size)]
        cmds = {
            "rlx": [a.rlx, "train", "mnist", "--quiet"] + common,
            "numpy": ["/usr/bin/python3", os.path.join(PEERS, "mnist_numpy.py"), "--quiet", "--threads",
                      str(a.threads)] + common,
            "torch": ["/usr/bin/python3", os.path.join(PEERS, "mnist_torch.py"), "--quiet", "--threads",
                      str(a.threads)] + common,
        }
        for f in frameworks:
            if f.startswith("rlx-"):
                cmds[f] = cmds["rlx"] + ["--precision", f[len("rlx-"):]]
        unknown = [f for f in frameworks if f not in cmds]
        if unknown:
            raise SystemExit(f"unknown --frameworks entries {unknown} (expected rlx, numpy, torch, rlx-bf16, rlx-f16)")
        per = {f: [] for f in frameworks}
        narrow = {f: [] for f in frameworks if f.startswith("rlx-")}
        acc = {f: None for f in frameworks}
        ratios = []
        for r in range(a.rounds):
            order = frameworks[r % len(frameworks):] + frameworks[:r % len(frameworks)]
            got = {}
            for f in order:
                recs = run_json(cmds[f], env, out)
                timed = recs[1:] if len(recs) > 1 else recs
                got[f] = statistics.mean(x["images_per_s"] for x in timed)
                acc[f] = recs[-1]["test_accuracy"]
                per[f].append(got[f])
                results.append({"config": cfg, "round": r, "framework": f, "records": recs})
            peers = [got[f] for f in frameworks if not f.startswith("rlx")]
            if "rlx" in got and peers:
                ratios.append(got["rlx"] / max(peers))
            for f in narrow:
                if "rlx" in got:
                    narrow[f].append(got[f] / got["rlx"])
            print(f"  {cfg} round {r + 1}: " + ", ".join(f"{f} {got[f]:,.0f}" for f in frameworks)
                  + (f" images/s, rlx / best peer {ratios[-1]:.2f}" if ratios else "")
                  + "".join(f", {f} / rlx {v[-1]:.2f}" for f, v in narrow.items() if v), flush=True)
        med = {f: statistics.median(v) for f, v in per.items()}
        best_peer = max((f for f in frameworks if not f.startswith("rlx")), key=lambda f: med[f], default=None)
        summary.append({"config": cfg, "images_per_s": med, "test_accuracy": acc, "best_peer": best_peer,
                        "ratio_to_best_peer": statistics.median(ratios) if ratios else None,
                        "ratios": ratios,
                        "ratio_to_rlx_f32": {f: {"median": statistics.median(v), "rounds": v}
                                             for f, v in narrow.items() if v}})
    load_after = loadavg()
    print(f"\nload average before {load_before}, after {load_after}\n")
    cols = frameworks
    print("| model | batch | " + " | ".join(f"{f} images/s" for f in cols) + " | rlx / best peer | test accuracy ("
          + ", ".join(cols) + ") |")
    print("|---|---:|" + "---:|" * len(cols) + "---:|---|")
    for s in summary:
        arch, batch = s["config"].split(":")
        ratio = s["ratio_to_best_peer"]
        ratio_txt = f"{ratio:.2f} (vs {s['best_peer']}; rounds " + ", ".join(f"{x:.2f}" for x in s["ratios"]) + ")" \
            if ratio is not None else "-"
        print(f"| {arch} | {batch} | " + " | ".join(f"{s['images_per_s'][f]:,.0f}" for f in cols) + f" | {ratio_txt} | "
              + ", ".join(f"{100 * s['test_accuracy'][f]:.1f}%" for f in cols) + " |")
    for s in summary:
        for f, r in s["ratio_to_rlx_f32"].items():
            print(f"{s['config']}: {f} / rlx f32 images/s: median {r['median']:.2f} (rounds "
                  + ", ".join(f"{x:.2f}" for x in r["rounds"]) + ")")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"threads": a.threads, "rounds": a.rounds, "epochs": a.epochs, "load_before": load_before,
                       "load_after": load_after, "summary": summary, "runs": results}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
