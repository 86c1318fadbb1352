# The examples in docs/python.md run as written (in order, in one namespace, in a folder where
# models/minilm and models/qwen3-tiny are the models `rlx make-model` made), and the C++
# example in docs/cpp-api.md is the consumer program the package test builds and runs.
import contextlib
import io
import os
import re

from conftest import SRC


def code_blocks(path, lang):
    with open(path) as f:
        return re.findall(r"```" + lang + r"\n(.*?)```", f.read(), re.S)


def test_python_md_examples_run(tmp_path, minilm, qwen3):
    qwen = qwen3  # the 2-layer qwen3-tiny of the other tests (same layout, less to write)
    os.makedirs(tmp_path / "models")
    os.symlink(minilm, tmp_path / "models" / "minilm")
    os.symlink(qwen, tmp_path / "models" / "qwen3-tiny")
    blocks = code_blocks(os.path.join(SRC, "docs", "python.md"), "python")
    assert len(blocks) >= 5
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        ns = {}
        out = io.StringIO()
        for i, block in enumerate(blocks):
            with contextlib.redirect_stdout(out):
                exec(compile(block, f"docs/python.md block {i}", "exec"), ns)
    finally:
        os.chdir(cwd)
    text = out.getvalue()
    assert "compile-ready: yes" in text
    assert "(2, 384)" in text
    assert "io_error - no such file or folder: no/such/model.onnx" in text


def test_cpp_api_md_quotes_the_consumer():
    blocks = code_blocks(os.path.join(SRC, "docs", "cpp-api.md"), "cpp")
    with open(os.path.join(SRC, "tests", "package", "consumer", "main.cpp")) as f:
        consumer = f.read()
    assert consumer in blocks, "docs/cpp-api.md must quote tests/package/consumer/main.cpp verbatim"
    with open(os.path.join(SRC, "tests", "package", "consumer", "CMakeLists.txt")) as f:
        cmake = f.read()
    assert cmake in code_blocks(os.path.join(SRC, "docs", "cpp-api.md"), "cmake")
