"""nn.LayerNorm and nn.functional.layer_norm: values against a numpy reference and PyTorch,
gradients, dtypes, the errors, and (marked gpu) the same on CUDA and inside a captured graph.

Ported from PyTorch's own tests:
- test/test_nn.py, TestNNDeviceType._test_LayerNorm_general: for random shapes and a random
  number of normalised dimensions, each normalised slice has mean 0 and variance 1 (biased),
  scale and shift apply elementwise, and an input whose trailing sizes differ from
  normalized_shape raises;
- torch/testing/_internal/common_modules.py, module_inputs_torch_nn_LayerNorm: the constructor
  forms (an int, a list, elementwise_affine=False, bias=False, eps) and their reprs;
- test/test_nn.py, TestNN.test_layer_norm_grads_with_create_graph_flag's gradient against
  PyTorch's, here compared directly on the same data (float64).
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


def reference(data, count, weight=None, bias=None, eps=1e-5):
    axes = tuple(range(data.ndim - count, data.ndim))
    mean = data.mean(axis=axes, keepdims=True)
    variance = ((data - mean) ** 2).mean(axis=axes, keepdims=True)
    output = (data - mean) / numpy.sqrt(variance + eps)
    if weight is not None:
        output = output * weight
    if bias is not None:
        output = output + bias
    return output


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", range(4))
def test_layer_norm_general(device, seed):
    rng = numpy.random.default_rng(seed)
    ndim = int(rng.integers(2, 5))
    shape = tuple(int(size) for size in rng.integers(1, 6, size=ndim))
    count = int(rng.integers(1, ndim + 1))
    data = rng.normal(3.0, 5.0, size=shape)
    x = tp.tensor(data.tolist(), dtype=tp.float64, device=device)
    output = values(F.layer_norm(x, shape[ndim - count:]))
    numpy.testing.assert_allclose(output, reference(data, count), rtol=1e-10, atol=1e-10)
    axes = tuple(range(ndim - count, ndim))
    if numpy.prod(shape[ndim - count:]) > 1:
        numpy.testing.assert_allclose(output.mean(axis=axes), 0, atol=1e-10)
        spread = data.var(axis=axes)  # the variance of the result is var / (var + eps)
        numpy.testing.assert_allclose(output.var(axis=axes), spread / (spread + 1e-5),
                                      rtol=1e-9)
    weight = rng.normal(size=shape[ndim - count:])
    bias = rng.normal(size=shape[ndim - count:])
    affine = F.layer_norm(x, list(shape[ndim - count:]),
                          tp.tensor(weight.tolist(), dtype=tp.float64, device=device),
                          tp.tensor(bias.tolist(), dtype=tp.float64, device=device), eps=1e-3)
    numpy.testing.assert_allclose(values(affine), reference(data, count, weight, bias, 1e-3),
                                  rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_module_forms_and_parameters(device):
    norm = nn.LayerNorm(4, device=device)
    assert repr(norm) == "LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)"
    assert [name for name, _ in norm.named_parameters()] == ["weight", "bias"]
    assert norm.weight.tolist() == [1.0] * 4 and norm.bias.tolist() == [0.0] * 4
    assert norm.weight.requires_grad and norm.weight.device.type == device
    plain = nn.LayerNorm([2, 3], eps=1e-3, elementwise_affine=False)
    assert repr(plain) == "LayerNorm((2, 3), eps=0.001, elementwise_affine=False, bias=False)"
    assert plain.weight is None and plain.bias is None and list(plain.parameters()) == []
    unbiased = nn.LayerNorm((4,), bias=False, dtype=tp.float64)
    assert unbiased.bias is None and unbiased.weight.dtype is tp.float64
    assert list(unbiased.state_dict()) == ["weight"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_dtypes(device, dtype):
    data = numpy.linspace(-3, 5, 24).reshape(2, 3, 4)
    x = tp.tensor(data.tolist(), dtype=getattr(tp, dtype), device=device)
    output = F.layer_norm(x, (3, 4))
    assert output.dtype is x.dtype and output.shape == x.shape
    tolerance = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-5}[dtype]
    numpy.testing.assert_allclose(values(output), reference(values(x), 2), rtol=tolerance,
                                  atol=tolerance)
    if dtype != "float32":  # float32 parameters of a 16-bit input: PyTorch's one mix
        mixed = F.layer_norm(x, (3, 4), tp.ones((3, 4), device=device),
                             tp.zeros((3, 4), device=device))
        assert mixed.dtype is x.dtype


def test_errors_leave_nothing_changed():
    x = tp.ones((2, 4))
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[3\], expected input with "
                                           r"shape \[\*, 3\], but got input of size\[2, 4\]"):
        F.layer_norm(x, (3,))
    with pytest.raises(RuntimeError, match="at least 1-dimensional"):
        F.layer_norm(x, ())
    with pytest.raises(TypeError, match="normalized_shape"):
        F.layer_norm(x, 4)  # an int is the module's alone, as in PyTorch
    with pytest.raises(TypeError, match="normalized_shape"):
        nn.LayerNorm("4")
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape"):
        F.layer_norm(x, (4,), weight=tp.ones(3))
    with pytest.raises(RuntimeError, match="mixed dtype"):
        F.layer_norm(x, (4,), bias=tp.ones(4, dtype=tp.float64))
    with pytest.raises(TypeError, match="floating point"):
        F.layer_norm(tp.ones((2, 4), dtype=tp.int64), (4,))
    with pytest.raises(TypeError, match="eps"):
        nn.LayerNorm(4, eps="small")
    assert x.tolist() == [[1.0] * 4] * 2


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_match_pytorch(device):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(7)
    data, upstream = rng.normal(size=(3, 2, 5)), rng.normal(size=(3, 2, 5))
    weight, bias = rng.normal(size=(2, 5)), rng.normal(size=(2, 5))
    ours = [tp.tensor(a.tolist(), dtype=tp.float64, device=device, requires_grad=True)
            for a in (data, weight, bias)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (data, weight, bias)]
    (F.layer_norm(ours[0], (2, 5), ours[1], ours[2], eps=1e-4)
     * tp.tensor(upstream.tolist(), dtype=tp.float64, device=device)).sum().backward()
    (torch.nn.functional.layer_norm(theirs[0], (2, 5), theirs[1], theirs[2], eps=1e-4)
     * torch.tensor(upstream)).sum().backward()
    for mine, want in zip(ours, theirs):
        numpy.testing.assert_allclose(values(mine.grad), want.grad.numpy(), rtol=1e-9,
                                      atol=1e-12)


@pytest.mark.gpu
def test_training_step_captures(quiet_device):
    norm = nn.LayerNorm(8, device="cuda")
    x = tp.zeros((4, 8), device="cuda")
    with tp.no_grad():
        norm.weight.fill_(2.0)
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        loss = (norm(x) ** 2).mean()
        loss.backward()
    data = numpy.arange(32, dtype=numpy.float64).reshape(4, 8) % 5
    x.copy_(tp.tensor(data.tolist(), device="cuda"))
    norm.weight.grad.zero_()
    graph.replay()
    expected = reference(data, 1, numpy.full(8, 2.0))
    numpy.testing.assert_allclose(loss.item(), (expected ** 2).mean(), rtol=1e-5)
    # d loss / d weight = mean over the batch of 2 * y_hat * (2 y_hat) / 32, per feature
    normalised = reference(data, 1)
    numpy.testing.assert_allclose(values(norm.weight.grad),
                                  (2 * 2.0 * normalised ** 2).sum(axis=0) / 32, rtol=1e-4)
