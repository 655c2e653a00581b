"""Tensor.amax / amin and tensorplay.amax / amin, on the CPU and on CUDA (marked gpu).

Ported from PyTorch's own tests: test/test_reductions.py's test_amax / test_amin (against
numpy's amax / amin over every dimension, tuples of dimensions and keepdim, NaN propagating)
and test_reduction_empty_any_all-style empty cases, and the OpInfo entries amax / amin of
torch/testing/_internal/common_methods_invocations.py, whose gradient PyTorch shares evenly
among the elements equal to the result (unlike max(dim)'s, which goes to one index).
Compared with PyTorch's where torch is installed.
"""
import numpy
import pytest

import tensorplay as tp

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
DIMS = [None, (), 0, 1, -1, (0, 2), (2, 0), (0, 1, 2), [1]]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "int64", "float16"])
def test_matches_numpy(device, dim, keepdim, dtype):
    rng = numpy.random.default_rng(5)
    data = rng.integers(-4, 4, (3, 4, 5)).astype(dtype)
    x = tp.tensor(data, device=device)
    axis = None if dim in (None, ()) else tuple(dim) if isinstance(dim, (tuple, list)) else dim
    for ours, numpys in ((x.amax(dim, keepdim=keepdim), numpy.amax),
                         (tp.amin(x, dim, keepdim), numpy.amin)):
        expected = numpys(data, axis=axis, keepdims=keepdim)
        assert ours.dtype == x.dtype
        assert ours.shape == expected.shape
        numpy.testing.assert_array_equal(values(ours), expected.astype(numpy.float64))


@pytest.mark.parametrize("device", DEVICES)
def test_nan_propagates_and_0_d_and_bool(device):
    x = tp.tensor([[float("nan"), 1.0], [2.0, 3.0]], device=device)
    assert numpy.isnan(values(x.amax(1))[0]) and values(x.amax(1))[1] == 3.0
    assert numpy.isnan(values(x.amin()))
    assert tp.tensor(3.0, device=device).amax().item() == 3.0
    assert tp.tensor(3.0, device=device).amin(0, keepdim=True).item() == 3.0
    assert tp.tensor([True, False], device=device).amax().item() is True
    assert tp.zeros(0, 3, device=device).amax(1).shape == (0,)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim, keepdim", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_gradient_is_shared_among_ties_as_pytorchs(device, dim, keepdim):
    torch = import_or_skip("torch")
    data = numpy.array([[[1.0, 5.0, 5.0], [4.0, 4.0, -1.0]],
                        [[0.0, 0.0, 0.0], [7.0, 2.0, 7.0]]])
    for name in ("amax", "amin"):
        x = tp.tensor(data, device=device, requires_grad=True)
        t = torch.tensor(data, requires_grad=True)
        args = () if dim is None else (dim,)
        result = getattr(x, name)(*args, keepdim=keepdim)
        expected = getattr(t, name)(*args, keepdim=keepdim)
        weights = numpy.arange(1.0, expected.numel() + 1).reshape(tuple(expected.shape))
        (result * tp.tensor(weights, device=device)).sum().backward()
        (expected * torch.tensor(weights)).sum().backward()
        numpy.testing.assert_array_equal(values(result), expected.detach().numpy())
        numpy.testing.assert_allclose(values(x.grad), t.grad.numpy(), rtol=1e-15)
        assert repr(result.grad_fn) == f"<{name.capitalize()}Backward>"


def test_refusals_follow_pytorch():
    with pytest.raises(IndexError, match=r"amax\(\): Expected reduction dim 0 to have non-zero"):
        tp.zeros(0, 3).amax(0)
    with pytest.raises(IndexError, match=r"amin\(\): Expected reduction dim 0 to have non-zero"):
        tp.zeros(0, 3).amin()
    with pytest.raises(IndexError, match="Dimension out of range"):
        tp.zeros(2, 3).amax(2)
    with pytest.raises(ValueError, match="appears multiple times"):
        tp.zeros(2, 3).amax((0, -2))
    with pytest.raises(TypeError, match="dim"):
        tp.zeros(2, 3).amax(1.0)


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    x = tp.tensor([[1.0, 5.0], [4.0, 2.0]], device="cuda", requires_grad=True)
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        largest = x.amax(1)
        smallest = x.amin()
        largest.sum().backward()
    with tp.no_grad():
        x.copy_(tp.tensor([[3.0, 3.0], [-1.0, 0.0]], device="cuda"))
    x.grad.zero_()
    graph.replay()
    assert largest.tolist() == [3.0, 0.0]
    assert smallest.item() == -1.0
    assert x.grad.tolist() == [[0.5, 0.5], [0.0, 1.0]]
