"""tensorplay.maximum and minimum (and the Tensor methods), on the CPU and on CUDA (marked gpu):
values with NaN, broadcasting and promotion, PyTorch's gradient that splits a tie, the errors,
and a capture.

Ported from PyTorch's own tests:
- test/test_binary_ufuncs.py, TestBinaryUfuncs.test_maximum_minimum_type_promotion and
  test_maximum_and_minimum_subgradient (the gradient of a tie is half to each operand) and
  test_maximum_minimum_float_nan_and_inf (NaN propagates from either operand; infinities
  compare as numbers), against numpy's maximum and minimum.
"""
import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
NAN, INF = float("nan"), float("inf")
LEFT = [1.0, 5.0, 2.0, NAN, 3.0, -INF, INF, -0.5]
RIGHT = [3.0, 2.0, 2.0, 0.0, NAN, -1.0, INF, NAN]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_nan_and_inf_against_numpy(device, dtype, name):
    a = tp.tensor(LEFT, dtype=getattr(tp, dtype), device=device)
    b = tp.tensor(RIGHT, dtype=getattr(tp, dtype), device=device)
    for result in (getattr(tp, name)(a, b), getattr(a, name)(b)):
        assert result.dtype is a.dtype and result.device == a.device
        numpy.testing.assert_array_equal(values(result),
                                         getattr(numpy, name)(numpy.array(LEFT), RIGHT))


@pytest.mark.parametrize("device", DEVICES)
def test_broadcasting_and_promotion(device):
    a = tp.tensor([1, 5, -3], device=device)
    b = tp.tensor([[2.5], [0.0]], device=device)
    result = tp.maximum(a, b)
    assert result.dtype is tp.float32 and result.shape == (2, 3)
    assert result.tolist() == [[2.5, 5.0, 2.5], [1.0, 5.0, 0.0]]
    assert tp.minimum(a, tp.tensor(0, device=device)).tolist() == [0, 0, -3]
    masks = tp.tensor([True, False], device=device), tp.tensor([False, False], device=device)
    assert tp.maximum(*masks).tolist() == [True, False]
    assert tp.minimum(*masks).tolist() == [False, False]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_subgradient_splits_a_tie(device, name):
    a = tp.tensor([1.0, 5.0, 2.0, NAN], dtype=tp.float64, device=device, requires_grad=True)
    b = tp.tensor([3.0, 2.0, 2.0, 0.0], dtype=tp.float64, device=device, requires_grad=True)
    getattr(tp, name)(a, b).sum().backward()
    chosen_a = [0.0, 1.0] if name == "maximum" else [1.0, 0.0]
    assert a.grad.tolist() == chosen_a + [0.5, 1.0]
    assert b.grad.tolist() == chosen_a[::-1] + [0.5, 1.0]


@pytest.mark.parametrize("device", DEVICES)
def test_broadcast_gradient_is_summed(device):
    a = tp.tensor([[1.0, 4.0], [3.0, 0.0]], device=device, requires_grad=True)
    b = tp.tensor([2.0, 2.0], device=device, requires_grad=True)
    tp.maximum(a, b).sum().backward()
    assert a.grad.tolist() == [[0.0, 1.0], [1.0, 0.0]] and b.grad.tolist() == [1.0, 1.0]


def test_against_pytorch():
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(3)
    left = rng.integers(-2, 3, size=(4, 5)).astype(numpy.float64)
    right = rng.integers(-2, 3, size=(5,)).astype(numpy.float64)
    for name in ("maximum", "minimum"):
        ours = [tp.tensor(v.tolist(), dtype=tp.float64, requires_grad=True)
                for v in (left, right)]
        theirs = [torch.tensor(v, requires_grad=True) for v in (left, right)]
        (getattr(tp, name)(*ours) ** 2).sum().backward()
        (getattr(torch, name)(*theirs) ** 2).sum().backward()
        for mine, want in zip(ours, theirs):
            numpy.testing.assert_array_equal(values(mine.grad), want.grad.numpy())


def test_errors():
    x = tp.ones(2)
    with pytest.raises(TypeError, match="other"):
        x.maximum(1.0)  # PyTorch's maximum takes tensors only
    with pytest.raises(TypeError, match="input"):
        tp.minimum([1.0], x)
    with pytest.raises(ValueError):
        tp.maximum(x, tp.ones(3))


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    a = tp.zeros(3, device="cuda")
    b = tp.tensor([1.0, 1.0, 1.0], device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        high, low = tp.maximum(a, b), tp.minimum(a, b)
    a.copy_(tp.tensor([0.0, 2.0, NAN], device="cuda"))
    graph.replay()
    numpy.testing.assert_array_equal(values(high), [1.0, 2.0, NAN])
    numpy.testing.assert_array_equal(values(low), [0.0, 1.0, NAN])
