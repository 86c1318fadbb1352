#!/usr/bin/python3
"""Writes ONNX's backend node tests (from Debian's python3-onnx) into OUT_DIR, offline.

Usage: /usr/bin/python3 tests/onnx/generate_node_tests.py OUT_DIR
onnx 1.12's generators use NumPy aliases removed in NumPy 1.24 (np.float, np.bool, ...);
they are restored before the generators run. Writes OUT_DIR/stamp when done.
"""
import os
import runpy
import shutil
import sys

import numpy as np

for name, value in (("float", float), ("int", int), ("bool", bool), ("object", object),
                    ("complex", complex), ("str", str)):
    if not hasattr(np, name):
        setattr(np, name, value)

out = sys.argv[1]
if os.path.exists(out):
    shutil.rmtree(out)
sys.argv = ["onnx.backend.test.cmd_tools", "generate-data", "-o", out]
runpy.run_module("onnx.backend.test.cmd_tools", run_name="__main__")
with open(os.path.join(out, "stamp"), "w") as f:
    import onnx
    f.write("onnx %s\n" % onnx.__version__)
