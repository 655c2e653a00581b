"""The activations nn.LeakyReLU, SiLU, Mish, ELU, Softplus, Hardtanh, ReLU6, Softmax and
LogSoftmax and their functional forms, on the CPU and on CUDA (marked gpu).

Ported from PyTorch's own tests:
- the OpInfo entries of torch/testing/_internal/common_methods_invocations.py for
  nn.functional.leaky_relu, silu, mish, elu, softplus, hardtanh and relu6 (values and
  gradients against the reference over ordinary, zero, boundary and large inputs, and the
  variants' consistency: module, function and inplace=True give the same values);
- test/test_nn.py: TestNN.test_hardtanh_backward (the gradient is zero at and beyond the
  bounds), test_softplus_low_threshold (beta * x above threshold is the identity), the
  test_*_inplace tests (the in-place form writes the input and returns it), and
  test_softmax_functional_dim0 / the implicit-dimension warning of nn.Softmax(dim=None).
Values and gradients are compared with PyTorch's where torch is installed.
"""
import warnings

import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
# Ordinary values, 0, the bounds of hardtanh and relu6, and values large enough to overflow
# exp() in float32 (where a careless where() gives NaN gradients).
DATA = [-120.0, -30.0, -6.0, -1.0, -0.5, 0.0, 0.25, 1.0, 3.0, 6.0, 25.0, 120.0]
# (name, our call, PyTorch's call), each as a function of (namespace, x).
CASES = [
    ("leaky_relu", lambda f, x: f.leaky_relu(x), None),
    ("leaky_relu_0.2", lambda f, x: f.leaky_relu(x, 0.2), None),
    ("silu", lambda f, x: f.silu(x), None),
    ("mish", lambda f, x: f.mish(x), None),
    ("elu", lambda f, x: f.elu(x), None),
    ("elu_0.5", lambda f, x: f.elu(x, alpha=0.5), None),
    ("softplus", lambda f, x: f.softplus(x), None),
    ("softplus_beta", lambda f, x: f.softplus(x, beta=2.0, threshold=5.0), None),
    ("hardtanh", lambda f, x: f.hardtanh(x), None),
    ("hardtanh_wide", lambda f, x: f.hardtanh(x, -6.0, 3.0), None),
    ("relu6", lambda f, x: f.relu6(x), None),
    ("sigmoid", lambda f, x: f.sigmoid(x), None),
    ("tanh", lambda f, x: f.tanh(x), None),
]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, call, _", CASES, ids=[case[0] for case in CASES])
def test_values_and_gradients_match_pytorch(device, dtype, name, call, _):
    torch = import_or_skip("torch")
    x = tp.tensor(DATA, dtype=getattr(tp, dtype), device=device, requires_grad=True)
    t = torch.tensor(DATA, dtype=getattr(torch, dtype), requires_grad=True)
    ours, theirs = call(F, x), call(torch.nn.functional, t)
    assert ours.dtype is x.dtype and ours.device == x.device
    tolerance = 1e-6 if dtype == "float32" else 1e-12
    numpy.testing.assert_allclose(values(ours), theirs.detach().double().numpy(),
                                  rtol=tolerance, atol=tolerance)
    weights = [float(i + 1) for i in range(len(DATA))]
    (ours * tp.tensor(weights, dtype=x.dtype, device=device)).sum().backward()
    (theirs * torch.tensor(weights, dtype=t.dtype)).sum().backward()
    gradient = values(x.grad)
    assert numpy.isfinite(gradient).all(), name
    numpy.testing.assert_allclose(gradient, t.grad.double().numpy(), rtol=tolerance,
                                  atol=tolerance, err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_floats_round_once(device, dtype):
    torch = import_or_skip("torch")
    data = [-3.0, -0.5, 0.0, 0.75, 2.0, 9.0]
    for name, call, _ in CASES:
        ours = call(F, tp.tensor(data, dtype=getattr(tp, dtype), device=device))
        theirs = call(torch.nn.functional, torch.tensor(data, dtype=getattr(torch, dtype)))
        assert ours.dtype is getattr(tp, dtype)
        numpy.testing.assert_allclose(values(ours), theirs.double().numpy(), rtol=1e-2,
                                      atol=1e-3, err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
def test_modules_functions_and_inplace_agree(device):
    pairs = [
        (nn.LeakyReLU(0.2), lambda x, inplace: F.leaky_relu(x, 0.2, inplace)),
        (nn.SiLU(), lambda x, inplace: F.silu(x, inplace)),
        (nn.Mish(), lambda x, inplace: F.mish(x, inplace)),
        (nn.ELU(0.5), lambda x, inplace: F.elu(x, 0.5, inplace)),
        (nn.Hardtanh(-2.0, 2.0), lambda x, inplace: F.hardtanh(x, -2.0, 2.0, inplace)),
        (nn.ReLU6(), lambda x, inplace: F.relu6(x, inplace)),
    ]
    data = [-4.0, -1.0, 0.0, 0.5, 3.0, 7.0]
    for module, function in pairs:
        x = tp.tensor(data, device=device)
        expected = values(function(x, False))
        assert values(x).tolist() == data  # not in place
        numpy.testing.assert_allclose(values(module(x)), expected)
        inplace = tp.tensor(data, device=device)
        assert function(inplace, True) is inplace
        numpy.testing.assert_allclose(values(inplace), expected)
        module.inplace = True
        inplace = tp.tensor(data, device=device)
        assert module(inplace) is inplace
        numpy.testing.assert_allclose(values(inplace), expected)
    x = tp.tensor(data, device=device)
    numpy.testing.assert_allclose(values(nn.Softplus(2.0, 5.0)(x)),
                                  values(F.softplus(x, 2.0, 5.0)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, call, _", CASES, ids=[case[0] for case in CASES])
def test_in_place_forms_differentiate_as_the_others(device, name, call, _):
    # test/test_nn.py's test_*_inplace under autograd: the in-place form of a non-leaf (and of
    # a view of one) gives the out-of-place form's values and gradients, as PyTorch's, instead
    # of a backward() refused because the activation's Node saved the changed input.
    if name in ("softplus", "softplus_beta", "sigmoid", "tanh"):
        pytest.skip(f"{name} has no in-place form")
    expected_x = tp.tensor(DATA, dtype=tp.float64, device=device, requires_grad=True)
    expected = call(F, expected_x * 2)
    (expected * tp.arange(12.0, dtype=tp.float64, device=device)).sum().backward()
    for view in (False, True):
        x = tp.tensor(DATA, dtype=tp.float64, device=device, requires_grad=True)
        changed = x * 2
        target = changed.view(3, 4)[:, :] if view else changed
        result = call(InPlace(F), target)
        assert result is target
        (changed * tp.arange(12.0, dtype=tp.float64, device=device)).sum().backward()
        numpy.testing.assert_allclose(values(changed), values(expected), rtol=1e-12)
        numpy.testing.assert_allclose(values(x.grad), values(expected_x.grad), rtol=1e-12)


class InPlace:
    """The functional namespace with inplace=True given to every call."""

    def __init__(self, namespace):
        self.namespace = namespace

    def __getattr__(self, name):
        return lambda *args, **kwargs: getattr(self.namespace, name)(*args, inplace=True,
                                                                     **kwargs)


def test_hardtanh_gradient_is_zero_at_and_beyond_the_bounds():
    x = tp.tensor([-2.0, -1.0, -0.5, 0.5, 1.0, 2.0], requires_grad=True)
    F.hardtanh(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    x = tp.tensor([-1.0, 0.0, 3.0, 6.0, 7.0], requires_grad=True)
    nn.ReLU6()(x).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]


def test_softplus_is_the_identity_above_the_threshold():
    x = tp.tensor([1.0, 2.0, 3.0], dtype=tp.float64)
    assert F.softplus(x, beta=10.0, threshold=15.0).tolist()[1:] == [2.0, 3.0]
    assert F.softplus(x, beta=10.0, threshold=15.0).tolist()[0] == pytest.approx(
        numpy.log1p(numpy.exp(10.0)) / 10.0)


def test_reprs_match_pytorch():
    torch = import_or_skip("torch")
    pairs = [
        (nn.LeakyReLU(), torch.nn.LeakyReLU()), (nn.LeakyReLU(0.2, True),
                                                 torch.nn.LeakyReLU(0.2, True)),
        (nn.SiLU(), torch.nn.SiLU()), (nn.SiLU(inplace=True), torch.nn.SiLU(inplace=True)),
        (nn.Mish(), torch.nn.Mish()), (nn.ELU(), torch.nn.ELU()),
        (nn.ELU(0.5, True), torch.nn.ELU(0.5, True)), (nn.Softplus(), torch.nn.Softplus()),
        (nn.Softplus(2.0, 10.0), torch.nn.Softplus(2.0, 10.0)),
        (nn.Hardtanh(), torch.nn.Hardtanh()), (nn.Hardtanh(-2.0, 3.0, True),
                                               torch.nn.Hardtanh(-2.0, 3.0, True)),
        (nn.ReLU6(), torch.nn.ReLU6()), (nn.ReLU6(True), torch.nn.ReLU6(True)),
        (nn.Softmax(dim=1), torch.nn.Softmax(dim=1)), (nn.Softmax(), torch.nn.Softmax()),
        (nn.LogSoftmax(dim=-1), torch.nn.LogSoftmax(dim=-1)), (nn.Identity(),
                                                               torch.nn.Identity()),
    ]
    for ours, theirs in pairs:
        assert repr(ours) == repr(theirs)


def test_arguments_are_checked():
    x = tp.tensor([1.0])
    with pytest.raises(TypeError, match="negative_slope"):
        nn.LeakyReLU("0.1")
    with pytest.raises(TypeError, match="inplace"):
        F.silu(x, inplace=1)
    with pytest.raises(ValueError, match="max_val"):
        nn.Hardtanh(1.0, -1.0)
    with pytest.raises(ValueError, match="max_val"):
        F.hardtanh(x, 1.0, 1.0)
    with pytest.raises(TypeError, match="floating point"):
        F.silu(tp.tensor([1, 2]))
    with pytest.raises(TypeError, match="floating point"):
        nn.ELU()(tp.tensor([1, 2]))
    with pytest.raises(TypeError, match="input"):
        F.softplus([1.0])
    assert x.tolist() == [1.0]


@pytest.mark.parametrize("module, function", [(nn.Softmax, F.softmax),
                                              (nn.LogSoftmax, F.log_softmax)])
def test_softmax_modules(module, function):
    x = tp.randn(2, 3, 4)
    for dim in (0, 1, -1):
        numpy.testing.assert_allclose(values(module(dim=dim)(x)), values(function(x, dim=dim)),
                                      rtol=1e-6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        implicit = module()(x)  # three dimensions: PyTorch's implicit dimension is 0
    assert [w.filename for w in caught] == [__file__]
    assert "Implicit dimension choice" in str(caught[0].message)
    numpy.testing.assert_allclose(values(implicit), values(function(x, dim=0)), rtol=1e-6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        function(x)
    assert [w.filename for w in caught] == [__file__]


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    x = tp.tensor([-2.0, -0.5, 0.0, 0.5, 2.0], device="cuda")
    layers = [nn.LeakyReLU(0.1), nn.SiLU(), nn.Mish(), nn.ELU(), nn.Softplus(),
              nn.Hardtanh(), nn.ReLU6(), nn.Softmax(dim=0)]
    for layer in layers:  # warm-up, outside the capture
        layer(x)
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        outputs = [layer(x) for layer in layers]
    fresh = [3.0, -1.0, 0.25, -4.0, 1.5]
    x.copy_(tp.tensor(fresh, device="cuda"))
    graph.replay()
    cpu = tp.tensor(fresh)
    for layer, output in zip(layers, outputs):
        numpy.testing.assert_allclose(values(output), values(layer(cpu)), rtol=1e-6,
                                      atol=1e-7, err_msg=repr(layer))
