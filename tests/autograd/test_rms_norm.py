"""nn.RMSNorm and functional.rms_norm, on the CPU and on CUDA (marked gpu).

Ported from PyTorch's own tests: the OpInfo entry nn.functional.rms_norm of
torch/testing/_internal/common_methods_invocations.py (values and gradients of input and
weight over one and two normalised dimensions, with and without weight, eps given or the
dtype's machine epsilon) and test/test_nn.py's module checks (the repr, the weight starting at
ones, elementwise_affine=False registering none, an input of the wrong trailing shape refused).
Compared with PyTorch's where torch is installed.
"""
import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape, weighted, eps", [((4,), True, None), ((4,), False, 1e-3),
                                                  ((3, 4), True, 1e-6), ((3, 4), False, None)])
def test_values_and_gradients_match_pytorch(device, shape, weighted, eps):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(3)
    data = rng.standard_normal((2, 3, 4))
    weight = rng.standard_normal(shape)
    x = tp.tensor(data.tolist(), dtype=tp.float64, device=device, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    w = tp.tensor(weight.tolist(), dtype=tp.float64, device=device, requires_grad=True) \
        if weighted else None
    tw = torch.tensor(weight, requires_grad=True) if weighted else None
    ours = F.rms_norm(x, shape, w, eps)
    theirs = torch.nn.functional.rms_norm(t, shape, tw, eps)
    numpy.testing.assert_allclose(values(ours), theirs.detach().numpy(), rtol=1e-12)
    (ours * ours * 3).sum().backward()
    (theirs * theirs * 3).sum().backward()
    numpy.testing.assert_allclose(values(x.grad), t.grad.numpy(), rtol=1e-10, atol=1e-12)
    if weighted:
        numpy.testing.assert_allclose(values(w.grad), tw.grad.numpy(), rtol=1e-10)


def test_module():
    torch = import_or_skip("torch")
    norm = nn.RMSNorm([2, 3], eps=1e-5)
    assert repr(norm) == repr(torch.nn.RMSNorm([2, 3], eps=1e-5))
    assert values(norm.weight).tolist() == [[1.0] * 3] * 2
    assert [name for name, _ in nn.RMSNorm(3, elementwise_affine=False).named_parameters()] == []
    x = tp.randn(4, 2, 3)
    numpy.testing.assert_allclose(values(norm(x)), values(F.rms_norm(x, (2, 3), norm.weight,
                                                                     1e-5)))
    with pytest.raises(ValueError, match="expected input with shape"):
        norm(tp.randn(2, 4))
    with pytest.raises(TypeError, match="eps"):
        nn.RMSNorm(3, eps="small")
    with pytest.raises(TypeError, match="normalized_shape"):
        F.rms_norm(x, 3)


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    norm = nn.RMSNorm(3).cuda()
    x = tp.tensor([[1.0, 2.0, 2.0]], device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        output = norm(x)
    x.copy_(tp.tensor([[3.0, 0.0, 4.0]], device="cuda"))
    graph.replay()
    numpy.testing.assert_allclose(values(output), values(norm.cpu()(x.cpu())), rtol=1e-6)
