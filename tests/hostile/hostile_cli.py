#!/usr/bin/python3
"""Hostile-input test suite for the `rlx` command line.

Generates hostile inputs (corrupted Hugging Face folders, huge shapes, very long and very deep
graphs, FIFOs and directories where files belong, same-file conversions, bad flags, ONNX
attributes of the wrong kind) into a fresh work folder, runs rlx verbs on them, and checks that
every bad input is refused cleanly and that valid inputs (the "control" family) still work.

Run:
    /usr/bin/python3 tests/hostile/hostile_cli.py --rlx build/bin/rlx --work /tmp/rlx-hostile
    ... --list          list the cases (id, expectation, xfail reason) without running them
    ... -k SUBSTRING    run only the cases whose id (family/name) contains it; repeatable
    ... -j N            cases run at a time (default 2)      -v   print every case's stderr line
CTest runs it as `hostile.cli` (label hostile).

Each case is one rlx subprocess: stdin closed, its own session (killed as a group at the
timeout: 60 s unless the case says otherwise, 15 s for FIFO cases), and, when it uses
`--device cpu` or no device, an address-space limit (RLIMIT_AS, 8 GiB). Expectations:
    error  exit non-zero without a signal, with an `error: ...` line on stderr that contains one
           of the case's substrings (the file, flag, key or node at fault; paths under the work
           folder are cut to their last component first), and no stderr line over 400 characters
    ok     exit 0 (and the case's check, if any, holds)
    any    any exit without a signal, and the case's check holds (e.g. `convert X X` left X
           byte-identical)
Outcomes:
    pass      as expected
    crash     killed by a signal (returncode < 0, or 128+N)
    hang      still running at the timeout
    accepted  exit 0 where an error was expected
    unclear   an error, but no `error:` line with an expected substring, or a line too long
    failed    an ok/any case that exited non-zero or whose check (or setup) failed
Known defects are listed in XFAIL (case-id patterns with the reason): such a case is reported
XFAIL while it fails and XPASS when it passes; an XPASS fails the suite, so remove its marker
when the fix lands. The exit status is 0 when every case is a pass or an XFAIL.

Needs numpy and the `onnx` Python package (Debian: python3-numpy python3-onnx).
"""
import argparse
import concurrent.futures
import dataclasses
import fnmatch
import functools
import io
import json
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from typing import Callable, Optional

try:
    import numpy as np
    from onnx import TensorProto, helper
except ImportError as e:  # fail loudly: the suite cannot build its inputs without them
    sys.exit(f"hostile_cli.py: cannot import {e.name}: this suite needs numpy and onnx for "
             f"{sys.executable} (Debian: apt install python3-numpy python3-onnx)")

AS_LIMIT = 8 << 30
MAX_LINE = 400
HUGE = 1 << 40  # 1099511627776 elements
FIFO_TIMEOUT = 15

# Known defects: space-separated case-id patterns (fnmatch) -> reason. Remove a pattern when its
# fix lands (its cases then report XPASS). Empty: every case passes.
XFAIL = {
}


@dataclasses.dataclass
class Case:
    family: str
    name: str
    argv: list                      # arguments after `rlx`; @name: a shared input (see resolve)
    expect: str = "error"           # "error" | "ok" | "any"
    want: tuple = ()                # "error": the error line must contain one of these
    timeout: float = 60
    setup: Optional[Callable[[], object]] = None
    check: Optional[Callable[[], Optional[str]]] = None  # returns a problem, or None
    xfail: Optional[str] = None

    @property
    def id(self):
        return f"{self.family}/{self.name}"

    def cpu_only(self):
        a = self.argv
        return "--device" not in a or a[a.index("--device") + 1:a.index("--device") + 2] == ["cpu"]


def E(family, name, argv, *want, **kw):
    return Case(family, name, list(argv), "error", tuple(want), **kw)


def OK(family, name, argv, **kw):
    return Case(family, name, list(argv), "ok", **kw)


def once(fn):
    """Run fn once, thread-safe, and keep its result: shared inputs and per-folder setups."""
    lock, memo = threading.Lock(), {}

    @functools.wraps(fn)
    def wrapper(*args):
        with lock:
            if "v" not in memo:
                memo["v"] = fn(*args)
            return memo["v"]
    return wrapper


def slug(*parts):
    """A case name from a verb, a flag and a value: slug("gen", "--top-k", "-1") == "gen_top_k_m1"."""
    out = []
    for p in map(str, parts):
        p = p.lstrip("-") if re.match(r"-+[a-z]", p) else p.replace("-", "m")
        out.append(re.sub(r"[^a-z0-9]+", "_", p.lower()).strip("_") or "empty")
    return "_".join(out)


# ---------------------------------------------------------------------------------------------
# Files


def write(path, data, mode="w"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as f:
        f.write(data)
    return path


def write_safetensors(path, tensors):
    hdr, off, blobs = {}, 0, []
    for n, a in tensors.items():
        hdr[n] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    return write(path, struct.pack("<Q", len(h)) + h + b"".join(blobs), "wb")


def npy(path, n):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ones(n, np.float32))
    return path


def mkfifo(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.mkfifo(path)
    return path


def mkdir(path):
    os.makedirs(path, exist_ok=True)
    return path


def replace_with(make):
    return lambda p: (os.remove(p), make(p))


def edit_json(path, fn):
    with open(path) as f:
        d = json.load(f)
    fn(d)
    write(path, json.dumps(d))


def jset(*keys_value):
    """An edit of a JSON file that sets one nested key: jset("model", "type", 5)."""
    *keys, value = keys_value

    def fn(j):
        for k in keys[:-1]:
            j = j[k]
        j[keys[-1]] = value
    return lambda path: edit_json(path, fn)


def save_onnx(path, nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return write(path, m.SerializeToString(), "wb")


def vi(name, dims, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, dims)


def graph_text(inputs, body, ret, rtype):
    return f"graph @g({inputs}) -> ({rtype}) {{\n" + "".join(f"  {s}\n" for s in body) + f"  return {ret}\n}}\n"


class Ctx:
    """The work folder, and the shared inputs a case names as @name in its argv, each made on
    first use (so that -k builds only what it needs)."""

    def __init__(self, rlx, work):
        self.rlx, self.work = rlx, work
        base = lambda name: self.p("base", name)  # noqa: E731
        self.shared = {k: once(f) for k, f in {
            "@bert": lambda: self.make(["make-model", "minilm", "--out", base("bert")], base("bert")),
            "@qwen": lambda: self.make(["make-model", "qwen3-tiny", "--out", base("qwen")], base("qwen")),
            "@ckpt": lambda: self.make(["train", "mnist", "--arch", "mlp", "--synthetic", "--epochs", "1", "--save",
                                        base("mlp.safetensors")], base("mlp.safetensors")),
            "@ply": lambda: self.make(["splat", "fit", "--out", base("splat"), "--gaussians", "16", "--size", "16",
                                       "--steps", "1"], os.path.join(base("splat"), "fit.ply")),
            "@graph": lambda: write(base("add.rlx"), graph_text("%x: f32[4], %y: f32[4]", ["%z = add(%x, %y)"], "%z",
                                                                "f32[4]")),
            "@seqgraph": lambda: write(base("seq.rlx"), graph_text("%x: f32[batch, seq]", ["%y = neg(%x)"], "%y",
                                                                   "f32[batch, seq]")),
            "@st": lambda: write_safetensors(base("w.safetensors"), {"a": np.arange(64, dtype=np.float32).reshape(8, 8),
                                                                     "b": np.ones(8, np.float32)}),
            "@gguf": lambda: self.make(["convert", self.get("@st"), base("w.gguf")], base("w.gguf")),
            "@npy4": lambda: npy(base("x4.npy"), 4),
            "@npy7": lambda: npy(base("x7.npy"), 7),
            "@calib": lambda: write(base("calib.txt"), "hello world\nthe quick brown fox\n"),
        }.items()}

    def p(self, *parts):
        return os.path.join(self.work, *parts)

    def get(self, name):
        return self.shared[name]()

    def make(self, argv, out):
        r = subprocess.run([self.rlx] + argv, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise RuntimeError(f"`rlx {' '.join(argv)}` failed: {r.stderr.strip()[:300]}")
        return out

    def resolve(self, argv):
        return [re.sub(r"@\w+", lambda m: self.get(m.group()) if m.group() in self.shared else m.group(), a)
                for a in argv]

    def hf_copy(self, base, name):
        """A copy of a model folder: small files copied, large ones hard-linked (never written)."""
        dst = self.p("hf", name)
        os.makedirs(dst)
        for f in os.listdir(base):
            s, d = os.path.join(base, f), os.path.join(dst, f)
            if os.path.getsize(s) > (4 << 20):
                try:
                    os.link(s, d)
                except OSError:
                    os.symlink(s, d)
            else:
                shutil.copyfile(s, d)
        return dst


# ---------------------------------------------------------------------------------------------
# Families: one generator each, returning its cases.


def controls(c):
    F = "control"
    out, small = c.p("ctl", "out"), c.p("ctl", "small.onnx")
    mlp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "mlp.rlx")

    def mk_small():
        save_onnx(small, [helper.make_node("Transpose", ["x"], ["t"], name="tr", perm=[1, 0]),
                          helper.make_node("Gather", ["t", "idx"], ["y"], name="ga", axis=0)],
                  [vi("x", [2, 3])], [vi("y", [2, 2])], [helper.make_tensor("idx", TensorProto.INT64, [2], [0, 2])])
    return [
        OK(F, "info_text_ir", ["info", "@graph"]),
        OK(F, "run_text_ir", ["run", "@graph", "--device", "cpu"]),
        OK(F, "run_text_ir_ref", ["run", "@graph", "--device", "ref"]),
        OK(F, "run_text_ir_input", ["run", "@graph", "--device", "cpu", "--input", "x=@npy4"]),
        OK(F, "explain_text_ir", ["explain", "@graph"]),
        OK(F, "bench_seq_graph", ["bench", "@seqgraph", "--device", "cpu", "--batch", "1,2", "--seq", "8",
                                  "--runs", "2"]),
        OK(F, "info_mlp_example", ["info", mlp]),
        OK(F, "run_mlp_example", ["run", mlp, "--device", "cpu", "--dims", "batch=2"]),
        OK(F, "run_out_existing_dir", ["run", "@graph", "--device", "cpu", "--out", out], setup=lambda: mkdir(out),
           check=lambda: None if os.path.exists(os.path.join(out, "z.npy")) else "no z.npy written"),
        OK(F, "run_small_onnx", ["run", small, "--device", "cpu"], setup=mk_small),
        OK(F, "info_bert", ["info", "@bert"]),
        OK(F, "embed_bert", ["embed", "@bert", "hello world", "--device", "cpu"]),
        OK(F, "info_qwen", ["info", "@qwen"]),
        OK(F, "generate_qwen_tokens", ["generate", "@qwen", "--tokens", "1,2,3", "-n", "2", "--device", "cpu"]),
        OK(F, "generate_qwen_prompt", ["generate", "@qwen", "--prompt", "hi there", "-n", "2", "--device", "cpu"]),
        OK(F, "generate_qwen_chat", ["generate", "@qwen", "--chat", "{{ hi }} {% raise %} <|im_end|>", "--system", "s",
                                     "-n", "2", "--device", "cpu"]),
        OK(F, "convert_st_to_gguf", ["convert", "@st", c.p("ctl", "w.gguf")]),
        OK(F, "convert_gguf_to_st", ["convert", "@gguf", c.p("ctl", "w.safetensors")]),
        OK(F, "info_gguf", ["info", "@gguf"]),
    ]


def hf_folders(c):
    """Copies of made BERT and Qwen3 folders with one thing corrupted, each run with the verbs
    that read it (info, and embed for BERT or generate for Qwen3)."""
    F, cases = "hf", []
    verbs = {"bert": ("info", "embed"), "qwen": ("info", "generate")}

    def folder(model, tag, corrupt, *want, only=None, prompt=False, timeout=60):
        @once
        def setup():
            corrupt(c.hf_copy(c.get("@" + model), f"{model}_{tag}"))
        d = c.p("hf", f"{model}_{tag}")
        argv = {"info": ["info", d], "embed": ["embed", d, "hello world", "--device", "cpu"],
                "generate": ["generate", d, "--prompt" if prompt else "--tokens", "hello" if prompt else "1,2,3", "-n",
                             "2", "--device", "cpu"]}
        for verb in (only or verbs[model]):
            cases.append(E(F, f"{model}_{tag}" + ("" if only else f"_{verb}"), argv[verb], *want, setup=setup,
                           timeout=timeout))

    def in_file(name, fn):
        return lambda d: fn(os.path.join(d, name))

    def cfg(key, value):
        return in_file("config.json", jset(key, value))

    for model in ("bert", "qwen"):
        for tag, v in (("num", 5), ("null", None), ("list", [model])):
            folder(model, f"model_type_{tag}", cfg("model_type", v), "model_type")
        folder(model, "hidden_act_num", cfg("hidden_act", 5), "hidden_act")
        for key in ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"):
            for tag, v in (("neg", -1), ("zero", 0), ("string", "12"), ("1e9", 1e9), ("2p31", 2 ** 31)):
                folder(model, f"{key}_{tag}", cfg(key, v), key)
        for tag, fn in (("dir", replace_with(mkdir)), ("fifo", replace_with(mkfifo)), ("missing", os.remove),
                        ("deep", lambda p: write(p, "[" * 100000 + "]" * 100000))):
            folder(model, f"config_{tag}", in_file("config.json", fn), "config.json",
                   timeout=FIFO_TIMEOUT if tag == "fifo" else 60)

    # tokenizer files with wrong-typed fields, or not regular files
    def tok(model, tag, name, fn, *want):
        folder(model, f"tok_{tag}", in_file(name, fn), *want, only=("embed" if model == "bert" else "generate",),
               prompt=True, timeout=FIFO_TIMEOUT if "fifo" in tag else 60)

    T, TC = "tokenizer.json", "tokenizer_config.json"
    tok("qwen", "model_type_num", T, jset("model", "type", 5), "type")
    tok("qwen", "unk_token_num", T, jset("model", "unk_token", 3), "unk_token")
    tok("qwen", "subword_prefix_list", T, jset("model", "continuing_subword_prefix", []), "continuing_subword_prefix")
    tok("qwen", "merges_num", T, jset("model", "merges", 5), "merges")
    tok("qwen", "merges_list_of_nums", T, jset("model", "merges", [1, 2, 3]), "merge")
    tok("qwen", "vocab_list", T, jset("model", "vocab", [1, 2]), "vocab")
    tok("qwen", "vocab_id_string", T, jset("model", "vocab", "a", "x"), "vocab")
    tok("qwen", "model_num", T, jset("model", 5), "model")
    tok("qwen", "normalizer_num", T, jset("normalizer", 5), "normalizer")
    tok("qwen", "normalizer_type_list", T, jset("normalizer", {"type": []}), "normalizer")
    tok("qwen", "pre_tokenizer_num", T, jset("pre_tokenizer", 5), "pre_tokenizer")
    tok("qwen", "pretokenizers_num", T, jset("pre_tokenizer", "pretokenizers", 5), "pretokenizers", "pre_tokenizer")
    tok("qwen", "split_pattern_num", T, jset("pre_tokenizer", "pretokenizers", 0, "pattern", 5), "pattern")
    tok("qwen", "added_tokens_obj", T, jset("added_tokens", {"a": 1}), "added_tokens")
    tok("qwen", "added_token_id_str", T, jset("added_tokens", [{"id": "x", "content": "<x>"}]), "added_tokens")
    tok("qwen", "deep_nesting", T, lambda p: write(p, '{"model": ' + "[" * 100000 + "]" * 100000 + "}"), T)
    tok("qwen", "json_dir", T, replace_with(mkdir), T)
    tok("qwen", "json_fifo", T, replace_with(mkfifo), T)
    # (no Qwen3 tokenizer_config.json case: rlx reads no field of that file for Qwen3)
    tok("bert", "do_lower_case_str", TC, jset("do_lower_case", "yes"), "do_lower_case")
    tok("bert", "max_length_str", TC, jset("model_max_length", "x"), "model_max_length")
    tok("bert", "config_list", TC, lambda p: write(p, "[1, 2]"), TC)
    tok("bert", "config_dir", TC, replace_with(mkdir), TC)
    tok("bert", "config_fifo", TC, replace_with(mkfifo), TC)
    tok("bert", "vocab_dir", "vocab.txt", replace_with(mkdir), "vocab.txt")
    tok("bert", "vocab_fifo", "vocab.txt", replace_with(mkfifo), "vocab.txt")
    tok("bert", "vocab_empty", "vocab.txt", lambda p: write(p, ""), "vocab.txt")

    # sharded weights: model.safetensors.index.json naming a hostile shard
    def shard(tag, name, make, *want, weight_map=None):
        def corrupt(d):
            st = os.path.join(d, "model.safetensors")
            with open(st, "rb") as f:
                names = [k for k in json.loads(f.read(struct.unpack("<Q", f.read(8))[0])) if k != "__metadata__"]
            if make:
                make(os.path.join(d, name), st)
            os.remove(st)
            wm = weight_map if weight_map is not None else {n: name for n in names}
            write(os.path.join(d, "model.safetensors.index.json"), json.dumps({"metadata": {}, "weight_map": wm}))
        folder("qwen", f"shard_{tag}", corrupt, *want, timeout=FIFO_TIMEOUT if tag == "fifo" else 60)
    S = "model-00001-of-00001.safetensors"
    shard("fifo", S, lambda p, st: mkfifo(p), S)
    shard("dir", S, lambda p, st: mkdir(p), S)
    shard("dotdot", "../outside.safetensors", lambda p, st: os.path.exists(p) or os.link(st, p), "../outside")
    shard("dev_zero", "/dev/zero", None, "/dev/zero")
    shard("map_list", S, None, "weight_map", weight_map=[1, 2])
    shard("map_num_value", S, None, "weight_map", weight_map={"model.embed_tokens.weight": 5})
    return cases


def huge_sizes(c):
    F, cases = "huge", []

    def ir(name, text, *want, verb="run", extra=()):
        path = c.p("huge", name + ".rlx")
        argv = [verb, path] + (["--device", "cpu"] if verb == "run" else []) + list(extra)
        cases.append(E(F, name, argv, *want, setup=lambda: write(path, text)))
    ir("input_2p40", graph_text(f"%huge_in: f32[{HUGE}]", ["%y = neg(%huge_in)"], "%y", f"f32[{HUGE}]"), "huge_in")
    ir("param_2p40", graph_text("", [f'%w = param "huge.weight" : f32[{HUGE}]', "%y = neg(%w)"], "%y",
                                f"f32[{HUGE}]"), "huge.weight")
    ir("iota_2p40", graph_text("", [f"%big_iota = iota() {{dtype = f32, shape = [{HUGE}], axis = 0}}"], "%big_iota",
                               f"f32[{HUGE}]"), "big_iota")
    # element counts or byte sizes that wrap around 2^64
    W = "4294967296, 4294967296"
    ir("input_wraps_to_0", graph_text(f"%wrap_in: f32[{W}]", ["%y = neg(%wrap_in)"], "%y", f"f32[{W}]"), "wrap_in")
    ir("input_bytes_wrap", graph_text(f"%bytes_in: f32[{1 << 62}]", ["%y = neg(%bytes_in)"], "%y", f"f32[{1 << 62}]"),
       "bytes_in")
    ir("iota_dims_wrap", graph_text("", [f"%wrap_iota = iota() {{dtype = f32, shape = [{W}], axis = 0}}"],
                                    "%wrap_iota", f"f32[{W}]"), "wrap_iota")
    ir("dim_over_i64", graph_text("%x: f32[99999999999999999999]", ["%y = neg(%x)"], "%y", "f32[1]"),
       "99999999999999999999", verb="info")
    ir("dims_binding_huge", graph_text("%sym_in: f32[n]", ["%y = neg(%sym_in)"], "%y", "f32[n]"), "sym_in", "--dims",
       extra=["--dims", f"n={HUGE}"])
    cases.append(E(F, "generate_context_2p40", ["generate", "@qwen", "--tokens", "1,2", "-n", "1", "--context",
                                                str(HUGE), "--device", "cpu"], "--context"))
    cases.append(E(F, "bench_seq_2p40", ["bench", "@seqgraph", "--seq", str(HUGE), "--runs", "1", "--device", "cpu"],
                   "--seq", "input 'x'"))

    def cos(name, shape):
        path = c.p("huge", name + ".onnx")
        shp = helper.make_tensor("shp", TensorProto.INT64, [len(shape)], shape)
        cases.append(E(F, name, ["run", path, "--device", "cpu"], "huge_cos", setup=lambda: save_onnx(
            path, [helper.make_node("ConstantOfShape", ["shp"], ["y"], name="huge_cos")], [], [vi("y", None)], [shp])))
    cos("onnx_constantofshape_2p40", [HUGE])
    cos("onnx_constantofshape_wrap", [1 << 32, 1 << 32])
    cos("onnx_constantofshape_negative", [-5])
    return cases


def long_deep(c):
    F, cases = "deep", []
    chain, relu = c.p("deep", "chain100k.rlx"), c.p("deep", "relu50k.onnx")
    n = 100000
    cases.append(OK(F, "text_ir_chain_100k", ["run", chain, "--device", "cpu"], timeout=120, setup=lambda: write(
        chain, graph_text("%v0: f32[8]", [f"%v{i + 1} = neg(%v{i})" for i in range(n)], f"%v{n}", "f32[8]"))))
    cases.append(OK(F, "onnx_relu_chain_50k", ["run", relu, "--device", "cpu"], timeout=120, setup=lambda: save_onnx(
        relu, [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"relu_{i}") for i in range(50000)],
        [vi("t0", [8])], [vi("t50000", [8])])))

    def nested_if(path, depth):
        """If inside the then-branch of If, `depth` levels, built from the inside out."""
        g = helper.make_graph([helper.make_node("Identity", ["x"], ["o0"], name="leaf")], "then0", [], [vi("o0", [4])])
        for k in range(1, depth + 1):
            els = helper.make_graph([helper.make_node("Identity", ["x"], [f"e{k}"])], f"else{k}", [],
                                    [vi(f"e{k}", [4])])
            node = helper.make_node("If", ["cond"], [f"o{k}"], name=f"if_{k}", then_branch=g, else_branch=els)
            g = helper.make_graph([node], f"then{k}", [], [vi(f"o{k}", [4])])
        save_onnx(path, list(g.node), [vi("x", [4]), vi("cond", [], TensorProto.BOOL)], [vi(f"o{depth}", [4])])
    for depth in (101, 200):  # past protobuf's default recursion limit of 100
        p = c.p("deep", f"if{depth}.onnx")
        cases.append(E(F, f"onnx_nested_if_{depth}", ["run", p, "--device", "cpu"], "nest", "depth",
                       setup=functools.partial(nested_if, p, depth)))
    p = c.p("deep", "if3.onnx")  # shallow: compiled (both branches of each If, selected by cond)
    cases.append(OK(F, "onnx_nested_if_3", ["info", p], setup=functools.partial(nested_if, p, 3)))

    def ir(name, text, *want):
        path = c.p("deep", name + ".rlx")
        cases.append(E(F, name, ["run", path, "--device", "cpu"], *want, setup=lambda: write(path, text)))
    ir("attr_brackets_100k", graph_text("%x: f32[2, 3]", ["%t = transpose(%x) {perm = " + "[" * n + "]" * n + "}"],
                                        "%t", "f32[3, 2]"), "perm", "nest")
    ir("dense_brackets_100k", graph_text("", ["%deep = constant dense<" + "[" * n + "1.0" + "]" * n + "> : f32[1]"],
                                         "%deep", "f32[1]"), "%deep", "nest", "depth")
    ir("type_brackets_100k", graph_text("%x: f32" + "[" * n, [], "%x", "f32[1]"), "type_brackets_100k.rlx:1:")
    ir("unclosed_graph", "graph @g(%x: f32[1]) -> (f32[1]) {\n" + "".join(f"  %y{i} = neg(%x)\n" for i in range(3)),
       "unclosed_graph.rlx")
    return cases


def non_regular(c):
    F, cases = "nonreg", []
    for ext in ("onnx", "gguf", "safetensors", "rlx"):
        for kind, make in (("fifo", mkfifo), ("dir", mkdir)):
            path = c.p("nonreg", f"{kind}_model.{ext}")
            setup = once(functools.partial(make, path))
            for verb in ("info", "run"):
                cases.append(E(F, f"{kind}_{ext}_{verb}", [verb, path] + (["--device", "cpu"] if verb == "run" else []),
                               f"{kind}_model.{ext}", setup=setup, timeout=FIFO_TIMEOUT if kind == "fifo" else 60))
    z = c.p("nonreg", "zero_link.onnx")
    link = once(lambda: os.symlink("/dev/zero", z))
    for verb in ("info", "run"):
        cases.append(E(F, f"dev_zero_{verb}", [verb, "/dev/zero", "--device", "cpu"][:2 if verb == "info" else 4],
                       "/dev/zero", timeout=FIFO_TIMEOUT))
        cases.append(E(F, f"dev_zero_link_onnx_{verb}", [verb, z], "zero_link.onnx", timeout=FIFO_TIMEOUT, setup=link))
    fifo_in, npy_fifo = c.p("nonreg", "fifo_in.safetensors"), c.p("nonreg", "fifo_x.npy")
    jdir, edir, outdir = c.p("nonreg", "json_is_dir.json"), c.p("nonreg", "emb_is_dir.npy"), c.p("nonreg", "out.gguf")
    cases += [
        E(F, "convert_fifo_input", ["convert", fifo_in, c.p("nonreg", "o.gguf")], "fifo_in.safetensors",
          setup=lambda: mkfifo(fifo_in), timeout=FIFO_TIMEOUT),
        E(F, "convert_output_is_dir", ["convert", "@st", outdir], "out.gguf", setup=lambda: mkdir(outdir)),
        E(F, "run_input_npy_fifo", ["run", "@graph", "--device", "cpu", "--input", f"x={npy_fifo}"], "fifo_x.npy",
          setup=lambda: mkfifo(npy_fifo), timeout=FIFO_TIMEOUT),
        E(F, "explain_json_is_dir", ["explain", "@graph", "--json", jdir], "json_is_dir.json",
          setup=lambda: mkdir(jdir)),
        E(F, "embed_out_is_dir", ["embed", "@bert", "hi", "--device", "cpu", "--out", edir], "emb_is_dir.npy",
          setup=lambda: mkdir(edir)),
    ]
    return cases


def same_file_convert(c):
    """`convert X X` (or X through another name): X must never be destroyed. Converting in place is
    allowed (the output is written beside X and renamed over it); afterwards X is either
    unchanged or a complete model that `rlx info` reads."""
    F, cases = "samefile", []

    def case(name, src, ext, alias, extra=()):
        path = c.p("samefile", name + ext)
        out = {"same": path, "dot": os.path.join(os.path.dirname(path), ".", os.path.basename(path)),
               "symlink": path + ".link" + ext, "hardlink": path + ".hard" + ext}[alias]
        before = {}

        def setup():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            shutil.copyfile(c.get(src), path)
            before["bytes"] = open(path, "rb").read()
            if alias in ("symlink", "hardlink"):
                (os.symlink if alias == "symlink" else os.link)(path, out)

        def check():
            try:
                now = open(path, "rb").read()
            except OSError as e:
                return f"input gone: {e}"
            if now == before["bytes"]:
                return None
            r = subprocess.run([c.rlx, "info", path], capture_output=True, text=True, timeout=60,
                               stdin=subprocess.DEVNULL)
            return None if r.returncode == 0 else (f"input rewritten ({len(before['bytes'])} -> {len(now)} bytes) "
                                                   f"and no longer a model: {r.stderr.strip()[:200]}")
        cases.append(Case(F, name, ["convert", path, out] + list(extra), "any", setup=setup, check=check))
    case("gguf_same", "@gguf", ".gguf", "same")
    case("gguf_same_quant", "@gguf", ".gguf", "same", ["--quant", "Q8_0"])
    case("gguf_dot_slash", "@gguf", ".gguf", "dot")
    case("gguf_via_symlink", "@gguf", ".gguf", "symlink")
    case("st_same", "@st", ".safetensors", "same")
    case("st_dot_slash", "@st", ".safetensors", "dot")
    case("st_via_symlink", "@st", ".safetensors", "symlink")
    case("st_via_hardlink", "@st", ".safetensors", "hardlink")
    return cases


def bad_flags(c):
    """Unknown flags, missing values, and bad values for every verb; the error must name the flag
    (or, for an unknown choice such as a device name, the value)."""
    F, cases = "flags", []

    def e(name, argv, *want, **kw):
        cases.append(E(F, name, argv, *want, **kw))

    def values(verb, base, pairs, also_value=False, **kw):
        """pairs: (flag, value); the error must name the flag (or the value, when also_value)."""
        for flag, val in pairs:
            e(slug(verb, flag, val), base + [flag, val], flag, *([val] if also_value else []), **kw)
    g, cpu = "@graph", ["--device", "cpu"]
    e("global_unknown_verb", ["frobnicate"], "frobnicate")
    e("devices_unknown_flag", ["devices", "--bogus"], "--bogus")
    for verb in ("info", "explain", "run", "bench"):
        e(f"{verb}_unknown_flag", [verb, g, "--bogus"], "--bogus")
        e(f"{verb}_missing_model", [verb], "MODEL", "usage")
    for verb in ("explain", "run", "bench"):
        e(f"{verb}_device_missing_value", [verb, g, "--device"], "--device")
        values(verb, [verb, g], [("--device", "nosuch")], also_value=True)
        e(f"{verb}_dims_not_number", [verb, g, "--dims", "x=abc"] + cpu, "--dims", "x=abc")
        e(f"{verb}_dims_no_equals", [verb, g, "--dims", "x"] + cpu, "--dims")
    for verb in ("explain", "run"):
        values(verb, [verb, g] + cpu, [("--policy", "nosuch")], also_value=True)
        e(f"{verb}_policy_op_nosuch", [verb, g, "--policy", "softmax=nosuch"] + cpu, "--policy", "nosuch")
        e(f"{verb}_policy_missing_value", [verb, g, "--policy"], "--policy")
    r = ["run", g] + cpu
    values("run", r, [("--seed", "abc"), ("--seed", "nan"), ("--seed", str(1 << 64)), ("--tp", "0"), ("--pp", "-1"),
                      ("--precision", "f8")])
    e("run_input_no_equals", r + ["--input", "x"], "--input")
    e("run_input_missing_file", r + ["--input", "x=" + c.p("nope.npy")], "nope.npy")
    e("run_input_unknown_name", r + ["--input", "nosuch=@npy4"], "nosuch")
    e("run_input_wrong_shape", r + ["--input", "x=@npy7"], "'x'", "input x")
    values("bench", ["bench", "@seqgraph"] + cpu, [("--batch", "0"), ("--batch", "1,,2"), ("--seq", "0"),
                                                   ("--runs", "-1"), ("--runs", "0"), ("--warmup", "-1"),
                                                   ("--format", "xml")])
    e("bench_batch_2p63", ["bench", "@seqgraph", "--batch", str((1 << 63) - 1)] + cpu, "--batch", "input 'x'")
    e("bench_runs_2p63", ["bench", "@seqgraph", "--runs", str((1 << 63) - 1)] + cpu, "--runs", timeout=20)
    gen = ["generate", "@qwen", "--tokens", "1,2,3"] + cpu
    values("generate", gen + ["-n", "1"], [
        ("--temp", "nan"), ("--temp", "inf"), ("--temp", "-1"), ("--top-k", "-1"), ("--top-p", "2"), ("--top-p", "nan"),
        ("--context", "0"), ("--context", "-5"), ("--runs", "-1"), ("--runs", "0"), ("--seed", "abc"), ("--tp", "0"),
        ("--json", "")], timeout=30)
    values("generate", gen, [("-n", "9223372036854775807"), ("-n", "-1"), ("-n", "abc")], timeout=30)
    e("generate_unknown_flag", gen + ["--bogus"], "--bogus")
    e("generate_temp_missing_value", gen + ["--temp"], "--temp")
    e("generate_no_prompt", ["generate", "@qwen"] + cpu, "--prompt", "--tokens")
    e("generate_tokens_empty_item", ["generate", "@qwen", "--tokens", "1,,2"] + cpu, "--tokens")
    e("generate_chat_and_tokens", gen + ["--chat", "hi"], "--chat")
    e("generate_chat_empty", ["generate", "@qwen", "--chat", ""] + cpu, "--chat")
    e("generate_system_alone", gen + ["--system", "x"], "--system")
    e("generate_tokens_out_of_vocab", ["generate", "@qwen", "--tokens", "99999999", "-n", "1"] + cpu, "99999999")
    e("generate_tokens_negative", ["generate", "@qwen", "--tokens", "-1", "-n", "1"] + cpu, "--tokens", "-1")
    values("generate", ["generate", "@qwen", "--tokens", "1"], [("--device", "nosuch")], also_value=True)
    em = ["embed", "@bert", "hello"] + cpu
    values("embed", em, [("--batch", "0"), ("--batch", "-1"), ("--batch", "abc"), ("--max-length", "0"),
                         ("--max-length", "-3"), ("--max-length", "9223372036854775807"), ("--tp", "0")])
    e("embed_unknown_flag", em + ["--bogus"], "--bogus")
    e("embed_no_text", ["embed", "@bert"] + cpu, "TEXT")
    e("embed_out_bad_ext", em + ["--out", c.p("emb.txt")], "--out", "emb.txt")
    values("embed", ["embed", "@bert", "hi"], [("--device", "nosuch")], also_value=True)
    values("convert", ["convert", "@st", c.p("q.gguf")], [("--quant", "Q9_9")], also_value=True)
    e("convert_missing_out", ["convert", "@st"], "OUT")
    e("convert_bad_out_ext", ["convert", "@st", c.p("w.bin")], "w.bin")
    e("convert_unknown_flag", ["convert", "@st", c.p("u.gguf"), "--bogus"], "--bogus")
    qz = ["quantize", "@bert", c.p("qz_out")]
    values("quantize", qz, [("--scheme", "int3")], also_value=True)
    e("quantize_scheme_missing", qz, "--scheme")
    values("quantize", qz + ["--scheme", "int8", "--calib", "@calib"], [("--calib-method", "maxmin")], also_value=True)
    pct = qz + ["--scheme", "int8", "--calib", "@calib", "--calib-method", "percentile", "--percentile"]
    for val in ("nan", "200"):
        e(slug("quantize_percentile", val), pct + [val], "--percentile", f"percentile {val}")
    e("make_model_kind_unknown", ["make-model", "gpt5", "--out", c.p("mm_out")], "gpt5")
    e("make_model_out_missing", ["make-model", "minilm"], "--out")
    values("make_model", ["make-model", "minilm", "--out", c.p("mm_out")], [("--seed", "abc")])
    values("make_model", ["make-model", "qwen3-tiny", "--gguf", "--out", c.p("mm_out2")], [("--gguf-type", "q2")],
           also_value=True)
    tr = ["train", "mnist", "--arch", "mlp", "--synthetic"] + cpu
    values("train", tr, [("--epochs", "-1"), ("--batch", "0"), ("--batch", "-8"), ("--lr", "nan"), ("--lr", "-1"),
                         ("--lr", "inf"), ("--seed", "abc"), ("--dp", "0")], timeout=30)
    values("train", tr, [("--optimizer", "sgdx")], also_value=True)
    values("train", ["train", "mnist", "--synthetic"], [("--arch", "resnet")], also_value=True)
    e("train_task_unknown", ["train", "imagenet", "--synthetic"], "imagenet", "mnist")
    e("train_data_missing_dir", ["train", "mnist", "--data", c.p("no_such_dir")], "no_such_dir")
    cg = ["codegen", "cortex-m", "@ckpt", "--out", c.p("cg_out")]
    e("codegen_target_unknown", ["codegen", "riscv", "@ckpt", "--out", c.p("cg_out")], "riscv")
    values("codegen", cg, [("--calib", "-1"), ("--eval", "abc")])
    values("codegen", cg, [("--arch", "vit")], also_value=True)
    values("codegen", ["codegen", "fpga", "@ckpt", "--out", c.p("cg_out2")], [("--lanes", "0")])
    e("codegen_out_missing", ["codegen", "cortex-m", "@ckpt"], "--out")
    sr = ["splat", "render", "@ply", "--camera", "0,0,5,0,0,0", "--out", c.p("r.png")] + cpu
    values("splat_render", sr, [("--width", "0"), ("--width", "-1"), ("--height", "99999999"), ("--width", "abc"),
                                ("--background", "x"), ("--background", "1,2")])
    for val in ("1,2", "nan,0,5,0,0,0", "0,0,0,0,0,0"):
        e(slug("splat_render_camera", val), sr + ["--camera", val], "--camera", "camera spec")
    e("splat_render_missing_camera", ["splat", "render", "@ply"], "--camera")
    e("splat_verb_unknown", ["splat", "paint"], "paint")
    values("splat_fit", ["splat", "fit", "--out", c.p("sf_out")], [
        ("--gaussians", "0"), ("--size", "0"), ("--size", "-16"), ("--steps", "-1"), ("--lr", "nan")], timeout=30)
    return cases


def onnx_attrs(c):
    """Attributes of the wrong kind or out of range; the error must name the node."""
    F, cases = "onnxattr", []

    def case(name, node, inits=(), attr=None):
        if attr is not None:
            node.attribute.append(attr)
        path = c.p("onnxattr", name + ".onnx")
        cases.append(E(F, name, ["run", path, "--device", "cpu"], node.name, setup=functools.partial(
            save_onnx, path, [node], [vi("x", [2, 3])], [vi("y", None)], inits)))
    for name, value in (("float", 1.0), ("floats", [1.0, 0.0]), ("string", "10"), ("out_of_range", [0, 5]),
                        ("repeated", [0, 0]), ("too_short", [0])):
        case(f"transpose_perm_{name}", helper.make_node("Transpose", ["x"], ["y"], name="bad_transpose"),
             attr=helper.make_attribute("perm", value))
    for name, idx, axis in (("index_too_big", [5], 0), ("index_too_negative", [-10], 0), ("index_2p62", [1 << 62], 0),
                            ("axis_out_of_range", [0], 7)):
        case(f"gather_{name}", helper.make_node("Gather", ["x", "idx"], ["y"], name="bad_gather", axis=axis),
             [helper.make_tensor("idx", TensorProto.INT64, [1], idx)])
    case("softmax_axis_out_of_range", helper.make_node("Softmax", ["x"], ["y"], name="bad_softmax", axis=9))
    for name, shape in (("two_minus_ones", [-1, -1]), ("wrong_count", [4, 4])):
        case(f"reshape_{name}", helper.make_node("Reshape", ["x", "shp"], ["y"], name="bad_reshape"),
             [helper.make_tensor("shp", TensorProto.INT64, [2], shape)])
    case("undefined_input", helper.make_node("Relu", ["missing_tensor"], ["y"], name="dangling_relu"))
    return cases


def run_out_dir(c):
    out = c.p("outdir", "not", "yet", "there")
    return [OK("outdir", "run_out_creates_dir", ["run", "@graph", "--device", "cpu", "--out", out],
               check=lambda: None if os.path.exists(os.path.join(out, "z.npy")) else "no z.npy written")]


def npy_inputs(c):
    """Hostile .npy inputs given with `run --input`: truncated data, a header that declares 2^40
    elements, a malformed header, a FIFO and a directory. The error names the file."""
    F, cases = "npy", []
    good = np.ones(4, np.float32)

    def make(name, data):
        path = c.p("npy", name + ".npy")
        return path, (lambda: write(path, data, "wb"))

    buf = io.BytesIO()
    np.save(buf, good)
    raw = buf.getvalue()
    huge = raw.replace(b"(4,)", b"(1099511627776,)")
    for name, data in [("truncated", raw[:-5]), ("huge_shape", huge), ("bad_header", raw[:10] + b"{nope" + raw[15:]),
                       ("empty", b"")]:
        path, setup = make(name, data)
        cases.append(E(F, name, ["run", "@graph", "--device", "cpu", "--input", "x=" + path], name + ".npy", setup=setup))
    fifo = c.p("npy", "fifo.npy")
    cases.append(E(F, "fifo", ["run", "@graph", "--device", "cpu", "--input", "x=" + fifo], "fifo.npy",
                   setup=lambda: mkfifo(fifo), timeout=FIFO_TIMEOUT))
    d = c.p("npy", "dir.npy")
    cases.append(E(F, "directory", ["run", "@graph", "--device", "cpu", "--input", "x=" + d], "dir.npy",
                   setup=lambda: mkdir(d)))
    return cases


FAMILIES = [controls, hf_folders, huge_sizes, long_deep, non_regular, same_file_convert, bad_flags, onnx_attrs, npy_inputs,
            run_out_dir]


# ---------------------------------------------------------------------------------------------
# Runner


def limits(as_limit):
    def fn():
        os.close(0)  # stdin closed, not merely empty
        if as_limit:
            resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))
    return fn


def classify(case, rc, err, hung, work):
    """(outcome, detail). Paths under the work folder are cut to their last component before the
    substring check, so that a folder named after the case cannot supply the expected word."""
    if hung:
        return "hang", f"no exit within {case.timeout:g} s"
    if rc < 0 or rc > 128:
        sig = -rc if rc < 0 else rc - 128
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return "crash", f"rc={rc} ({name})"
    if case.expect == "ok" and rc != 0:
        return "failed", f"rc={rc}"
    if case.expect in ("ok", "any"):
        problem = case.check() if case.check else None
        return ("failed", problem) if problem else ("pass", f"rc={rc}")
    if rc == 0:
        return "accepted", "exit 0"
    lines = err.splitlines()
    errs = [re.sub(re.escape(work) + r"/(\S*/)?", "", ln) for ln in lines if re.match(r"^(\S+: )?error:", ln)]
    long = [ln for ln in lines if len(ln) > MAX_LINE]
    if not errs:
        return "unclear", f"rc={rc}, no `error:` line"
    if long:
        return "unclear", f"rc={rc}, a stderr line of {len(long[0])} characters"
    if not any(w.lower() in ln.lower() for ln in errs for w in case.want):
        return "unclear", f"rc={rc}, the error line lacks {' or '.join(repr(w) for w in case.want)}"
    return "pass", f"rc={rc}"


def run_case(c, case):
    t0 = time.monotonic()
    try:
        if case.setup:
            case.setup()
        argv = [c.rlx] + c.resolve(case.argv)
    except Exception as e:  # a setup that fails is a problem of the suite, reported as such
        return "failed", f"setup: {e}", "", time.monotonic() - t0
    try:
        p = subprocess.Popen(argv, cwd=c.work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True, preexec_fn=limits(AS_LIMIT if case.cpu_only() else None))
    except OSError as e:  # e.g. the binary is being relinked
        return "failed", f"cannot start rlx: {e}", "", time.monotonic() - t0
    hung = False
    try:
        _, err = p.communicate(timeout=case.timeout)
    except subprocess.TimeoutExpired:
        hung = True
        os.killpg(p.pid, signal.SIGKILL)
        _, err = p.communicate()
    err = err.decode(errors="replace")
    return (*classify(case, p.returncode, err, hung, c.work), err, time.monotonic() - t0)


def first_line(err):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    ln = ([x for x in lines if "error:" in x] or lines or ["(no stderr)"])[0]
    return ln if len(ln) <= 240 else ln[:240] + f"... ({len(ln)} chars)"


def main():
    ap = argparse.ArgumentParser(description="hostile-input tests for the rlx command line (see the docstring)")
    ap.add_argument("--rlx", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin", "rlx"))
    ap.add_argument("--work", default="/tmp/rlx-hostile", help="made afresh on every run")
    ap.add_argument("-k", action="append", default=[], help="run the cases whose id contains this (repeatable)")
    ap.add_argument("-j", type=int, default=2, help="cases at a time")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("-v", action="store_true", help="print every case's stderr line")
    a = ap.parse_args()
    c = Ctx(os.path.abspath(a.rlx), os.path.abspath(a.work))
    cases = [case for fam in FAMILIES for case in fam(c)]
    ids = [case.id for case in cases]
    assert len(set(ids)) == len(ids), f"duplicate case ids: {sorted({i for i in ids if ids.count(i) > 1})}"
    marks = [(pat, reason) for pats, reason in XFAIL.items() for pat in pats.split()]
    unused = [pat for pat, _ in marks if not fnmatch.filter(ids, pat)]
    assert not unused, f"XFAIL patterns that match no case: {unused}"
    for case in cases:
        case.xfail = case.xfail or next((r for pat, r in marks if fnmatch.fnmatchcase(case.id, pat)), None)
    cases = [case for case in cases if not a.k or any(k in case.id for k in a.k)]
    if a.list:
        for case in cases:
            print(f"{case.id:56} {case.expect:5} {'xfail: ' + case.xfail if case.xfail else ''}")
        return 0
    if not os.access(c.rlx, os.X_OK):
        sys.exit(f"hostile_cli.py: {c.rlx} is not an executable")
    shutil.rmtree(c.work, ignore_errors=True)
    os.makedirs(c.work)
    t0 = time.monotonic()
    try:  # the shared inputs the selected cases name, made before the cases start
        c.resolve(sorted({m for case in cases for arg in case.argv for m in re.findall(r"@\w+", arg)}))
    except Exception as e:
        sys.exit(f"hostile_cli.py: making the shared inputs failed: {e}")
    counts, xfails, bad = {}, [], []
    with concurrent.futures.ThreadPoolExecutor(max(1, a.j)) as pool:
        futs = {pool.submit(run_case, c, case): case for case in cases}
        for fut in concurrent.futures.as_completed(futs):
            case = futs[fut]
            outcome, detail, err, dt = fut.result()
            label = ("XPASS" if outcome == "pass" else "XFAIL") if case.xfail else outcome.upper()
            if label == "XFAIL":
                xfails.append((case, outcome, detail, first_line(err)))
            elif label != "PASS":
                bad.append(case)
            key = f"xfail ({outcome})" if label == "XFAIL" else label.lower()
            counts[key] = counts.get(key, 0) + 1
            print(f"{label:8} {case.id:56} {dt:6.2f}s  {detail}" + (f"  [xfail: {case.xfail}]" if case.xfail else ""),
                  flush=True)
            if a.v or label not in ("PASS", "XFAIL"):
                print(f"         stderr: {first_line(err)}", flush=True)
    print(f"\n{len(cases)} cases in {time.monotonic() - t0:.0f} s")
    for key in sorted(counts):
        print(f"  {key:20} {counts[key]}")
    print(f"{len(xfails)} expected failures (xfail), each a known defect:")
    for case, outcome, detail, line in sorted(xfails, key=lambda x: x[0].id):
        print(f"  {case.id}: {outcome} ({detail}): {line}")
    if bad:
        print("NOT PASSING: " + ", ".join(case.id + (" (XPASS: remove its XFAIL entry)" if case.xfail else "")
                                        for case in bad))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
