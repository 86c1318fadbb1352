"""Shared pieces of the MNIST training peers (mnist_numpy.py, mnist_torch.py): arguments,
IDX reading, the epoch loop's timing and the JSON records, kept identical to `rlx train`.

Images/s counts the images trained on (steps x batch; the last, partial batch by its size) over the training wall time of an epoch (shuffling, batch
gathering, forward, backward and update), evaluation excluded, as rlx reports it.
"""
import argparse
import gzip
import json
import os
import struct
import sys


def parse_args(framework):
    p = argparse.ArgumentParser(description=f"MNIST training with {framework} (peer of `rlx train mnist`)")
    p.add_argument("--arch", choices=["mlp", "tinyconv"], default="mlp")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--data", required=True, help="folder with (t10k|train)-(images-idx3|labels-idx1)-ubyte[.gz]")
    p.add_argument("--train-size", type=int, help="train on the first N training images only")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", help="write one record per epoch to this file")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args()


def set_threads(n):
    """Must run before numpy/torch are imported: OpenBLAS and OpenMP read these at load."""
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = str(n)


def _open(path):
    if os.path.exists(path):
        return open(path, "rb")
    if os.path.exists(path + ".gz"):
        return gzip.open(path + ".gz", "rb")
    raise SystemExit(f"missing {path}[.gz]")


def read_idx(path, np):
    with _open(path) as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 8:
        raise SystemExit(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    return arr.reshape(dims)


def load(folder, np):
    out = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        x = read_idx(os.path.join(folder, f"{prefix}-images-idx3-ubyte"), np)
        y = read_idx(os.path.join(folder, f"{prefix}-labels-idx1-ubyte"), np)
        out[split] = (x.reshape(len(x), -1).astype(np.float32) / 255.0, y.astype(np.int64))
    return out


def load_args(args, np):
    """The data set named by the arguments, cut to --train-size."""
    data = load(args.data, np)
    if args.train_size:
        x, y = data["train"]
        data["train"] = (x[:args.train_size], y[:args.train_size])
    return data


class Recorder:
    def __init__(self, args, framework):
        self.args, self.framework, self.records = args, framework, []

    def epoch(self, epoch, loss, steps, images, seconds, test_accuracy, test_loss):
        ips = images / seconds if seconds > 0 else 0.0
        rec = {"framework": self.framework, "arch": self.args.arch, "epoch": epoch, "batch": self.args.batch,
               "steps": steps, "images": images, "loss": loss, "train_seconds": seconds, "images_per_s": ips,
               "test_accuracy": test_accuracy, "test_loss": test_loss}
        self.records.append(rec)
        if not self.args.quiet:
            print(f"{self.framework} {self.args.arch} epoch {epoch}: loss {loss:.4f}, {ips:,.0f} images/s, "
                  f"test accuracy {100 * test_accuracy:.2f}%", flush=True)
        if self.args.json:
            with open(self.args.json, "w") as f:
                json.dump(self.records, f, indent=1)


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)
