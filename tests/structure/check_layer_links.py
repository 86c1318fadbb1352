#!/usr/bin/env python3
"""The layer order at link level (CTest label `structure`): no object of a layer refers to a
symbol that only a layer above it defines. The include paths of the build (cmake/RlxLayers.cmake)
already stop an upward #include of a src/ header; this catches an upward call through a public
header (include/rlx/), such as a pass calling Model::compile, which the runtime layer defines.
Usage: check_layer_links.py BUILD_DIR REPO_ROOT   (exit 1 with one line per problem)"""
import glob
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_structure import read_named_layers  # noqa: E402


def symbols(objects, undefined):
    """{symbol: [object, ...]} of the global symbols the objects define (or leave undefined)."""
    out = {}
    flag = "--undefined-only" if undefined else "--defined-only"
    for i in range(0, len(objects), 200):
        text = subprocess.run(["nm", "-g", "-A", flag] + objects[i:i + 200], check=True, capture_output=True,
                              text=True).stdout
        for line in text.splitlines():
            path, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) < 2 or (undefined and parts[-2] != "U"):
                continue  # a weak undefined reference (w/v) needs no definition
            out.setdefault(parts[-1], []).append(path)
    return out


def demangle(sym):
    r = subprocess.run(["c++filt", sym], capture_output=True, text=True)
    return r.stdout.strip() or sym


def main():
    build, root = sys.argv[1], sys.argv[2]
    layers = read_named_layers(root)
    objects = []
    for name, _ in layers:
        objs = sorted(glob.glob(os.path.join(build, "CMakeFiles", f"rlx_layer_{name}.dir", "**", "*.o"), recursive=True))
        if not objs:
            print(f"check_layer_links: no objects of layer {name} under {build}; build rlx_core first")
            return 1
        objects.append(objs)
    lowest_definer = {}
    for i, objs in enumerate(objects):
        for sym in symbols(objs, undefined=False):
            lowest_definer.setdefault(sym, i)
    problems = []
    for i, objs in enumerate(objects):
        for sym, users in sorted(symbols(objs, undefined=True).items()):
            j = lowest_definer.get(sym)
            if j is not None and j > i:
                user = os.path.relpath(users[0], os.path.join(build, "CMakeFiles", f"rlx_layer_{layers[i][0]}.dir"))
                problems.append(f"{user.removesuffix('.o')} (layer {layers[i][0]}) calls {demangle(sym)}, "
                                f"which only layer {layers[j][0]} defines")
    for p in problems:
        print(p)
    print(f"layer links: {sum(len(o) for o in objects)} objects in {len(layers)} layers, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
