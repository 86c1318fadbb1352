#!/usr/bin/env python3
"""The code's conventions as a test (CTest label `structure`): file and function size budgets,
no include that goes up the layer order (cmake/RlxLayers.cmake, docs/architecture.md) and none
relative to the file ("../"), and every repository path and C++ symbol that the documentation
quotes exists.
Usage: check_structure.py REPO_ROOT   (exit 1 with one line per problem)"""
import os
import re
import sys

FILE_LINES = 1500       # docs: "files under about 1,500 lines"
FUNCTION_LINES = 300    # a function (top-level or member, brace to brace) in src/ and tools/


def read_named_layers(root):
    """The layers of src/, bottom up, as cmake/RlxLayers.cmake lists them (the build's include
    paths enforce the same order): (name, [folder, ...]) pairs."""
    text = open(os.path.join(root, "cmake", "RlxLayers.cmake")).read()
    names = re.search(r"^set\(RLX_LAYERS ([^)]*)\)", text, re.M).group(1).split()
    return [(n, re.search(rf"^set\(RLX_LAYER_{n} ([^)]*)\)", text, re.M).group(1).split()) for n in names]


def read_layers(root):
    return [folders for _, folders in read_named_layers(root)]


LAYERS = []  # set in main()

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
            if inc.startswith("../"):
                # relative to the file, it would step around the layer's include path
                problems.append(f"src/{rel}:{n}: includes {inc}; name it from src/ instead")
                continue
            near = os.path.normpath(os.path.join(os.path.dirname(path), inc))
            target = near if os.path.exists(near) else os.path.join(root, "src", inc)
            if not os.path.exists(target):
                continue  # include/rlx/... (support) or a system header
            tfolder = os.path.relpath(target, os.path.join(root, "src")).split(os.sep)[0]
            theirs = layer_of(tfolder)
            if theirs is None or theirs <= mine:
                continue
            problems.append(f"src/{rel}:{n}: includes {inc} (src/{tfolder}), a layer above src/{folder}")


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
    LAYERS[:] = read_layers(root)
    check_sizes(root, problems)
    check_includes(root, problems)
    check_docs(root, problems)
    for p in problems:
        print(p)
    print(f"structure: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
