# pytest setup for the rlx Python tests: the module from the build folder, the rlx program,
# and models made with `rlx make-model` into the build folder (made once, reused).
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

BIN = os.environ.get("RLX_BINARY_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
SRC = os.environ.get("RLX_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(BIN, "python"))


def rlx_program():
    return os.path.join(BIN, "bin", "rlx")


def run_rlx(*args):
    """Runs the rlx program; returns (exit code, stdout, stderr)."""
    p = subprocess.run([rlx_program(), *args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def made_model(name, *args):
    """A folder made by `rlx make-model ARGS` under <build>/python-models/NAME (made once;
    built in a temporary folder and renamed, so parallel tests never see half a model)."""
    root = os.path.join(BIN, "python-models")
    path = os.path.join(root, name)
    if os.path.isdir(path):
        return path
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=root, prefix=name + ".tmp")
    code, out, err = run_rlx("make-model", *args, "--out", tmp)
    assert code == 0, err
    try:
        os.rename(tmp, path)
    except OSError:  # another test made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return path


@pytest.fixture(scope="session")
def minilm():
    return made_model("minilm", "minilm", "--seed", "3")


@pytest.fixture(scope="session")
def qwen3():
    return made_model("qwen3-tiny-2l", "qwen3-tiny", "--layers", "2", "--seed", "5")
