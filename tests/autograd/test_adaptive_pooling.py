"""nn.AdaptiveAvgPool2d and functional.adaptive_avg_pool2d, on the CPU and on CUDA (marked gpu),
against PyTorch where it is installed.

Ported from PyTorch's own tests: the OpInfo entry nn.functional.adaptive_avg_pool2d
(torch/testing/_internal/common_methods_invocations.py, sample_inputs_adaptive_avg_pool2d:
batched and unbatched inputs, an int, a pair and a pair with None as output_size; values and
gradients), test/nn/test_pooling.py's TestPoolingNN.test_adaptive_pooling_size_none (None
keeps the input's size), test_adaptive_avg_pooling_overflow-style sizes that do not divide
(overlapping windows) or exceed the input, test_adaptive_pooling_zero_batch_dim and
test_AdaptiveAvgPool2d_empty-style refusals, with PyTorch's messages.
"""
import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
CASES = [((2, 3, 5, 7), 2), ((2, 3, 5, 7), (2, 3)), ((3, 5, 7), (None, 3)),
         ((2, 3, 5, 7), (8, 9)), ((1, 2, 6, 6), 1), ((1, 2, 6, 6), (3, 2)), ((2, 1, 4, 4), (4, 4))]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape, output_size", CASES)
def test_values_and_gradients_match_pytorch(device, shape, output_size):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(4)
    data = rng.normal(0, 1, shape)
    x = tp.tensor(data.tolist(), dtype=tp.float64, device=device, requires_grad=True)
    reference_x = torch.tensor(data, requires_grad=True)
    result = F.adaptive_avg_pool2d(x, output_size)
    expected = torch.nn.functional.adaptive_avg_pool2d(reference_x, output_size)
    assert result.shape == tuple(expected.shape)
    numpy.testing.assert_allclose(values(result), expected.detach().numpy(), rtol=1e-12,
                                  atol=1e-12)
    upstream = rng.normal(0, 1, tuple(expected.shape))
    (result * tp.tensor(upstream.tolist(), dtype=tp.float64, device=device)).sum().backward()
    (expected * torch.tensor(upstream)).sum().backward()
    numpy.testing.assert_allclose(values(x.grad), reference_x.grad.numpy(), rtol=1e-12,
                                  atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_module_float16_and_empty_sizes(device):
    torch = import_or_skip("torch")
    for output_size in (1, (2, None), [2, 3]):
        assert repr(nn.AdaptiveAvgPool2d(output_size)) == \
            repr(torch.nn.AdaptiveAvgPool2d(output_size))
    assert nn.AdaptiveAvgPool2d((2, None)).output_size == (2, None)
    data = numpy.random.default_rng(5).normal(0, 1, (2, 3, 5, 5))
    half = nn.AdaptiveAvgPool2d((2, 3))(tp.tensor(data.tolist(), dtype=tp.float16,
                                                   device=device))
    expected = torch.nn.AdaptiveAvgPool2d((2, 3))(torch.tensor(data, dtype=torch.float16))
    assert half.dtype is tp.float16
    numpy.testing.assert_allclose(values(half), expected.double().numpy(), rtol=2e-3,
                                  atol=2e-3)
    for shape, output_size in [((0, 3, 5, 7), 2), ((1, 0, 5, 7), 2), ((2, 3, 5, 7), (0, 9))]:
        x = tp.zeros(shape, device=device, requires_grad=True)
        result = F.adaptive_avg_pool2d(x, output_size)
        assert result.shape == tuple(torch.nn.functional.adaptive_avg_pool2d(
            torch.zeros(shape), output_size).shape)
        result.sum().backward()
        assert x.grad.shape == shape


def test_refusals_are_pytorchs():
    x = tp.ones(1, 2, 3, 4)
    with pytest.raises(ValueError, match="Input dimension should be at least 3"):
        F.adaptive_avg_pool2d(tp.ones(3, 4), 2)
    with pytest.raises(RuntimeError, match=r"Expected 3D or 4D tensor, but got "
                                           r"\[1, 2, 3, 4, 5\]"):
        F.adaptive_avg_pool2d(tp.ones(1, 2, 3, 4, 5), 2)
    with pytest.raises(ValueError, match="output_size must be 2"):
        F.adaptive_avg_pool2d(x, (1, 2, 3))
    with pytest.raises(ValueError, match=r"must be greater than or equal to 0 but received "
                                         r"\{-1, 2\}"):
        F.adaptive_avg_pool2d(x, (-1, 2))
    with pytest.raises(RuntimeError, match=r"non-zero size for non-batch dimensions, but input "
                                           r"has sizes \[1, 2, 0, 4\] with dimension 2 being "
                                           r"empty"):
        F.adaptive_avg_pool2d(tp.ones(1, 2, 0, 4), 2)
    with pytest.raises(TypeError, match="adaptive_avg_pool2d"):
        F.adaptive_avg_pool2d(tp.ones(1, 2, 3, 4, dtype=tp.int64), 2)
    with pytest.raises(TypeError, match="output_size must be an int or a tuple"):
        F.adaptive_avg_pool2d(x, 2.0)
    with pytest.raises(ValueError, match="output_size must be 2"):
        nn.AdaptiveAvgPool2d((1, 2, 3))


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    x = tp.zeros(1, 1, 4, 4, device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        pooled = F.adaptive_avg_pool2d(x, (2, 3))
    x.copy_(tp.arange(16.0, device="cuda").reshape(1, 1, 4, 4))
    graph.replay()
    expected = F.adaptive_avg_pool2d(tp.arange(16.0).reshape(1, 1, 4, 4), (2, 3))
    numpy.testing.assert_allclose(values(pooled), values(expected), rtol=1e-6)
