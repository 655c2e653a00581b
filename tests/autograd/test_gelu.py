"""nn.GELU and nn.functional.gelu: values and gradients against math.erf's closed form and
against PyTorch, both approximations, dtypes, errors, and (marked gpu) CUDA and capture.

Ported from PyTorch's own tests:
- torch/testing/_internal/common_methods_invocations.py, the OpInfo of nn.functional.gelu
  (sample_inputs_gelu: approximate "none" and "tanh"; reference_inputs against scipy's
  x * norm.cdf(x)), checked here against x / 2 * (1 + erf(x / sqrt(2))) from math.erf;
- test/test_nn.py, TestNNDeviceType.test_gelu (the module's repr and its approximate
  argument, and the error for another value).
"""
import math

import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
DATA = [-6.0, -3.0, -1.0, -0.2, 0.0, 0.5, 2.0, 6.0]


def exact(x):
    return x / 2 * (1 + math.erf(x / math.sqrt(2)))


def exact_gradient(x):
    density = math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    return 0.5 * (1 + math.erf(x / math.sqrt(2))) + x * density


def tanh_form(x):
    return x / 2 * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist())


@pytest.mark.parametrize("device", DEVICES)
def test_exact_values_and_gradient(device):
    x = tp.tensor(DATA, dtype=tp.float64, device=device, requires_grad=True)
    y = F.gelu(x)
    numpy.testing.assert_allclose(values(y), [exact(v) for v in DATA], rtol=1e-12, atol=1e-15)
    y.sum().backward()
    numpy.testing.assert_allclose(values(x.grad), [exact_gradient(v) for v in DATA],
                                  rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("device", DEVICES)
def test_tanh_approximation(device):
    x = tp.tensor(DATA, dtype=tp.float64, device=device)
    numpy.testing.assert_allclose(values(nn.GELU("tanh")(x)), [tanh_form(v) for v in DATA],
                                  rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_dtypes(device, dtype):
    x = tp.tensor(DATA, dtype=getattr(tp, dtype), device=device)
    for approximate, reference in (("none", exact), ("tanh", tanh_form)):
        y = F.gelu(x, approximate=approximate)
        assert y.dtype is x.dtype and y.device == x.device
        tolerance = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-6}[dtype]
        numpy.testing.assert_allclose(values(y), [reference(v) for v in values(x)],
                                      rtol=tolerance, atol=tolerance)


def test_module_and_errors():
    assert repr(nn.GELU()) == "GELU(approximate='none')"
    assert repr(nn.GELU(approximate="tanh")) == "GELU(approximate='tanh')"
    with pytest.raises(ValueError, match="approximate argument must be either none or tanh"):
        nn.GELU("erf")
    with pytest.raises(ValueError, match="approximate argument must be either none or tanh"):
        F.gelu(tp.ones(2), approximate="fast")
    with pytest.raises(TypeError, match="floating point"):
        F.gelu(tp.ones(2, dtype=tp.int64))
    with pytest.raises(TypeError, match="input"):
        F.gelu([1.0])


def test_against_pytorch():
    torch = import_or_skip("torch")
    for approximate in ("none", "tanh"):
        ours = tp.tensor(DATA, dtype=tp.float64, requires_grad=True)
        theirs = torch.tensor(DATA, dtype=torch.float64, requires_grad=True)
        (F.gelu(ours, approximate=approximate) ** 2).sum().backward()
        (torch.nn.functional.gelu(theirs, approximate=approximate) ** 2).sum().backward()
        numpy.testing.assert_allclose(values(ours.grad), theirs.grad.numpy(), rtol=1e-12,
                                      atol=1e-15)


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    model = nn.Sequential(nn.Linear(4, 8, device="cuda"), nn.GELU(),
                          nn.LayerNorm(8, device="cuda"), nn.Linear(8, 1, device="cuda"))
    x = tp.zeros((3, 4), device="cuda")
    eager = model(tp.ones((3, 4), device="cuda"))
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        out = model(x)
    x.fill_(1.0)
    graph.replay()
    numpy.testing.assert_allclose(values(out), values(eager), rtol=1e-5, atol=1e-6)
