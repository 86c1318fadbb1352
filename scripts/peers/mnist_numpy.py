#!/usr/bin/python3
"""MNIST training in NumPy (OpenBLAS GEMMs), forward and backward written by hand the way
such baselines are written: im2col through stride tricks for the convolutions, reshape-max
pooling, col2im by adding the kernel taps back, in-place SGD. Peer of `rlx train mnist`
(same architectures, initialization scale, loss and plain SGD); run with /usr/bin/python3.

  /usr/bin/python3 scripts/peers/mnist_numpy.py --arch mlp --epochs 3 --batch 128 --lr 0.05 --data DIR
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mnist_common as mc  # noqa: E402

args = mc.parse_args("numpy")
mc.set_threads(args.threads)
import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import as_strided  # noqa: E402

rng = np.random.default_rng(args.seed)
f32 = np.float32


def kaiming(shape, fan_in, gain=np.sqrt(2.0)):
    b = gain * np.sqrt(3.0 / fan_in)
    return rng.uniform(-b, b, size=shape).astype(f32)


def softmax_xent(logits, y):
    """Mean cross-entropy and its gradient wrt the logits."""
    n = len(y)
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(s[:, 0]) - z[np.arange(n), y]))
    d = e / s
    d[np.arange(n), y] -= 1.0
    d /= n
    return loss, d


class MLP:
    def __init__(self):
        self.p = [kaiming((784, 128), 784), np.zeros(128, f32), kaiming((128, 10), 128, 1.0), np.zeros(10, f32)]

    def logits(self, x):
        w1, b1, w2, b2 = self.p
        h = x @ w1
        h += b1
        np.maximum(h, 0, out=h)
        return h, h @ w2 + b2

    def step(self, x, y, lr):
        w1, b1, w2, b2 = self.p
        h, logits = self.logits(x)
        loss, d = softmax_xent(logits, y)
        gw2 = h.T @ d
        gb2 = d.sum(axis=0)
        dh = d @ w2.T
        dh *= h > 0
        gw1 = x.T @ dh
        gb1 = dh.sum(axis=0)
        for p, g in zip(self.p, (gw1, gb1, gw2, gb2)):
            p -= lr * g
        return loss


def im2col(x, k):
    """x [N, C, H, W] -> cols [N, C*k*k, Ho*Wo] (valid convolution, stride 1)."""
    n, c, h, w = x.shape
    ho, wo = h - k + 1, w - k + 1
    s = x.strides
    win = as_strided(x, (n, c, k, k, ho, wo), (s[0], s[1], s[2], s[3], s[2], s[3]))
    return win.reshape(n, c * k * k, ho * wo)


def col2im(dcols, shape, k):
    n, c, h, w = shape
    ho, wo = h - k + 1, w - k + 1
    d = dcols.reshape(n, c, k, k, ho, wo)
    dx = np.zeros(shape, f32)
    for i in range(k):
        for j in range(k):
            dx[:, :, i:i + ho, j:j + wo] += d[:, :, i, j]
    return dx


def pool_fwd(z):
    """2x2 max pooling with floor: returns the pooled map and what the backward needs."""
    n, c, h, w = z.shape
    hp, wp = h // 2, w // 2
    zc = z[:, :, :2 * hp, :2 * wp].reshape(n, c, hp, 2, wp, 2)
    out = zc.max(axis=(3, 5))
    mask = zc == out[:, :, :, None, :, None]
    return out, mask


def pool_bwd(dout, mask, shape):
    n, c, h, w = shape
    hp, wp = dout.shape[2], dout.shape[3]
    d6 = mask * dout[:, :, :, None, :, None]
    dz = np.zeros(shape, f32)
    dz[:, :, :2 * hp, :2 * wp] = d6.reshape(n, c, 2 * hp, 2 * wp)
    return dz


class TinyConv:
    def __init__(self):
        self.p = [kaiming((8, 9), 9), np.zeros(8, f32), kaiming((16, 72), 72), np.zeros(16, f32),
                  kaiming((400, 10), 400, 1.0), np.zeros(10, f32)]

    def forward(self, x):
        w1, b1, w2, b2, w3, b3 = self.p
        n = len(x)
        x = x.reshape(n, 1, 28, 28)
        c1 = im2col(x, 3)                                   # [N, 9, 676]
        z1 = np.matmul(w1, c1) + b1[:, None]                # [N, 8, 676]
        np.maximum(z1, 0, out=z1)
        z1 = z1.reshape(n, 8, 26, 26)
        p1, m1 = pool_fwd(z1)                               # [N, 8, 13, 13]
        c2 = im2col(np.ascontiguousarray(p1), 3)            # [N, 72, 121]
        z2 = np.matmul(w2, c2) + b2[:, None]                # [N, 16, 121]
        np.maximum(z2, 0, out=z2)
        z2 = z2.reshape(n, 16, 11, 11)
        p2, m2 = pool_fwd(z2)                               # [N, 16, 5, 5]
        f = p2.reshape(n, 400)
        return (c1, z1, m1, p1, c2, z2, m2, f), f @ w3 + b3

    def logits(self, x):
        return None, self.forward(x)[1]

    def step(self, x, y, lr):
        w1, b1, w2, b2, w3, b3 = self.p
        (c1, z1, m1, p1, c2, z2, m2, f), logits = self.forward(x)
        loss, d = softmax_xent(logits, y)
        n = len(y)
        gw3 = f.T @ d
        gb3 = d.sum(axis=0)
        df = (d @ w3.T).reshape(n, 16, 5, 5)
        dz2 = pool_bwd(df, m2, z2.shape)
        dz2 *= z2 > 0
        dz2 = dz2.reshape(n, 16, 121)
        gw2 = np.tensordot(dz2, c2, axes=([0, 2], [0, 2]))  # [16, 72]
        gb2 = dz2.sum(axis=(0, 2))
        dp1 = col2im(np.matmul(w2.T, dz2), p1.shape, 3)     # [N, 8, 13, 13]
        dz1 = pool_bwd(dp1, m1, z1.shape)
        dz1 *= z1 > 0
        dz1 = dz1.reshape(n, 8, 676)
        gw1 = np.tensordot(dz1, c1, axes=([0, 2], [0, 2]))  # [8, 9]
        gb1 = dz1.sum(axis=(0, 2))
        for p, g in zip(self.p, (gw1, gb1, gw2, gb2, gw3, gb3)):
            p -= lr * g
        return loss


def evaluate(model, x, y, batch=1000):
    correct, loss = 0, 0.0
    for i in range(0, len(x), batch):
        _, logits = model.logits(x[i:i + batch])
        l, _ = softmax_xent(logits, y[i:i + batch])
        loss += l * len(logits)
        correct += int((logits.argmax(axis=1) == y[i:i + batch]).sum())
    return correct / len(x), loss / len(x)


def main():
    if args.momentum != 0.0:
        mc.fail("mnist_numpy.py implements plain SGD only (--momentum 0)")
    data = mc.load_args(args, np)
    x_train, y_train = data["train"]
    x_test, y_test = data["test"]
    model = MLP() if args.arch == "mlp" else TinyConv()
    rec = mc.Recorder(args, "numpy")
    n = len(x_train)
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        perm = rng.permutation(n)
        total, steps, images = 0.0, 0, 0
        for i in range(0, n, args.batch):
            idx = perm[i:i + args.batch]
            total += model.step(x_train[idx], y_train[idx], args.lr)
            steps += 1
            images += len(idx)
        seconds = time.perf_counter() - t0
        acc, test_loss = evaluate(model, x_test, y_test)
        rec.epoch(epoch, total / steps, steps, images, seconds, acc, test_loss)


if __name__ == "__main__":
    main()
