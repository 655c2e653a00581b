"""functional.max_pool2d / avg_pool2d and nn.MaxPool2d / AvgPool2d, on the CPU and on CUDA
(marked gpu).

Ported from PyTorch's own tests: the OpInfo entries nn.functional.max_pool2d and
nn.functional.avg_pool2d of torch/testing/_internal/common_methods_invocations.py
(sample_inputs_max_pool: kernel sizes, strides, padding, dilation and ceil_mode over batched and
unbatched inputs, the gradient going to the first largest element of each window;
sample_inputs_avgpool2d: its cases, with count_include_pad, divisor_override, tuples of one and
an empty stride), and test/test_nn.py's MaxPool2d and AvgPool2d checks (the repr, stride
defaulting to kernel_size, the padding bound's message, divisor_override=0 refused); integer
inputs as PyTorch's kernels take them (max_pool2d every integer dtype; avg_pool2d int64 on the
CPU, each mean truncated). Compared with PyTorch's where torch is installed.
"""
import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
CASES = [((2, 3, 7, 6), 2, None, 0, 1, False), ((1, 2, 8, 8), 3, 2, 1, 1, False),
         ((2, 2, 7, 7), 3, 2, 1, 1, True), ((3, 9, 9), (3, 2), (2, 1), (1, 1), (2, 1), True),
         ((1, 1, 5, 5), 2, 2, 0, 1, True)]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape, kernel, stride, padding, dilation, ceil_mode", CASES)
def test_values_and_gradients_match_pytorch(device, shape, kernel, stride, padding, dilation,
                                            ceil_mode):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(4)
    data = rng.standard_normal(shape)
    data[..., 0, 0] = data[..., 0, 1]  # ties: the gradient goes to the first, as PyTorch's
    x = tp.tensor(data, device=device, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    result = F.max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)
    expected = torch.nn.functional.max_pool2d(t, kernel, stride, padding, dilation, ceil_mode)
    assert result.shape == tuple(expected.shape)
    numpy.testing.assert_array_equal(values(result), expected.detach().numpy())
    upstream = rng.standard_normal(tuple(expected.shape))
    (result * tp.tensor(upstream, device=device)).sum().backward()
    (expected * torch.tensor(upstream)).sum().backward()
    numpy.testing.assert_allclose(values(x.grad), t.grad.numpy(), rtol=1e-15, atol=1e-15)


# sample_inputs_avgpool2d's cases: (shape, kernel_size, stride, padding, ceil_mode,
# count_include_pad, divisor_override)
AVG_CASES = [((1, 3, 9, 9), 3, 1, 1, True, False, 2),
             ((1, 3, 9, 9), (4, 4), (2, 3), 1, True, False, 2),
             ((1, 3, 9, 9), (6, 6), (3, 3), (2, 3), True, True, None),
             ((2, 3, 9, 9), (3, 3), (1, 1), (1,), True, False, 2),
             ((1, 1, 4, 4), (2, 2), (), (0,), False, True, -2),
             ((1, 2, 6, 6), (4, 4), (2, 2), (2,), True, True, None),
             ((3, 7, 5), 3, 2, 1, True, True, None),        # unbatched, a ceil_mode overhang
             ((2, 2, 7, 6), (3, 2), None, (1, 0), False, False, None)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape, kernel, stride, padding, ceil_mode, count_include_pad, "
                         "divisor_override", AVG_CASES)
def test_average_values_and_gradients_match_pytorch(device, shape, kernel, stride, padding,
                                                    ceil_mode, count_include_pad,
                                                    divisor_override):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(5)
    data = rng.standard_normal(shape)
    x = tp.tensor(data, device=device, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    arguments = (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
    result = F.avg_pool2d(x, *arguments)
    expected = torch.nn.functional.avg_pool2d(t, *arguments)
    assert result.shape == tuple(expected.shape)
    numpy.testing.assert_allclose(values(result), expected.detach().numpy(), rtol=1e-12,
                                  atol=1e-12)
    upstream = rng.standard_normal(tuple(expected.shape))
    (result * tp.tensor(upstream, device=device)).sum().backward()
    (expected * torch.tensor(upstream)).sum().backward()
    numpy.testing.assert_allclose(values(x.grad), t.grad.numpy(), rtol=1e-12, atol=1e-12)
    module = nn.AvgPool2d(*arguments)
    assert repr(module) == repr(torch.nn.AvgPool2d(*arguments))
    numpy.testing.assert_allclose(values(module(x)), values(result), rtol=0, atol=0)


def test_average_refusals_as_pytorchs():
    with pytest.raises(ValueError, match="divisor must be not zero"):
        F.avg_pool2d(tp.ones(1, 4, 4), 2, divisor_override=0)
    with pytest.raises(ValueError, match="divisor must be not zero"):
        nn.AvgPool2d(2, divisor_override=0)
    with pytest.raises(ValueError, match="pad should be at most half of effective kernel size, "
                                         "but got pad=2, kernel_size=2 and dilation=1"):
        F.avg_pool2d(tp.ones(1, 4, 4), 2, padding=2)
    # PyTorch's CPU kernel takes int64 alone of the integers, its CUDA kernel none of them.
    with pytest.raises(TypeError, match="avg_pool2d: input must be floating point, or int64"):
        F.avg_pool2d(tp.ones(1, 4, 4, dtype=tp.int32), 2)
    assert nn.AvgPool2d(3).stride == 3


@pytest.mark.gpu
def test_integer_average_is_refused_on_a_device_as_pytorchs():
    with pytest.raises(TypeError, match="or int64 on the CPU"):
        F.avg_pool2d(tp.ones(1, 4, 4, dtype=tp.int64, device="cuda"), 2)


def test_integer_average_truncates_each_mean_as_pytorchs_cpu_kernel():
    """avg_pool2d of int64 on the CPU: each window's sum divided in integers, truncated toward
    zero, for sample_inputs_avgpool2d-like arguments (divisor_override negative too)."""
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(4)
    for arguments in [(2,), (3, 1, 1), (3, 2, 1, True, False), (3, 2, 1, True, True, -3),
                      (2, 2, 1, False, True, 5), ((3, 2), (2, 1), (1, 0))]:
        x = rng.integers(-100, 100, (2, 3, 7, 6))
        result = F.avg_pool2d(tp.tensor(x), *arguments)
        expected = torch.nn.functional.avg_pool2d(torch.tensor(x), *arguments)
        assert result.dtype == tp.int64 and result.tolist() == expected.tolist()
    assert F.avg_pool2d(tp.tensor([[[-3, -2], [0, -1]]]), 2).tolist() == [[[-1]]]  # -1.5


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8"])
def test_integer_maximum_as_pytorchs(device, dtype):
    """max_pool2d of every integer dtype, as PyTorch's kernels on both devices: the padding
    never wins, however small the values (the dtype's smallest value pads)."""
    rng = numpy.random.default_rng(len(dtype))
    low, high = (0, 255) if dtype == "uint8" else (-128, 127)
    x = rng.integers(low, high + 1, (2, 3, 7, 6))
    x[0, 0] = low  # a plane of the smallest value, padded
    result = F.max_pool2d(tp.tensor(x, device=device).to(getattr(tp, dtype)), 3, 2, 1,
                          ceil_mode=True)
    windows = numpy.pad(x, ((0, 0), (0, 0), (1, 2), (1, 2)), constant_values=low)
    expected = numpy.array([[[[windows[b, c, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max()
                               for j in range(4)] for i in range(4)] for c in range(3)]
                            for b in range(2)])
    assert result.dtype == getattr(tp, dtype)
    numpy.testing.assert_array_equal(values(result), expected)
    with pytest.raises(NotImplementedError, match="'Bool'"):
        F.max_pool2d(tp.ones(1, 4, 4, dtype=tp.bool, device=device), 2)


@pytest.mark.parametrize("device", DEVICES)
def test_nan_propagates(device):
    x = tp.tensor([[[1.0, float("nan")], [3.0, 2.0]]], device=device)
    assert numpy.isnan(values(F.max_pool2d(x, 2))).all()


def test_module_repr_and_refusals_as_pytorchs():
    torch = import_or_skip("torch")
    for args, kwargs in [((2,), {}), (((3, 2),), {"stride": 1, "padding": 1,
                                                  "ceil_mode": True})]:
        assert repr(nn.MaxPool2d(*args, **kwargs)) == repr(torch.nn.MaxPool2d(*args, **kwargs))
    assert nn.MaxPool2d(3).stride == 3
    with pytest.raises(ValueError, match="pad should be at most half of effective kernel size, "
                                         "but got pad=2, kernel_size=3 and dilation=1"):
        F.max_pool2d(tp.ones(1, 1, 5, 5), 3, padding=2)
    with pytest.raises(RuntimeError, match="Expected 3D or 4D"):
        F.max_pool2d(tp.ones(5, 5), 2)
    with pytest.raises(ValueError, match="return_indices=True is not offered"):
        nn.MaxPool2d(2, return_indices=True)
    with pytest.raises(ValueError, match="non-positive stride"):
        F.max_pool2d(tp.ones(1, 4, 4), 2, stride=0)


@pytest.mark.gpu
def test_capture_after_a_warm_up_and_replay(quiet_device):
    x = tp.zeros(1, 1, 4, 4, device="cuda", requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()  # the warm-up: the window indices of this shape
    x.grad = None
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        pooled = F.max_pool2d(x, 2)
        averaged = F.avg_pool2d(x, 2, padding=1, count_include_pad=False)
    with tp.no_grad():
        x.copy_(tp.arange(16.0, device="cuda").reshape(1, 1, 4, 4))
    graph.replay()
    assert pooled.tolist() == [[[[5.0, 7.0], [13.0, 15.0]]]]
    assert averaged.tolist() == [[[[0.0, 1.5, 3.0], [6.0, 7.5, 9.0], [12.0, 13.5, 15.0]]]]
