# Errors: rlx.Error carrying exactly the C++ message (the program prints the same after "error: ").
import numpy as np
import pytest

import rlx
from conftest import run_rlx


def test_missing_file_message_equals_the_program():
    with pytest.raises(rlx.Error) as e:
        rlx.load("/nonexistent/model.onnx")
    assert e.value.code == "io_error"
    code, _, err = run_rlx("info", "/nonexistent/model.onnx")
    assert code != 0
    assert err.strip() == "error: " + str(e.value)


def test_shape_error_names_the_op():
    g = rlx.Graph()
    a, b = g.input("a", [2, 3]), g.input("b", [4, 5])
    with pytest.raises(rlx.Error) as e:
        a @ b
    assert e.value.code == "shape_error"
    assert "matmul" in str(e.value)


def test_unknown_device_and_policy():
    g = rlx.Graph()
    g.output(g.input("x", [2]) * 2.0)
    with pytest.raises(rlx.Error) as e:
        rlx.compile(g, device="no-such-device")
    assert "no-such-device" in str(e.value)
    with pytest.raises(rlx.Error):
        rlx.compile(g, policy="sometimes")


def test_bad_inputs():
    g = rlx.Graph()
    g.output(g.input("x", ["n", 2]) + 1.0)
    exe = rlx.compile(g)
    with pytest.raises(rlx.Error) as e:
        exe(np.zeros((3, 2), dtype=np.float64))
    assert e.value.code == "dtype_error" and "input 'x'" in str(e.value)
    with pytest.raises(rlx.Error) as e:
        exe()
    assert "no value for input" in str(e.value)
    with pytest.raises(rlx.Error) as e:
        exe(np.zeros((3, 5), dtype=np.float32))
    assert "x" in str(e.value)


def test_train_option_errors_are_the_programs():
    with pytest.raises(rlx.Error) as e:
        rlx.train("mnist", synthetic=True, lr=-1)
    code, _, err = run_rlx("train", "mnist", "--synthetic", "--lr", "-1")
    assert code != 0 and err.strip() == "error: " + str(e.value)


def test_error_is_an_exception_class():
    assert issubclass(rlx.Error, RuntimeError)


def test_illegal_nodes_raise_at_compile_with_the_report():
    g = rlx.Graph()
    x = g.input("x", [2, 3])
    g.output(rlx.softmax(x * 2.0, axis=1))
    report = rlx.explain(g, "null")
    assert not report.ok and report.counts["illegal"] > 0
    assert all(n.path == "illegal" and n.native_refused for n in report.nodes)
    with pytest.raises(rlx.Error) as e:
        rlx.compile(g, device="null")
    assert e.value.code == "illegal"
    assert "null" in str(e.value) and "softmax" in str(e.value)
