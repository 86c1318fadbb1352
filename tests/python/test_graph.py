# The lazy tensor API: build graphs, compile, run with NumPy, the dispatch report, DLPack.
import numpy as np
import pytest

import rlx


def rng():
    return np.random.default_rng(12345)


def test_devices_lists_cpu_available():
    devs = {d.name: d for d in rlx.devices()}
    assert devs["cpu"].available
    assert "f32" in devs["cpu"].dtypes
    for d in devs.values():
        assert d.available or d.reason  # an unavailable device says why


def test_mlp_matches_numpy_with_symbolic_batch():
    r = rng()
    w1 = r.standard_normal((8, 16)).astype(np.float32)
    b1 = r.standard_normal(16).astype(np.float32)
    w2 = r.standard_normal((16, 5)).astype(np.float32)
    g = rlx.Graph("mlp")
    x = g.input("x", ["batch", 8])
    assert x.shape == ("batch", 8) and x.dtype == "f32"
    h = (x @ g.param("w1", w1) + g.param("b1", b1)).relu()
    y = rlx.softmax(h @ g.param("w2", w2), axis=1)
    g.output(y)
    exe = rlx.compile(g, device="cpu")
    for batch in (1, 7):
        xv = r.standard_normal((batch, 8)).astype(np.float32)
        got = exe(xv)
        hv = np.maximum(xv @ w1 + b1, 0) @ w2
        want = np.exp(hv - hv.max(1, keepdims=True))
        want /= want.sum(1, keepdims=True)
        assert got.shape == (batch, 5) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    rep = exe.report
    assert rep.ok and rep.device == "cpu" and rep.bindings == {"batch": 7}
    assert sum(rep.counts.values()) == len(rep.nodes) > 0
    assert {n.path for n in rep.nodes} <= {"native", "common-ir", "rewritten"}
    assert "compile-ready: yes" in rep.summary
    assert rep.to_json()["device"] == "cpu"


def test_operators_and_reductions():
    r = rng()
    a = r.standard_normal((3, 4)).astype(np.float32)
    b = r.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    g = rlx.Graph()
    x, y = g.input("a", [3, 4]), g.input("b", [3, 4])
    c = r.standard_normal(4).astype(np.float32)
    g.output(x + y, x - y, x * y, x / y, -x, 2.0 * x - 1, 1 / y, x.sum(), x.mean(axis=1), x.max(axis=0, keepdims=True),
             x.T, x.reshape([4, 3]), rlx.exp(x), rlx.tanh(x), rlx.sigmoid(x), x * np.float32(0.5), x + c, x ** 2)
    outs = rlx.compile(g).run(a, b=b)
    want = [a + b, a - b, a * b, a / b, -a, 2 * a - 1, 1 / b, a.sum(), a.mean(1), a.max(0, keepdims=True), a.T,
            a.reshape(4, 3), np.exp(a), np.tanh(a), 1 / (1 + np.exp(-a)), a * 0.5, a + c, a ** 2]
    assert len(outs) == len(want)
    for got, w in zip(outs, want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


def test_generic_op_and_text_ir():
    g = rlx.Graph("t")
    x = g.input("x", [2, 3])
    g.output(rlx.op("softmax", [x], axis=0))
    assert "softmax" in g.text()
    g2 = rlx.parse(g.text())
    xv = rng().standard_normal((2, 3)).astype(np.float32)
    a = rlx.compile(g)(xv)
    b = rlx.compile(g2)(xv)
    np.testing.assert_allclose(a, b)
    np.testing.assert_allclose(a.sum(0), np.ones(3), rtol=1e-6)


def test_policy_changes_the_report():
    g = rlx.Graph()
    x = g.input("x", [4, 8])
    g.output(rlx.softmax(x @ g.param("w", rng().standard_normal((8, 8)).astype(np.float32))))
    common = rlx.explain(g, "cpu", "force-common")
    assert common.ok
    assert all(n.path != "native" for n in common.nodes)
    assert rlx.compile(g, policy="force-common").report.policy == common.policy


def test_inputs_are_borrowed_and_outputs_export_dlpack():
    torch = pytest.importorskip("torch")
    g = rlx.Graph()
    x = g.input("x", [64, 32])
    g.output(x * 3.0)
    exe = rlx.compile(g)
    xv = rng().standard_normal((64, 32)).astype(np.float32)
    y = exe(xv)
    assert y.flags.writeable and y.flags.c_contiguous
    t = torch.from_dlpack(y)  # DLPack, no copy: the tensor shares the array's memory
    assert t.data_ptr() == y.ctypes.data
    np.testing.assert_allclose(t.numpy(), xv * 3.0, rtol=1e-6)
    # contiguous aligned inputs are borrowed; others are copied to a contiguous one first
    assert rlx._rlx._shares_memory(xv, "f32")
    assert not rlx._rlx._shares_memory(np.asfortranarray(xv), "f32")
    assert not rlx._rlx._shares_memory(xv[:, ::2], "f32")
    xt = np.asfortranarray(xv)
    np.testing.assert_allclose(exe(xt), xv * 3.0, rtol=1e-6)
    # lists are converted in the input's dtype
    np.testing.assert_allclose(exe(xv.tolist()), xv * 3.0, rtol=1e-6)


def test_integer_and_f64_inputs():
    g = rlx.Graph()
    a = g.input("a", [5], "i32")
    b = g.input("b", [5], "float64")
    g.output(a + a, b * b)
    av = np.arange(5, dtype=np.int32) - 2
    bv = rng().standard_normal(5)
    o1, o2 = rlx.compile(g)(av, bv)
    assert o1.dtype == np.int32 and o2.dtype == np.float64
    np.testing.assert_array_equal(o1, av + av)
    np.testing.assert_allclose(o2, bv * bv)


def test_indexing():
    a = rng().standard_normal((4, 6, 3)).astype(np.float32)
    g = rlx.Graph()
    x = g.input("x", [4, 6, 3])
    idx = [(1,), (slice(1, 3),), (slice(None), slice(2, None, 2)), (Ellipsis, -1), (-1, slice(None, -2), 0),
           (slice(3, 1),)]
    g.output(*[x[i] for i in idx])
    outs = rlx.compile(g).run(a)
    for got, i in zip(outs, idx):
        assert got.shape == a[i].shape
        np.testing.assert_array_equal(got, a[i])
    with pytest.raises(rlx.Error):
        x[4]
    with pytest.raises(rlx.Error):
        x[::-1]


def test_runs_from_several_threads():
    import threading
    g = rlx.Graph()
    x = g.input("x", ["n", 16])
    g.output(rlx.tanh(x @ g.param("w", rng().standard_normal((16, 16)).astype(np.float32))))
    exe = rlx.compile(g)
    w = g.weights["w"]
    errors = []

    def work(seed):
        r = np.random.default_rng(seed)
        for _ in range(20):
            xv = r.standard_normal((int(r.integers(1, 9)), 16)).astype(np.float32)
            if not np.allclose(exe(xv), np.tanh(xv @ w), rtol=1e-4, atol=1e-5):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
