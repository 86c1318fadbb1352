#!/usr/bin/python3
"""Converts the 8x8 handwritten digits that ship with scikit-learn (Debian python3-sklearn:
sklearn/datasets/data/digits.csv.gz, 1797 images of 16 grey levels, UCI "optdigits") into the
four MNIST IDX files that `rlx train mnist --data DIR` reads, so that training can be checked
on real handwriting offline.

  /usr/bin/python3 scripts/digits-to-idx.py OUT_DIR [--csv PATH] [--test-fraction 0.2]
                                            [--seed 0] [--gzip]

What it writes (MNIST's conventions, so the 784-input MLP and the tiny CNN take it unchanged):
  - each 8x8 image is enlarged 3x by pixel replication to 24x24 and centred in a 28x28 frame
    with a 2-pixel border (MNIST centres its 20x20 digits in 28x28 the same way);
  - grey levels 0..16 are scaled to bytes 0..255 (round(v * 255 / 16));
  - a seeded permutation (Python's random.Random(seed), the same on every platform) splits the
    set into a training and a test part, the test part being --test-fraction of it (default
    20%: 1438 training and 359 test images);
  - OUT_DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte, with ".gz" appended under --gzip.

It reads the CSV with the standard library only (no NumPy or scikit-learn import), so any
Python 3 works once the file is there. Exit status 1 with a message when the file is missing
or malformed.
"""
import argparse
import gzip
import os
import random
import struct
import sys

DEFAULT_CSV = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
SIDE, SCALE, BORDER = 28, 3, 2


def fail(msg):
    print(f"digits-to-idx: {msg}", file=sys.stderr)
    sys.exit(1)


def find_csv(path):
    if path:
        return path
    if os.path.exists(DEFAULT_CSV):
        return DEFAULT_CSV
    try:  # another install location: ask the package, if it imports
        import sklearn.datasets  # noqa: F401  (only its folder is used)
        p = os.path.join(os.path.dirname(sklearn.datasets.__file__), "data", "digits.csv.gz")
        if os.path.exists(p):
            return p
    except ImportError:
        pass
    fail(f"{DEFAULT_CSV} not found: install python3-sklearn (scripts/install-deps.sh) or pass --csv PATH")


def read_digits(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError as e:
        fail(f"{path}: {e}")
    images, labels = [], []
    for n, ln in enumerate(lines, 1):
        try:
            vals = [int(float(v)) for v in ln.split(",")]
        except ValueError:
            fail(f"{path}:{n}: not a row of numbers")
        if len(vals) != 65:
            fail(f"{path}:{n}: expected 64 pixels and a label, got {len(vals)} values")
        px, label = vals[:64], vals[64]
        if not all(0 <= v <= 16 for v in px) or not 0 <= label <= 9:
            fail(f"{path}:{n}: pixel outside 0..16 or label outside 0..9")
        images.append(px)
        labels.append(label)
    if not images:
        fail(f"{path}: no rows")
    return images, labels


def enlarge(px):
    """8x8 grey levels 0..16 -> 28x28 bytes: 3x pixel replication, 2-pixel border."""
    out = bytearray(SIDE * SIDE)
    for r in range(8):
        for c in range(8):
            v = (px[r * 8 + c] * 255 + 8) // 16
            for dr in range(SCALE):
                row = (BORDER + r * SCALE + dr) * SIDE + BORDER + c * SCALE
                out[row:row + SCALE] = bytes([v]) * SCALE
    return bytes(out)


def write_idx(path, dims, payload, compress):
    data = struct.pack(">BBBB", 0, 0, 0x08, len(dims)) + struct.pack(">" + "I" * len(dims), *dims) + payload
    if compress:
        with gzip.open(path + ".gz", "wb") as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)


def main():
    p = argparse.ArgumentParser(description="scikit-learn's 8x8 digits as MNIST IDX files (28x28)")
    p.add_argument("out_dir")
    p.add_argument("--csv", help=f"digits.csv.gz (default {DEFAULT_CSV})")
    p.add_argument("--test-fraction", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gzip", action="store_true", help="write .gz files")
    a = p.parse_args()
    if not 0.0 < a.test_fraction < 1.0:
        fail("--test-fraction must be between 0 and 1")
    images, labels = read_digits(find_csv(a.csv))
    order = list(range(len(images)))
    random.Random(a.seed).shuffle(order)
    n_test = max(1, round(len(order) * a.test_fraction))
    splits = {"t10k": order[:n_test], "train": order[n_test:]}
    os.makedirs(a.out_dir, exist_ok=True)
    for prefix, idx in splits.items():
        write_idx(os.path.join(a.out_dir, f"{prefix}-images-idx3-ubyte"), (len(idx), SIDE, SIDE),
                  b"".join(enlarge(images[i]) for i in idx), a.gzip)
        write_idx(os.path.join(a.out_dir, f"{prefix}-labels-idx1-ubyte"), (len(idx),),
                  bytes(labels[i] for i in idx), a.gzip)
    print(f"digits-to-idx: {len(splits['train'])} training and {len(splits['t10k'])} test images (28x28) "
          f"written to {a.out_dir}")


if __name__ == "__main__":
    main()
