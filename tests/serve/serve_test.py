#!/usr/bin/python3
"""`rlx serve` end to end (docs/serve.md): the official `openai` npm client against a served
random-weight Qwen3-architecture model and a MiniLM-shaped embedding model, checked against
rlx's own verbs, plus the fault cases and shutdown.

    /usr/bin/python3 tests/serve/serve_test.py --rlx build/bin/rlx --work /tmp/serve-work --npm build/npm

What it checks:
  - /health is 200 once the models are compiled; /v1/models lists both;
  - greedy chat (non-streamed and streamed) equals `rlx generate --chat`'s text; the streamed
    chunks concatenate to the same text and end with the same finish_reason and usage;
  - a greedy completion equals `rlx generate --prompt`'s text; seeded sampling repeats;
  - logprobs are log-probabilities (<= 0, the chosen one the largest at temperature 0);
  - embeddings (base64, as the client asks by default, and float) equal `rlx embed`'s to 1e-5;
  - 32 concurrent streams (continuous batching over 8 slots) each equal their solo result, and
    /metrics shows decode steps of more than one sequence;
  - the client's error types: 401 wrong key, 404 unknown model, 400 wrong types / n > 1 /
    too-long prompt (code context_length_exceeded) / a model of the wrong kind; raw HTTP:
    malformed JSON 400, unknown route 404, a body over --max-body 413, a full queue 429 with
    Retry-After (8 streams hold the slots, 48 requests wait: exactly 12 of 60 are refused);
    every error body is OpenAI's {"error": {...}};
  - a client that disconnects mid-stream frees its slot (rlx_active_sequences back to 0 long
    before its max_tokens would have ended it);
  - SIGTERM: in-flight requests finish, the process exits 0, the port stops accepting;
  - --request-timeout stops a long generation with 504;
  - a paged KV cache too small for all sequences at once (--kv-cache-tokens): sequences are
    preempted and resumed, each output still equals its solo result, the blocks are all free
    afterwards, and a request larger than the whole cache is 400;
  - under mpirun (2 ranks, --tp 2 and --pp 2): concurrent greedy chats equal one process's,
    and SIGTERM to rank 0 ends the job with status 0.
Exit 77 (skip) when the npm client is missing outside CI; in CI (CI set) that is a failure.
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

KEY = "sk-rlx-test"
SYSTEM = ("You are a careful assistant for people who build tensor compilers. Answer in short sentences, name the "
          "data structures you mean, and say when you are not sure. Prefer examples in C++ and describe memory "
          "layouts in bytes.")
QUESTIONS = ["What is a KV cache?", "Why page it?", "What does prefix caching save?"]
FAILURES = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r


MPIRUN = ["mpirun", "--oversubscribe", "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]


class Server:
    def __init__(self, rlx, models, *flags, ranks=0):
        cmd = [rlx, "serve", *models, "--port", "0", *flags]
        env = dict(os.environ)
        if ranks:  # under mpirun: rank 0 serves (and prints its pid), the others follow
            cmd = MPIRUN + ["-np", str(ranks)] + cmd
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", RLX_NUM_THREADS="1")
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        line = self.p.stdout.readline()
        m = re.search(r"http://([\d.]+):(\d+) \(pid (\d+)\)", line)
        if not m:
            raise RuntimeError(f"rlx serve did not start: {line!r} {self.p.stderr.read()[-2000:]}")
        self.host, self.port, self.pid = m.group(1), int(m.group(2)), int(m.group(3))
        self.base = f"http://{self.host}:{self.port}/v1"
        self.stderr_lines = []
        threading.Thread(target=lambda: self.stderr_lines.extend(self.p.stderr), daemon=True).start()

    def request(self, method, path, body=None, headers=None, key=KEY, timeout=120):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        if key:
            h["Authorization"] = "Bearer " + key
        h.update(headers or {})
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        text = r.read().decode("utf-8", "replace")
        c.close()
        return r.status, dict(r.getheaders()), text

    def wait_ready(self, seconds=300):
        end = time.time() + seconds
        while time.time() < end:
            try:
                s, _, _ = self.request("GET", "/health", key=None, timeout=5)
                if s == 200:
                    return True
            except OSError:
                pass
            if self.p.poll() is not None:
                return False
            time.sleep(0.2)
        return False

    def metric(self, name):
        _, _, text = self.request("GET", "/metrics", key=None)
        total = 0.0
        found = False
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        return total if found else None

    def stop(self):
        if self.p.poll() is None:
            os.kill(self.pid, signal.SIGTERM)  # rank 0 under mpirun: it stops the followers
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


def open_stream(s):
    """A raw streaming chat of up to 2000 tokens, read until its first token arrived (so that it
    holds a slot); returns the socket and the bytes read."""
    sk = socket.create_connection((s.host, s.port))
    req = json.dumps({"model": "qwen", "messages": [{"role": "user", "content": "go"}], "stream": True,
                      "max_tokens": 2000, "temperature": 0})
    sk.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(req)}\r\n\r\n{req}").encode())
    got = b""
    while got.count(b"data: ") < 2:  # the opening chunk, then a token: it is running
        more = sk.recv(4096)
        if not more:
            break
        got += more
    return sk, got


def is_error_body(text):
    try:
        e = json.loads(text)["error"]
        return isinstance(e["message"], str) and "type" in e and "code" in e and "param" in e
    except (ValueError, KeyError, TypeError):
        return False


def node(args, npm, base, kase, payload):
    r = subprocess.run(["node", os.path.join(os.path.dirname(__file__), "openai_client.mjs"), npm, base, KEY, kase,
                        json.dumps(payload)], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"openai client ({kase}) failed: {r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def generate(rlx, model, work, name, *flags):
    out = os.path.join(work, name + ".json")
    run([rlx, "generate", model, *flags, "--json", out, "--quiet"])
    with open(out) as f:
        return json.load(f)


def expect_text(server_text, finish, usage, ref, what):
    """The server's completion against rlx generate's (same greedy tokens): equal text, or when
    generate's tokens end in a stop id, its text minus that token's."""
    toks, stops = ref["tokens"][0], set(ref["stop_token_ids"])
    if toks and toks[-1] in stops:
        check(finish == "stop" and ref["text"][0].startswith(server_text) and usage["completion_tokens"] == len(toks),
              f"{what}: stops where rlx generate stops ({len(toks)} tokens)")
    else:
        check(server_text == ref["text"][0], f"{what}: text equals rlx generate's ({len(toks)} tokens)")
        check(finish == "length" and usage["completion_tokens"] == len(toks), f"{what}: finish_reason length, usage counts")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rlx", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--npm", required=True)
    a = ap.parse_args()
    npm = os.path.abspath(os.environ.get("RLX_NPM_DIR", a.npm))
    if not os.path.exists(os.path.join(npm, "node_modules", "openai", "package.json")):
        why = f"the npm package openai is not installed under {npm} (scripts/install-npm.sh installs it)"
        if os.environ.get("CI"):
            print("FAIL  " + why)
            return 1
        print("SKIP  " + why)
        return 77
    os.makedirs(a.work, exist_ok=True)
    dec = os.path.join(a.work, "llama")
    emb = os.path.join(a.work, "minilm")
    run([a.rlx, "make-model", "llama-tiny", "--out", dec, "--seed", "1", "--layers", "2", "--vocab", "2048"])
    if not os.path.exists(os.path.join(emb, "config.json")):
        run([a.rlx, "make-model", "minilm", "--out", emb])
    chat, prompt, n = "Tell me about compilers.", "Once upon a time", 24
    texts = ["A compiler for tensors.", "Short.", "Sentence embeddings on the CPU, batched by length buckets."]
    ref_chat = generate(a.rlx, dec, a.work, "chat", "--chat", chat, "-n", str(n))
    ref_prompt = generate(a.rlx, dec, a.work, "prompt", "--prompt", prompt, "-n", str(n))
    ref_prefix = [generate(a.rlx, dec, a.work, f"prefix{i}", "--system", SYSTEM, "--chat", q, "-n", str(n))
                  for i, q in enumerate(QUESTIONS)]
    emb_out = os.path.join(a.work, "emb.json")
    run([a.rlx, "embed", emb, *texts, "--out", emb_out, "--quiet"])
    with open(emb_out) as f:
        ref_emb = json.load(f)
    ref_emb = ref_emb["embeddings"] if isinstance(ref_emb, dict) else ref_emb

    s = Server(a.rlx, [f"qwen={dec}", f"mini={emb}"], "--api-key", KEY, "--parallel-slots", "8", "--max-context", "2048",
               "--max-queue", "48", "--max-body", "65536", "--prefill-chunk", "32")
    try:
        check(s.wait_ready(), "/health is 200 once the models are compiled")
        got = node(a, npm, s.base, "basic", {"model": "qwen", "embed_model": "mini", "chat": chat, "prompt": prompt, "n": n,
                                             "texts": texts, "long_prompt": "word " * 3000})
        check(got["models"] == ["mini", "qwen"], f"/v1/models lists both ({got['models']})")
        c = got["chat"]
        check(c["object"] == "chat.completion" and c["role"] == "assistant", "chat.completion object, assistant message")
        expect_text(c["text"], c["finish"], c["usage"], ref_chat, "greedy chat")
        st = got["stream"]
        core = lambda u: {k: u[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
        check(st["text"] == c["text"] and st["finish"] == c["finish"] and core(st["usage"]) == core(c["usage"]) and st["role"] == "assistant",
              f"streamed chat ({st['chunks']} chunks) concatenates to the same text, finish_reason and usage")
        check(c["usage"]["prompt_tokens"] == len(ref_chat["prompt_tokens"][0]), "chat usage counts the template's prompt tokens")
        cp = got["completion"]
        expect_text(cp["text"], cp["finish"], cp["usage"], ref_prompt, "greedy completion")
        lp = got["logprobs"]
        check(len(lp) == 4 and all(t["logprob"] <= 1e-6 and len(t["top"]) == 3 and abs(t["top"][0] - t["logprob"]) < 1e-4 for t in lp),
              "logprobs: 4 tokens, each the most likely of its 3 alternatives, log-probabilities <= 0")
        check(got["seeded"][0] == got["seeded"][1] and len(got["seeded"][0]) > 0, "seeded sampling repeats")
        e = got["embeddings"]
        diff = max(abs(x - y) for ours, ref in zip(e["float"], ref_emb) for x, y in zip(ours, ref))
        diff64 = max(abs(x - y) for ours, ref in zip(e["base64"], e["float"]) for x, y in zip(ours, ref))
        check(len(e["float"]) == len(texts) and diff <= 1e-5, f"embeddings equal rlx embed's (max difference {diff:.2e})")
        check(diff64 == 0, "base64 embeddings decode to the float ones")
        check(max(abs(x - y) for x, y in zip(got["embedding_one"], ref_emb[0])) <= 1e-5, "a single-string input")
        errs = got["errors"]
        check(errs["auth"].get("status") == 401 and errs["auth"]["cls"] == "AuthenticationError", f"wrong key: 401 {errs['auth'].get('cls')}")
        check(errs["unknown_model"].get("status") == 404 and errs["unknown_model"]["cls"] == "NotFoundError", "unknown model: 404 NotFoundError")
        check(errs["bad_type"].get("status") == 400 and errs["bad_type"]["cls"] == "BadRequestError", "temperature 'hot': 400 BadRequestError")
        check(errs["too_long"].get("status") == 400 and errs["too_long"]["code"] == "context_length_exceeded",
              f"a prompt longer than the context: 400 context_length_exceeded ({errs['too_long'].get('code')})")
        check(errs["n2"].get("status") == 400, "n = 2: 400")
        check(errs["wrong_kind"].get("status") == 400, "embeddings from a generation model: 400")
        check(errs["penalty"].get("status") == 400 and errs["penalty"]["code"] == "unsupported_parameter",
              "presence_penalty 0.5: 400 unsupported_parameter (not ignored)")
        check(errs["neutral"]["ok"], "penalties of 0 and a user field are accepted")

        # prefix caching: chats that share a long system message; the second and third reuse its
        # blocks (usage.prompt_tokens_details.cached_tokens) and still equal rlx generate's text
        cached0 = s.metric("rlx_prompt_cached_tokens_total") or 0
        px = node(a, npm, s.base, "prefix", {"model": "qwen", "system": SYSTEM, "questions": QUESTIONS, "n": n})["results"]
        cached = [r["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0) for r in px]
        same = sum(1 for r, ref in zip(px, ref_prefix)
                   if r["text"] == ref["text"][0] or (r["finish"] == "stop" and ref["text"][0].startswith(r["text"])))
        check(cached[0] == 0 and cached[1] >= 64 and cached[2] >= 64 and same == 3,
              f"prefix caching: cached prompt tokens {cached} of {[r['usage']['prompt_tokens'] for r in px]}; "
              f"{same} of 3 texts equal rlx generate's")
        check((s.metric("rlx_prompt_cached_tokens_total") or 0) - cached0 == sum(cached), "rlx_prompt_cached_tokens_total counts them")

        # raw HTTP faults
        st_, _, body = s.request("POST", "/v1/chat/completions", "{not json")
        check(st_ == 400 and is_error_body(body), "malformed JSON: 400 with an OpenAI error body")
        st_, _, body = s.request("POST", "/v1/chat/completions", {"model": "qwen", "messages": "hi"})
        check(st_ == 400 and json.loads(body)["error"]["param"] == "messages", "messages of the wrong type: 400 naming the field")
        st_, _, body = s.request("GET", "/v1/nothing")
        check(st_ == 404 and is_error_body(body), "unknown route: 404 with an error body")
        st_, _, body = s.request("POST", "/v1/embeddings", json.dumps({"model": "mini", "input": "x" * 100000}))
        check(st_ == 413 and is_error_body(body), f"a body over --max-body: 413 ({st_})")
        st_, _, body = s.request("GET", "/v1/models", key="wrong")
        check(st_ == 401 and is_error_body(body), "wrong key on raw HTTP: 401")

        # continuous batching: 32 concurrent streams over 8 slots, each equal to its solo result
        prompts = [f"Question {i}: what is {i} plus {i * 3}?" for i in range(32)]
        solo = node(a, npm, s.base, "solo", {"model": "qwen", "prompts": prompts, "n": 12})["results"]
        steps0, rows0 = s.metric("rlx_decode_batch_size_count"), s.metric("rlx_decode_batch_size_sum")
        load = node(a, npm, s.base, "load", {"model": "qwen", "prompts": prompts, "n": 12})
        same = sum(1 for r, o in zip(load["results"], solo) if r["text"] == o["text"] and r["finish"] == o["finish"])
        check(same == 32, f"32 concurrent streams equal their solo results ({same} of 32; {load['seconds']:.1f} s)")
        steps, rows = s.metric("rlx_decode_batch_size_count") - steps0, s.metric("rlx_decode_batch_size_sum") - rows0
        check(steps > 0 and rows / steps > 2, f"decode steps batched {rows / max(steps, 1):.1f} sequences on average")
        check((s.metric("rlx_requests_total") or 0) >= 70, "rlx_requests_total counts the requests")
        check((s.metric("rlx_generation_tokens_total") or 0) >= 32 * 2, "rlx_generation_tokens_total counts tokens")

        # a full queue: 8 long streams hold the 8 slots; then 60 requests at once: 48 wait in the
        # queue and exactly 12 get 429 with Retry-After; closing the streams lets the 48 finish
        holders = [open_stream(s)[0] for _ in range(8)]
        busy = s.metric("rlx_active_sequences")
        statuses, retry = [], []

        def one(i):
            st_, h, body = s.request("POST", "/v1/completions", {"model": "qwen", "prompt": f"p{i}", "max_tokens": 4,
                                                                  "temperature": 0})
            statuses.append(st_)
            if st_ == 429:
                retry.append("Retry-After" in h and is_error_body(body))
        ts = [threading.Thread(target=one, args=(i,)) for i in range(60)]
        for t in ts:
            t.start()
        t0 = time.time()
        while len(statuses) < 12 and time.time() - t0 < 30:
            time.sleep(0.01)
        for sk in holders:
            sk.close()
        for t in ts:
            t.join()
        n429 = statuses.count(429)
        check(busy == 8 and n429 == 12 and all(retry) and statuses.count(200) == 48,
              f"a full queue (8 slots busy, 48 waiting): {n429} of 60 got 429 with Retry-After, {statuses.count(200)} got 200")

        # a client that goes away mid-stream frees its slot at the next step
        tokens0 = s.metric("rlx_generation_tokens_total")
        sock, first = open_stream(s)
        running = s.metric("rlx_active_sequences")
        sock.close()
        t0 = time.time()
        while time.time() - t0 < 10 and s.metric("rlx_active_sequences") != 0:
            time.sleep(0.02)
        freed = time.time() - t0
        made = s.metric("rlx_generation_tokens_total") - tokens0
        check(b"data: " in first and running == 1 and s.metric("rlx_active_sequences") == 0 and made < 1000,
              f"a disconnected stream's slot is freed ({freed:.2f} s after the disconnect, {made:.0f} of its 2000 tokens made)")

        # SIGTERM: the in-flight stream finishes, then the process exits 0
        result = {}

        def inflight():
            result["r"] = s.request("POST", "/v1/chat/completions", {"model": "qwen", "messages": [{"role": "user", "content": "x"}],
                                                                     "max_tokens": 40, "temperature": 0})
        t = threading.Thread(target=inflight)
        t.start()
        time.sleep(0.3)
        rc = s.stop()
        t.join()
        check(rc == 0, f"SIGTERM: exit status 0 ({rc})")
        check(result.get("r", (0,))[0] == 200, f"SIGTERM: the in-flight request finished ({result.get('r', (None,))[0]})")
        try:
            socket.create_connection((s.host, s.port), timeout=2).close()
            check(False, "after SIGTERM the port no longer accepts")
        except OSError:
            check(True, "after SIGTERM the port no longer accepts")
    finally:
        s.stop()
    # under mpirun: 2 ranks, tensor- and then pipeline-parallel; concurrent greedy chats equal
    # the one-process server's, and SIGTERM to rank 0 ends the job with status 0
    import shutil
    if shutil.which("mpirun"):
        for mode in (["--tp", "2"], ["--pp", "2"]):
            m = Server(a.rlx, [f"qwen={dec}"], "--api-key", KEY, "--parallel-slots", "4", "--max-context", "256", *mode, ranks=2)
            try:
                ready = m.wait_ready()
                got = node(a, npm, m.base, "load", {"model": "qwen", "prompts": prompts[:6], "n": 12}) if ready else {"results": []}
                same = sum(1 for r, o in zip(got["results"], solo) if r["text"] == o["text"])
                check(ready and same == 6, f"{' '.join(mode)} under mpirun: 6 concurrent greedy chats equal one process's ({same})")
                # prefix caching on every rank: the followers adopt the same cached blocks
                px = node(a, npm, m.base, "prefix", {"model": "qwen", "system": SYSTEM, "questions": QUESTIONS[:2], "n": n})["results"] \
                    if ready else []
                hits = [r["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0) for r in px]
                same = sum(1 for r, ref in zip(px, ref_prefix)
                           if r["text"] == ref["text"][0] or (r["finish"] == "stop" and ref["text"][0].startswith(r["text"])))
                check(len(px) == 2 and hits[1] >= 64 and same == 2,
                      f"{' '.join(mode)} under mpirun: a cached system prompt ({hits} cached tokens), texts equal rlx generate's ({same} of 2)")
            finally:
                rc = m.stop()
            check(rc == 0, f"{' '.join(mode)} under mpirun: SIGTERM to rank 0 ends the job with status 0 ({rc})")
    else:
        check(not os.environ.get("CI"), "mpirun is missing (scripts/install-deps.sh installs it)")
        print("SKIP  serving under mpirun: mpirun is missing")
    # a paged KV cache smaller than the sequences want: 8 slots share 8 blocks of 16 tokens and
    # 8 concurrent chats of 40 tokens need about 4 blocks each, so sequences are preempted (their
    # blocks freed) and resume by prefilling again; each still equals its solo result
    k = Server(a.rlx, [f"qwen={dec}"], "--api-key", KEY, "--parallel-slots", "8", "--max-context", "256",
               "--kv-cache-tokens", "128", "--kv-block-size", "16")
    try:
        ready = k.wait_ready()
        few = prompts[:8]
        alone = node(a, npm, k.base, "solo", {"model": "qwen", "prompts": few, "n": 40})["results"] if ready else []
        pre0 = k.metric("rlx_preemptions_total") or 0
        got = node(a, npm, k.base, "load", {"model": "qwen", "prompts": few, "n": 40}) if ready else {"results": []}
        same = sum(1 for r, o in zip(got["results"], alone) if r["text"] == o["text"] and r["finish"] == o["finish"])
        pre = (k.metric("rlx_preemptions_total") or 0) - pre0
        check(ready and same == 8 and pre > 0,
              f"8 concurrent chats in a cache of 8 blocks: {pre:.0f} preemptions, {same} of 8 equal their solo results")
        check(k.metric("rlx_kv_cache_blocks") == 8 and k.metric("rlx_kv_cache_usage_ratio") == 0,
              "rlx_kv_cache_blocks is 8; every block is free again afterwards")
        st_, _, body = k.request("POST", "/v1/completions", {"model": "qwen", "prompt": "x", "max_tokens": 200})
        check(st_ == 400 and json.loads(body)["error"]["code"] == "context_length_exceeded",
              f"a request larger than the whole KV cache: 400 context_length_exceeded ({st_})")
    finally:
        k.stop()
    # --request-timeout: a generation running past it is stopped with 504 (code timeout)
    t = Server(a.rlx, [f"qwen={dec}"], "--max-context", "4096", "--request-timeout", "0.5", "--parallel-slots", "1")
    try:
        t.wait_ready()
        t0 = time.time()
        out = {}

        def long_request(k):
            out[k] = t.request("POST", "/v1/completions", {"model": "qwen", "prompt": "x", "max_tokens": 4000, "temperature": 0})
            out[k] = out[k] + (time.time() - t0,)
        ts = [threading.Thread(target=long_request, args=(k,)) for k in range(2)]  # one slot: the second waits in the queue
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        timed_out = [k for k in out if out[k][0] == 504 and json.loads(out[k][2])["error"]["code"] == "timeout" and out[k][3] < 3]
        check(len(timed_out) == 2, f"past --request-timeout 0.5, the running request and the one queued behind it: 504 timeout "
                                   f"after {', '.join(f'{out[k][3]:.2f}' for k in out)} s")
    finally:
        t.stop()
    # a model that does not load: exit status non-zero, /health said why
    bad = subprocess.run([a.rlx, "serve", os.path.join(a.work, "missing"), "--port", "0"], capture_output=True, text=True, timeout=60)
    check(bad.returncode != 0 and "missing" in bad.stderr, "a model that does not load: an error naming it, exit non-zero")
    print(f"{len(FAILURES)} failure(s)" if FAILURES else "every serve check passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
