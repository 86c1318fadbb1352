#!/usr/bin/python3
"""MNIST training in PyTorch eager mode (Debian's torch 1.13, GEMMs through OpenBLAS): the
same architectures, initialization scale, loss and plain SGD as `rlx train mnist`. Peer of
rlx in bench/train_bench.sh; run with /usr/bin/python3.

Fair settings (docs/benchmarks.md, TOOLCHAINS.md): torch.set_num_threads(N) with
OMP_NUM_THREADS=N, OMP_WAIT_POLICY=PASSIVE (its OpenMP pool otherwise spins against
OpenBLAS's threads), and glibc's malloc kept from returning large blocks to the kernel
(MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_, set by the bench script). The optimizer is
torch.optim.SGD (foreach implementation); gradients are set to None between steps.

  /usr/bin/python3 scripts/peers/mnist_torch.py --arch mlp --epochs 3 --batch 128 --lr 0.05 --data DIR
"""
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnist_common as mc  # noqa: E402

args = mc.parse_args("torch")
mc.set_threads(args.threads)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)


def kaiming_(w, fan_in, gain=math.sqrt(2.0)):
    b = gain * math.sqrt(3.0 / fan_in)
    with torch.no_grad():
        w.uniform_(-b, b)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 128), nn.Linear(128, 10)
        kaiming_(self.fc1.weight, 784)
        kaiming_(self.fc2.weight, 128, 1.0)
        nn.init.zeros_(self.fc1.bias)
        nn.init.zeros_(self.fc2.bias)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class TinyConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2, self.fc = nn.Conv2d(1, 8, 3), nn.Conv2d(8, 16, 3), nn.Linear(400, 10)
        kaiming_(self.conv1.weight, 9)
        kaiming_(self.conv2.weight, 72)
        kaiming_(self.fc.weight, 400, 1.0)
        for b in (self.conv1.bias, self.conv2.bias, self.fc.bias):
            nn.init.zeros_(b)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x.view(-1, 1, 28, 28))), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def evaluate(model, x, y, batch=1000):
    correct, loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            logits = model(x[i:i + batch])
            loss += float(F.cross_entropy(logits, y[i:i + batch], reduction="sum"))
            correct += int((logits.argmax(1) == y[i:i + batch]).sum())
    return correct / len(x), loss / len(x)


def main():
    data = mc.load_args(args, np)
    x_train, y_train = (torch.from_numpy(a) for a in data["train"])
    x_test, y_test = (torch.from_numpy(a) for a in data["test"])
    model = MLP() if args.arch == "mlp" else TinyConv()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    rec = mc.Recorder(args, "torch")
    n = len(x_train)
    gen = torch.Generator().manual_seed(args.seed)
    for epoch in range(1, args.epochs + 1):
        model.train()
        t0 = time.perf_counter()
        perm = torch.randperm(n, generator=gen)
        total, steps, images = 0.0, 0, 0
        for i in range(0, n, args.batch):
            idx = perm[i:i + args.batch]
            xb, yb = x_train[idx], y_train[idx]
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += float(loss)
            steps += 1
            images += len(idx)
        seconds = time.perf_counter() - t0
        model.eval()
        acc, test_loss = evaluate(model, x_test, y_test)
        rec.epoch(epoch, total / steps, steps, images, seconds, acc, test_loss)


if __name__ == "__main__":
    main()
