"""rlx: a tensor compiler and runtime, from Python.

Build a graph with lazy tensors, compile it for a device, run it with NumPy arrays::

    import numpy as np, rlx
    g = rlx.Graph("mlp")
    x = g.input("x", ["batch", 4])
    w = g.param("w", np.random.rand(4, 3).astype(np.float32))
    g.output(rlx.softmax(rlx.relu(x @ w), axis=1))
    exe = rlx.compile(g, device="cpu")
    y = exe(np.random.rand(2, 4).astype(np.float32))
    print(exe.report.summary)

See docs/python.md for models (rlx.load), gradients (rlx.grad), embed, generate and train.
Errors raise rlx.Error with the C++ message; e.code names the kind of error.
"""

import builtins as _builtins

from . import _rlx
from ._rlx import (  # noqa: F401
    DeviceInfo, DispatchReport, Error, Executable, GenerateResult, Graph, NodeDecision, Tensor,
    TrainResult, abs, add, argmax, cast, compile, concat, default_device, devices, div, embed, erf,
    exp, explain, gelu, generate, gradients, layer_norm, load, log, log_softmax, matmul, max,
    maximum, mean, minimum, mul, neg, op, parse, pow, reciprocal, relu, reshape, rms_norm, rsqrt,
    sigmoid, silu, softmax, sqrt, sub, sum, tanh, transpose, where,
)

__all__ = [name for name in dir(_rlx) if not name.startswith("_")] + ["grad", "value_and_grad", "train"]


# Methods on lazy tensors for the functions that take a tensor first (x.relu(), x.sum(1), ...).
def _as_method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


for _name in ("abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "erf", "relu",
              "silu", "gelu", "softmax", "log_softmax", "sum", "mean", "max", "argmax", "cast"):
    setattr(Tensor, _name, _as_method(getattr(_rlx, _name)))
del _name


def _getitem(self, index):
    """x[1], x[:, 2:5], x[..., ::2]: ints and slices with positive steps on static dims, as
    slice (and squeeze for ints) nodes."""
    if not isinstance(index, tuple):
        index = (index,)
    if _builtins.sum(i is Ellipsis for i in index) > 1:
        raise Error("an index can hold one ... at most")
    if Ellipsis in index:
        k = index.index(Ellipsis)
        index = index[:k] + (slice(None),) * (self.ndim - len(index) + 1) + index[k + 1:]
    if len(index) > self.ndim:
        raise Error(f"too many indices ({len(index)}) for a tensor of rank {self.ndim}")
    starts, ends, axes, steps, drop = [], [], [], [], []
    for axis, i in enumerate(index):
        if isinstance(i, slice) and i == slice(None):
            continue
        n = self.shape[axis]
        if not isinstance(n, int):
            raise Error(f"indexing axis {axis} needs a static size, it is {n!r}")
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step <= 0:
                raise Error("slices with a negative or zero step are not supported")
            stop = _builtins.max(stop, start)
        elif isinstance(i, int):
            if not -n <= i < n:
                raise Error(f"index {i} is out of range for axis {axis} of size {n}")
            start = i % n
            stop, step = start + 1, 1
            drop.append(axis)
        else:
            raise Error(f"unsupported index {i!r} (ints, slices and ... are)")
        starts.append(start)
        ends.append(stop)
        axes.append(axis)
        steps.append(step)
    out = self
    if axes:
        out = op("slice", [out], starts=starts, ends=ends, axes=axes, steps=steps)
    if drop:
        out = op("squeeze", [out], axes=drop)
    return out


Tensor.__getitem__ = _getitem


def value_and_grad(f, wrt=0, device="cpu", policy="prefer-native"):
    """Returns a function that evaluates f and its gradient with respect to the arguments in
    wrt (an int or a tuple of ints) on NumPy arrays.

    f takes rlx.Tensor arguments (one per array, same shape and dtype) and returns a tensor
    with one float element. On the first call for a set of shapes and dtypes the function is
    traced into a graph, differentiated with rlx's autodiff (src/train) and compiled; later
    calls with the same shapes reuse the compiled graph. The result is (value, grads), grads a
    single array when wrt is an int, else a tuple.
    """
    single = isinstance(wrt, int)
    nums = (wrt,) if single else tuple(wrt)
    cache = {}

    def run(*arrays):
        import numpy as np
        arrays = [np.asarray(a) for a in arrays]
        for i in nums:
            if not 0 <= i < len(arrays):
                raise Error(f"wrt: argument {i} is out of range for {len(arrays)} arguments")
        key = tuple((a.shape, a.dtype.str) for a in arrays)
        exe = cache.get(key)
        if exe is None:
            g = Graph(getattr(f, "__name__", "f"))
            args = [g.input(f"arg{i}", list(a.shape), a.dtype.name) for i, a in enumerate(arrays)]
            out = f(*args)
            if not isinstance(out, Tensor):
                raise Error("the function must return an rlx.Tensor (with one float element)")
            g.output(out, *gradients(out, [args[i] for i in nums]))
            exe = cache[key] = compile(g, device=device, policy=policy)
        outs = exe.run(*arrays)
        grads = outs[1] if single else tuple(outs[1:])
        return outs[0], grads

    return run


def grad(f, wrt=0, device="cpu", policy="prefer-native"):
    """Like value_and_grad, returning only the gradients::

        dloss = rlx.grad(lambda x, w: rlx.sum(rlx.relu(x @ w)), wrt=1)
        gw = dloss(x, w)   # NumPy arrays in, d loss / d w out
    """
    vg = value_and_grad(f, wrt, device, policy)

    def run(*arrays):
        return vg(*arrays)[1]

    return run


def train(dataset="mnist", **options):
    """Trains as `rlx train` does and returns an rlx.TrainResult (records per epoch, trained
    parameters, test accuracy). Keywords are the program's options with '_' for '-':
    arch="mlp"|"tinyconv", epochs, batch, lr, optimizer="sgd"|"adam"|"adamw", synthetic=True
    or data="DIR", train_size, test_size, seed, device, json, save, quiet (default True)...;
    see `rlx help train` and docs/training.md. Bad options raise rlx.Error with the program's
    message.
    """
    options.setdefault("quiet", True)
    args = [dataset]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is False or value is None:
            continue
        else:
            args += [flag, str(value)]
    return _rlx._train_args(args)
