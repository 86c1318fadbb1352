# An ONNX model (written here with Debian's python3-onnx) run through rlx.load and compared
# with a NumPy reference of the same computation; and with ONNX Runtime (Node, build/npm) when
# it is installed.
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import rlx
from conftest import BIN, SRC

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def make_model(path, w, b):
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
        helper.make_node("Add", ["h", "b"], ["hb"], name="bias"),
        helper.make_node("Relu", ["hb"], ["r"], name="act"),
        helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def reference(x, w, b):
    r = np.maximum(x @ w + b, 0)
    e = np.exp(r - r.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def onnxruntime_node(path, x):
    """y from ONNX Runtime for Node (build/npm, installed by scripts/install-npm.sh), or None."""
    found = [d for d in (os.path.join(BIN, "npm"), os.path.join(SRC, "build", "npm"))
             if os.path.isdir(os.path.join(d, "node_modules", "onnxruntime-node"))]
    if not found or not shutil.which("node"):
        return None
    npm = found[0]
    script = ("const ort=require('onnxruntime-node');(async()=>{const s=await ort.InferenceSession.create(process.argv[1]);"
              "const x=JSON.parse(process.argv[2]);const t=new ort.Tensor('float32',Float32Array.from(x.flat()),[x.length,6]);"
              "const r=await s.run({x:t});console.log(JSON.stringify(Array.from(r.y.data)));})()")
    p = subprocess.run(["node", "-e", script, path, json.dumps(x.tolist())], capture_output=True, text=True,
                       cwd=npm, timeout=120)
    if p.returncode != 0:
        return None
    return np.array(json.loads(p.stdout), dtype=np.float32).reshape(x.shape[0], 4)


def test_onnx_model_matches_reference(tmp_path):
    r = np.random.default_rng(11)
    w = r.standard_normal((6, 4)).astype(np.float32)
    b = r.standard_normal(4).astype(np.float32)
    path = str(tmp_path / "dense.onnx")
    make_model(path, w, b)
    g = rlx.load(path)
    assert g.format == "onnx"
    assert [t.name for t in g.inputs] == ["x"]
    np.testing.assert_array_equal(g.weights["w"], w)
    exe = rlx.compile(g, device="cpu")
    x = r.standard_normal((3, 6)).astype(np.float32)
    y = exe(x=x)
    np.testing.assert_allclose(y, reference(x, w, b), rtol=1e-5, atol=1e-7)
    ort = onnxruntime_node(path, x)
    if ort is None:
        print("ONNX Runtime for Node not installed (scripts/install-npm.sh build/npm): compared with NumPy only")
    else:
        np.testing.assert_allclose(y, ort, rtol=1e-5, atol=1e-7)
    # dims bound at import make a static graph
    gs = rlx.load(path, dims={"n": 3})
    assert gs.inputs[0].shape == (3, 6)
    np.testing.assert_allclose(rlx.compile(gs)(x), y, rtol=1e-6)
