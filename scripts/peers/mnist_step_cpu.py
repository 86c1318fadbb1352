#!/usr/bin/python3
"""CPU time of one MNIST training step of the peers, for comparing kernels on a loaded machine:
the NumPy (OpenBLAS) and PyTorch steps of mnist_numpy.py / mnist_torch.py on one thread, timed
with the process CPU clock (time.process_time), on random data held in memory (no batch
gathering). The rlx counterpart is `RLX_NUM_THREADS=1 rlx_bench_train_step --cpu-time`.

  /usr/bin/python3 scripts/peers/mnist_step_cpu.py --arch mlp --batch 128 [--steps 100]
"""
import argparse
import os
import sys
import time

cli = argparse.ArgumentParser()
cli.add_argument("--arch", choices=["mlp", "tinyconv"], default="mlp")
cli.add_argument("--batch", type=int, default=128)
cli.add_argument("--steps", type=int, default=100)
cli.add_argument("--frameworks", default="numpy,torch")
opts = cli.parse_args()
for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[v] = "1"
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.argv = [sys.argv[0], "--arch", opts.arch, "--data", "-", "--threads", "1"]  # what the peers parse


def timed(step, steps):
    for _ in range(5):
        step()
    best = []
    for _ in range(5):
        t0 = time.process_time()
        for _ in range(steps):
            step()
        best.append((time.process_time() - t0) / steps)
    best.sort()
    return best[2], best[0]


def main():
    import numpy as np
    rng = np.random.default_rng(7)
    x = rng.random((opts.batch, 784), dtype=np.float32)
    y = (np.arange(opts.batch) % 10).astype(np.int64)
    for fw in opts.frameworks.split(","):
        if fw == "numpy":
            import mnist_numpy as peer
            model = peer.MLP() if opts.arch == "mlp" else peer.TinyConv()
            step = lambda: model.step(x, y, 0.01)  # noqa: E731
        else:
            import mnist_torch as peer
            import torch
            import torch.nn.functional as F
            torch.set_num_threads(1)
            model = peer.MLP() if opts.arch == "mlp" else peer.TinyConv()
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            xt, yt = torch.from_numpy(x), torch.from_numpy(y)

            def step():
                loss = F.cross_entropy(model(xt), yt)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        med, best = timed(step, opts.steps)
        print(f"[cpu time] {fw} {opts.arch} batch {opts.batch}: step {med * 1e6:.1f} us (best {best * 1e6:.1f}), "
              f"{opts.batch / med:.0f} images/s (best {opts.batch / best:.0f})", flush=True)


main()
