# Gradients through src/train autodiff, checked against PyTorch.
import numpy as np
import pytest

import rlx

torch = pytest.importorskip("torch")


def test_mlp_gradients_match_pytorch():
    r = np.random.default_rng(7)
    x = r.standard_normal((6, 10)).astype(np.float32)
    w1 = (r.standard_normal((10, 12)) * 0.3).astype(np.float32)
    b1 = (r.standard_normal(12) * 0.1).astype(np.float32)
    w2 = (r.standard_normal((12, 4)) * 0.3).astype(np.float32)
    b2 = (r.standard_normal(4) * 0.1).astype(np.float32)

    def loss(x, w1, b1, w2, b2):
        h = rlx.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        return rlx.mean(rlx.log_softmax(logits, axis=1) * -1.0) + rlx.sum(w1 * w1) * 0.01

    value, grads = rlx.value_and_grad(loss, wrt=(1, 2, 3, 4))(x, w1, b1, w2, b2)

    tx = torch.tensor(x)
    params = [torch.tensor(p, requires_grad=True) for p in (w1, b1, w2, b2)]
    tw1, tb1, tw2, tb2 = params
    th = torch.relu(tx @ tw1 + tb1)
    tl = (torch.log_softmax(th @ tw2 + tb2, dim=1) * -1.0).mean() + (tw1 * tw1).sum() * 0.01
    tl.backward()
    np.testing.assert_allclose(value, tl.item(), rtol=1e-5)
    assert len(grads) == 4
    for got, p in zip(grads, params):
        assert got.shape == tuple(p.shape)
        np.testing.assert_allclose(got, p.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_grad_single_argument_and_graph_level_gradients():
    r = np.random.default_rng(8)
    a = r.standard_normal((3, 5)).astype(np.float32)
    ga = rlx.grad(lambda a: rlx.sum(rlx.tanh(a) * a))(a)
    ta = torch.tensor(a, requires_grad=True)
    (torch.tanh(ta) * ta).sum().backward()
    np.testing.assert_allclose(ga, ta.grad.numpy(), rtol=1e-5, atol=1e-6)

    # the same through rlx.gradients on an explicit graph
    g = rlx.Graph()
    x = g.input("x", [3, 5])
    loss = rlx.sum(rlx.tanh(x) * x)
    (dx,) = rlx.gradients(loss, [x])
    assert dx.shape == (3, 5)
    g.output(dx)
    np.testing.assert_allclose(rlx.compile(g)(a), ta.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_gradient_of_non_scalar_raises_the_cpp_message():
    g = rlx.Graph()
    x = g.input("x", [3, 5])
    with pytest.raises(rlx.Error) as e:
        rlx.gradients(x * 2.0, [x])
    assert "one element" in str(e.value) or "element" in str(e.value)
