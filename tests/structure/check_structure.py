#!/usr/bin/env python3
"""The code's conventions as a test (CTest label `structure`): file and function size budgets,
no include that goes up the layer order of docs/architecture.md beyond the ones recorded
below, and every repository path and C++ symbol that the documentation quotes exists.
Usage: check_structure.py REPO_ROOT   (exit 1 with one line per problem)"""
import os
import re
import sys

FILE_LINES = 1500       # docs: "files under about 1,500 lines"
FUNCTION_LINES = 300    # a function (top-level or member, brace to brace) in src/ and tools/

# The layer of each src/ folder, bottom up (docs/architecture.md, "Layers"); a folder may
# include its own layer and those below.
LAYERS = [
    ["support"],
    ["ir"],
    ["dispatch", "passes", "codegen"],
    ["hal"],
    ["kernels"],
    ["backends"],
    ["runtime"],
    ["io", "models", "train", "quant", "dist", "targets", "linalg", "sparse", "splat"],
]
# Upward includes that exist today, each to be removed by moving the piece to its layer
# (issue "One device layer ...", part 5). A new one fails this test; one that disappears
# must be removed from here too.
KNOWN_UPWARD = {
    ("passes", "backends"),    # the folding evaluator runs the reference interpreter
    ("kernels", "splat"),      # the splatting kernel text shares the cpu kernels' constants
    ("backends", "dist"),      # cpu and ref run the collectives
    ("backends", "linalg"),    # cpu and ref run the LAPACK factorizations
    ("backends", "quant"),     # cpu runs quantized products
    ("backends", "sparse"),    # cpu runs the sparse kernels
    ("backends", "splat"),     # cpu and ref run the splatting kernels
}

SOURCE_EXT = (".h", ".cpp")


def layer_of(folder):
    for i, names in enumerate(LAYERS):
        if folder in names:
            return i
    return None


def src_files(root, top):
    for base, _, files in os.walk(os.path.join(root, top)):
        for f in sorted(files):
            if f.endswith(SOURCE_EXT):
                yield os.path.join(base, f)


def check_sizes(root, problems):
    for top in ("src", "include", "tools", "tests", "python", "bench", "fuzz"):
        for path in src_files(root, top):
            lines = open(path, errors="replace").read().split("\n")
            rel = os.path.relpath(path, root)
            if len(lines) > FILE_LINES:
                problems.append(f"{rel}: {len(lines)} lines, over the budget of {FILE_LINES}")
            if top not in ("src", "tools"):
                continue
            # a function body: a line ending in '{' that opens at the file's or a class's
            # indentation after a ')' (a definition), to its closing '}' at the same indentation
            for i, line in enumerate(lines):
                m = re.match(r"^( {0,2})\S.*\)\s*(const)?\s*(override)?\s*(noexcept)?\s*(->\s*[\w:<>, ]+)?\s*\{\s*$", line)
                if not m or line.lstrip().startswith(("if ", "for ", "while ", "switch ", "} else", "else", "return", "#")):
                    continue
                indent = m.group(1)
                for j in range(i + 1, len(lines)):
                    if lines[j].startswith(indent + "}") and not lines[j].startswith(indent + " "):
                        if j - i > FUNCTION_LINES:
                            problems.append(f"{rel}:{i + 1}: a function of {j - i} lines, over the budget of {FUNCTION_LINES}")
                        break


def check_includes(root, problems):
    found = set()
    for path in src_files(root, "src"):
        rel = os.path.relpath(path, os.path.join(root, "src"))
        folder = rel.split(os.sep)[0]
        mine = layer_of(folder)
        if mine is None:
            problems.append(f"src/{rel}: src/{folder} is in no layer of docs/architecture.md")
            continue
        for n, line in enumerate(open(path, errors="replace"), 1):
            m = re.match(r'\s*#include "([^"]+)"', line)
            if not m:
                continue
            inc = m.group(1)
            near = os.path.normpath(os.path.join(os.path.dirname(path), inc))
            target = near if os.path.exists(near) else os.path.join(root, "src", inc)
            if not os.path.exists(target):
                continue  # include/rlx/... (support) or a system header
            tfolder = os.path.relpath(target, os.path.join(root, "src")).split(os.sep)[0]
            theirs = layer_of(tfolder)
            if theirs is None or theirs <= mine:
                continue
            found.add((folder, tfolder))
            if (folder, tfolder) not in KNOWN_UPWARD:
                problems.append(f"src/{rel}:{n}: includes {inc} (src/{tfolder}), a layer above src/{folder}")
    for edge in sorted(KNOWN_UPWARD - found):
        problems.append(f"check_structure.py: the upward include {edge[0]} -> {edge[1]} is gone; remove it from KNOWN_UPWARD")


PATH_RE = re.compile(r"`((?:src|include|tests|tools|scripts|bench|docs|cmake|python|fuzz|examples|\.ci)/[^`\s]*)`")
SYMBOL_RE = re.compile(r"`((?:[a-z_]+::)+[A-Za-z_]\w*)(?:\([^`]*\))?`")


def expand(path):
    """`a/{b,c}.h` -> a/b.h, a/c.h; trailing '/' allowed; `*` as a glob."""
    m = re.search(r"\{([^}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",") for p in expand(path[: m.start()] + alt + path[m.end():])]


def check_docs(root, problems):
    import glob
    corpus = None
    docs = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    for doc in docs:
        text = open(doc, errors="replace").read()
        rel = os.path.relpath(doc, root)
        for m in PATH_RE.finditer(text):
            raw = m.group(1).rstrip(".,:;")
            if "<" in raw or "$" in raw or "..." in raw:
                continue  # a pattern: src/backends/<name>/
            for p in expand(raw.split(" ")[0]):
                p = p.split(":")[0].split("#")[0]
                if not glob.glob(os.path.join(root, p)):
                    problems.append(f"{rel}: `{raw}` does not exist")
        for m in SYMBOL_RE.finditer(text):
            sym = m.group(1)
            if sym.startswith(("std::", "onnx::", "torch::", "testing::")):
                continue
            if corpus is None:
                corpus = "\n".join(open(p, errors="replace").read()
                                   for top in ("src", "include", "tools", "tests", "python")
                                   for p in src_files(root, top))
            name = sym.split("::")[-1]
            if not re.search(r"\b" + re.escape(name) + r"\b", corpus):
                problems.append(f"{rel}: `{sym}` names nothing in the sources")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    problems = []
    check_sizes(root, problems)
    check_includes(root, problems)
    check_docs(root, problems)
    for p in problems:
        print(p)
    print(f"structure: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
