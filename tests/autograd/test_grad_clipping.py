"""tensorplay.nn.utils.clip_grad_norm_ and clip_grad_value_ on the CPU and on CUDA (marked gpu):
the norm before clipping, the norms after, one scale for every gradient, small gradients left
alone, a single tensor as a list of one, the argument checks, a capture; against PyTorch where
it is installed.

Ported from PyTorch's test/test_nn.py (TestNNDeviceType.test_clip_grad_norm and
test_clip_grad_value), with tensorplay's Linear and gradients.
"""
import math

import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn.utils import clip_grad_norm_, clip_grad_value_

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
NORM_TYPES = [0.5, 1.5, 2, 4, "inf"]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
def test_clip_grad_norm(device):
    layer = nn.Linear(10, 10).to(device)
    max_norm = 2

    def compute_norm(norm_type):
        norm_type = float(norm_type)
        gradients = [values(p.grad) for p in layer.parameters()]
        if norm_type != math.inf:
            return sum((numpy.abs(g) ** norm_type).sum() for g in gradients) ** (1 / norm_type)
        return max(numpy.abs(g).max() for g in gradients)

    def compare_scaling(grads):
        scales = numpy.concatenate([(values(p.grad) / values(g).reshape(p.shape)).ravel()
                                    for p, g in zip(layer.parameters(), grads)])
        assert scales.std() < 1e-6
        return scales[0]

    grads = (tp.arange(1.0, 101.0, device=device).view(10, 10),
             tp.ones(10, device=device) / 1000)
    for norm_type in NORM_TYPES:
        for p, g in zip(layer.parameters(), grads):
            p.grad = g.clone().view_as(p)
        norm_before = compute_norm(norm_type)
        norm = clip_grad_norm_(layer.parameters(), max_norm, norm_type=norm_type)
        norm_after = compute_norm(norm_type)
        assert norm.item() == pytest.approx(norm_before, rel=1e-5)
        assert norm_after == pytest.approx(max_norm, rel=1e-5)
        assert norm_after <= norm_before
        compare_scaling(grads)

    # Small gradients are left unchanged.
    grads = (tp.rand(10, 10, device=device) / 10000, tp.ones(10, device=device) / 500)
    for norm_type in NORM_TYPES:
        for p, g in zip(layer.parameters(), grads):
            p.grad.copy_(g.view_as(p))
        norm_before = compute_norm(norm_type)
        norm = clip_grad_norm_(layer.parameters(), max_norm, norm_type=norm_type)
        norm_after = compute_norm(norm_type)
        assert norm.item() == pytest.approx(norm_before, rel=1e-5)
        assert norm_before == pytest.approx(norm_after, rel=1e-6) and norm_after <= max_norm
        assert compare_scaling(grads) == pytest.approx(1.0)

    # A single tensor is taken as a list of one.
    p1, p2 = tp.randn(10, 10, device=device), tp.randn(10, 10, device=device)
    g = tp.arange(1.0, 101.0, device=device).view(10, 10)
    p1.grad, p2.grad = g.clone(), g.clone()
    for norm_type in NORM_TYPES:
        clip_grad_norm_(p1, max_norm, norm_type=norm_type)
        clip_grad_norm_([p2], max_norm, norm_type=norm_type)
        assert p1.grad.tolist() == p2.grad.tolist()


@pytest.mark.parametrize("device", DEVICES)
def test_clip_grad_value(device):
    layer = nn.Linear(10, 10).to(device)
    clip_value = 2.5
    grad_w = tp.arange(-50.0, 50.0, device=device).view(10, 10) / 5
    grad_b = tp.ones(10, device=device) * 2
    for grad_list in ([grad_w, grad_b], [grad_w, None]):
        for p, g in zip(layer.parameters(), grad_list):
            p.grad = g.clone().view_as(p) if g is not None else None
        assert clip_grad_value_(layer.parameters(), clip_value) is None
        for p in layer.parameters():
            if p.grad is not None:
                assert p.grad.max().item() <= clip_value and p.grad.min().item() >= -clip_value
    p1, p2 = tp.randn(10, 10, device=device), tp.randn(10, 10, device=device)
    g = tp.arange(-50.0, 50.0, device=device).view(10, 10) / 5
    p1.grad, p2.grad = g.clone(), g.clone()
    clip_grad_value_(p1, clip_value)
    clip_grad_value_([p2], clip_value)
    assert p1.grad.tolist() == p2.grad.tolist()


def test_arguments_and_edges():
    weight = nn.Parameter(tp.zeros(2))
    assert clip_grad_norm_([weight], 1.0).item() == 0.0  # no gradient: tensor(0.)
    weight.grad = tp.tensor([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        clip_grad_norm_(weight, 1.0, error_if_nonfinite=True)
    for arguments, error in ((([1.0], 1.0), "parameters\\[0\\]"), ((weight, "2"), "max_norm"),
                             ((weight, True), "max_norm"), ((weight, 1.0, None), "norm_type"),
                             ((3, 1.0), "iterable")):
        with pytest.raises(TypeError, match=error):
            clip_grad_norm_(*arguments)
    with pytest.raises(TypeError, match="error_if_nonfinite"):
        clip_grad_norm_(weight, 1.0, error_if_nonfinite=1)
    with pytest.raises(TypeError, match="clip_value"):
        clip_grad_value_(weight, None)
    with pytest.raises(ValueError, match="norm_type as a str"):
        clip_grad_norm_(weight, 1.0, "two")


@pytest.mark.gpu
def test_a_captured_step_clips_as_eager(quiet_device):
    weight = nn.Parameter(tp.zeros(4, device="cuda"))
    weight.grad = tp.tensor([3.0, 4.0, 0.0, 0.0], device="cuda")
    clip_grad_norm_(weight, 1.0)  # warm-up, eager
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        total = clip_grad_norm_(weight, 1.0)
    weight.grad.copy_(tp.tensor([0.0, 0.0, 6.0, 8.0], device="cuda"))
    graph.replay()
    assert total.item() == pytest.approx(10.0)
    numpy.testing.assert_allclose(values(weight.grad), [0.0, 0.0, 0.6, 0.8], rtol=1e-5)


def test_against_pytorch():
    torch = import_or_skip("torch")
    data = numpy.random.default_rng(4).normal(0, 3, (5, 3))
    for norm_type in (2.0, 1, math.inf, 3.5, 0):
        ours = [nn.Parameter(tp.zeros(5, 3)), nn.Parameter(tp.zeros(3))]
        theirs = [torch.nn.Parameter(torch.zeros(5, 3)), torch.nn.Parameter(torch.zeros(3))]
        for mine, other, grad in zip(ours, theirs, (data, data[0])):
            mine.grad = tp.tensor(grad.tolist())
            other.grad = torch.tensor(grad.tolist())
        total = clip_grad_norm_(ours, 1.5, norm_type)
        expected = torch.nn.utils.clip_grad_norm_(theirs, 1.5, norm_type)
        assert total.item() == pytest.approx(expected.item(), rel=1e-5)
        for mine, other in zip(ours, theirs):
            numpy.testing.assert_allclose(values(mine.grad), other.grad.numpy(), rtol=1e-5)
