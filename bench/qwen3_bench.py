"""Decoder generation speed: rlx against llama.cpp (node-llama-cpp's prebuilt CPU binaries) and
PyTorch, in one invocation, on the same random-weight model (rlx make-model FAMILY-tiny: hidden
512, 8 layers, 8 query / 4 KV heads of 64, intermediate 1408, vocab 32000; Qwen3 by default).

    scripts/install-npm.sh     # node-llama-cpp into build/npm/llama-cpp
    /usr/bin/python3 bench/qwen3_bench.py [--family qwen3] [--rlx build/bin/rlx] [--dir /tmp/rlx-FAMILY-bench]
        [--rounds 3] [--prompt 128] [--decode 64] [--types f16,q8_0,q4_0] [--threads 1,2] [--json OUT] [--no-torch]
        [--shape "--hidden H --heads Q --kv-heads K --intermediate I --layers L --vocab V"]

For each weight type (GGUF files written by rlx, read by both rlx and llama.cpp) and thread
count, every round runs rlx and llama.cpp back to back (each keeps the best of 3 generations in
its process); PyTorch runs the f32 safetensors weights (its own format) once per round with 2
threads. The table keeps each engine's best round. Prefill: tokens/s for a prompt of --prompt
token ids; decode: greedy tokens/s at batch 1, with the weight bytes one decode step reads
turned into GB/s. Machines here are shared: compare only within one run.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def opt(name, default):
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


def prompt_ids(n):
    # the same pseudo-random ids as bench/qwen3/llama_peer.mjs
    x, out = 12345, []
    for _ in range(n):
        x = (x * 1103515245 + 12345) % 2147483648
        out.append(x % 30000)
    return out


def run_rlx(rlx, model, threads, prompt, decode, extra=()):
    # extra: more rlx generate arguments (bench/precision_bench.py passes --precision)
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        env = dict(os.environ, RLX_NUM_THREADS=str(threads))
        cmd = [rlx, "generate", model, "--tokens", ",".join(map(str, prompt_ids(prompt))), "-n", str(decode + 1),
               "--ignore-eos", "--quiet", "--runs", "3", "--json", f.name] + list(extra)
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        j = json.load(open(f.name))
    return {"prefill": j["prefill_tokens_per_s"], "decode": j["decode_tokens_per_s"],
            "bytes": j["weight_bytes_per_step"]}


LLAMA_NPM = os.path.join(ROOT, "build", "npm", "llama-cpp")


def run_llama(model, threads, prompt, decode):
    cmd = ["node", os.path.join(HERE, "qwen3", "llama_peer.mjs"), model, str(threads), str(prompt), str(decode), "3"]
    env = dict(os.environ)
    env.pop("CI", None)  # node-llama-cpp refuses an empty CI variable
    if os.path.isdir(os.path.join(LLAMA_NPM, "node_modules", "node-llama-cpp")):
        env["RLX_NODE_LLAMA_CPP"] = LLAMA_NPM
    r = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600, env=env)
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return {"prefill": j["prefill_tokens_per_s"], "decode": j["decode_tokens_per_s"]}


def run_torch(model_dir, prompt, decode):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", MALLOC_MMAP_THRESHOLD_="33554432",
               MALLOC_TRIM_THRESHOLD_="1073741824")
    cmd = ["/usr/bin/python3", os.path.join(ROOT, "scripts", "peers", "decoder_torch.py"), "bench", model_dir,
           "--prompt", str(prompt), "--decode", str(decode), "--threads", "2", "--runs", "3"]
    r = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, timeout=600)
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return {"prefill": j["prefill_tokens_per_s"], "decode": j["decode_tokens_per_s"]}


def main():
    rlx = opt("--rlx", os.path.join(ROOT, "build", "bin", "rlx"))
    family = opt("--family", "qwen3")
    d = opt("--dir", "/tmp/rlx-%s-bench" % family)
    use_torch = "--no-torch" not in sys.argv
    rounds = int(opt("--rounds", "3"))
    prompt = int(opt("--prompt", "128"))
    decode = int(opt("--decode", "64"))
    types = opt("--types", "f16,q8_0,q4_0").split(",")
    threads = [int(t) for t in opt("--threads", "1,2").split(",")]
    # make-model's size flags, e.g. "--hidden 2048 --heads 32 --kv-heads 8 --intermediate 8192 --layers 16
    # --vocab 128256" for Llama 3.2 1B's shapes (use a --dir of its own)
    shape = opt("--shape", "").split()
    have_llama = any(os.path.isdir(os.path.join(p, "node_modules", "node-llama-cpp")) for p in (os.path.join(HERE, "qwen3"), LLAMA_NPM))
    for t in types:
        if not os.path.exists(os.path.join(d, "model-%s.gguf" % t)):
            subprocess.run([rlx, "make-model", family + "-tiny", "--out", d, "--seed", "1", "--gguf-type", t] + shape,
                           check=True, stdout=subprocess.DEVNULL)
    best = {}

    def keep(key, r):
        b = best.setdefault(key, dict(r))
        for k in ("prefill", "decode"):
            b[k] = max(b[k], r[k])

    for rnd in range(rounds):
        for t in types:
            model = os.path.join(d, "model-%s.gguf" % t)
            for th in threads:
                keep(("rlx", t, th), run_rlx(rlx, model, th, prompt, decode))
                if have_llama:
                    keep(("llama.cpp", t, th), run_llama(model, th, prompt, decode))
        if use_torch:
            keep(("pytorch", "f32", 2), run_torch(d, prompt, decode))
            keep(("rlx", "f32", 2), run_rlx(rlx, d, 2, prompt, decode))
        print("round %d done" % (rnd + 1), file=sys.stderr)
    rows = []
    print("| weights | engine | threads | prefill %d tok/s | decode tok/s | decode weight GB/s | rlx decode / llama.cpp "
          "| rlx prefill / PyTorch |" % prompt)
    print("|---|---|---|---|---|---|---|---|")
    torch_prefill = best[("pytorch", "f32", 2)]["prefill"] if use_torch else 0
    for (eng, t, th), r in sorted(best.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        nbytes = best.get(("rlx", t, th), best.get(("rlx", t, 2), {})).get("bytes")
        if eng == "pytorch":
            nbytes = best[("rlx", "f32", 2)]["bytes"]
        gbs = r["decode"] * nbytes / 1e9 if nbytes else 0
        ratio_llama = ratio_torch = ""
        if eng == "rlx" and ("llama.cpp", t, th) in best:
            ratio_llama = "%.2fx" % (r["decode"] / best[("llama.cpp", t, th)]["decode"])
        if eng == "rlx" and torch_prefill:
            ratio_torch = "%.2fx" % (r["prefill"] / torch_prefill)
        print("| %s | %s | %d | %.0f | %.1f | %.2f | %s | %s |" % (t, eng, th, r["prefill"], r["decode"], gbs,
                                                                   ratio_llama, ratio_torch))
        rows.append({"weights": t, "engine": eng, "threads": th, "prefill_tokens_per_s": r["prefill"],
                     "decode_tokens_per_s": r["decode"], "decode_weight_gb_per_s": gbs})
    if not have_llama:
        print("\nllama.cpp: not installed (scripts/install-npm.sh)")
    out = opt("--json", None)
    if out:
        json.dump({"family": family, "prompt": prompt, "decode": decode, "rounds": rounds, "rows": rows}, open(out, "w"),
                  indent=1)


if __name__ == "__main__":
    main()
