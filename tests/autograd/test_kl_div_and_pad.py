"""nn.KLDivLoss / functional.kl_div and functional.pad (constant mode), on the CPU and on CUDA
(marked gpu).

Ported from PyTorch's own tests:
- test/test_nn.py: TestNN.test_KLDivLoss_batch_mean (batchmean is the sum over the batch
  size), test_KLDivLoss_batch_mean_log_target, test_kl_div_with_diff_type's values, and the
  OpInfo entry nn.functional.kl_div (every reduction, log_target, a target with zeros: xlogy's
  0 * log 0 = 0, gradients of input and target); the "reduction: 'mean' divides the total
  loss" warning;
- test/nn/test_padding.py / the OpInfo entry nn.functional.pad (constant mode): positive and
  negative pads over one to three trailing dimensions, a padding value, the gradient reaching
  only the kept elements, and the errors for an odd pad length, too many pairs and a negative
  output size.
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


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["none", "batchmean", "sum", "mean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_pytorch(device, reduction, log_target):
    torch = import_or_skip("torch")
    log_q = numpy.log(numpy.array([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]))
    p = numpy.array([[0.0, 0.5, 0.5], [0.7, 0.3, 0.0]])
    target = numpy.log(p + 0.1) if log_target else p
    ours_input = tp.tensor(log_q.tolist(), dtype=tp.float64, device=device, requires_grad=True)
    ours_target = tp.tensor(target.tolist(), dtype=tp.float64, device=device, requires_grad=True)
    theirs_input = torch.tensor(log_q, requires_grad=True)
    theirs_target = torch.tensor(target, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reduction "mean"'s warning, tested below
        ours = F.kl_div(ours_input, ours_target, reduction=reduction, log_target=log_target)
        theirs = torch.nn.functional.kl_div(theirs_input, theirs_target, reduction=reduction,
                                            log_target=log_target)
    numpy.testing.assert_allclose(values(ours), theirs.detach().numpy(), rtol=1e-12,
                                  atol=1e-15)
    ours.sum().backward()
    theirs.sum().backward()
    numpy.testing.assert_allclose(values(ours_input.grad), theirs_input.grad.numpy(),
                                  rtol=1e-12)
    # The target's gradient where the target is 0: PyTorch's is NaN (d/dy y log y is -inf
    # there), ours the other term's alone, -input (docs/design.md); elsewhere they agree.
    theirs_grad, ours_grad = theirs_target.grad.numpy(), values(ours_target.grad)
    where = p > 0 if not log_target else numpy.ones_like(p, dtype=bool)
    numpy.testing.assert_allclose(ours_grad[where], theirs_grad[where], rtol=1e-12)
    assert numpy.isfinite(ours_grad).all()


def test_kl_div_module_and_warning():
    log_q, p = tp.tensor([[0.25, 0.75]]).log(), tp.tensor([[0.5, 0.5]])
    module = nn.KLDivLoss(reduction="batchmean")
    assert module(log_q, p).item() == F.kl_div(log_q, p, reduction="batchmean").item()
    assert repr(module) == "KLDivLoss()"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nn.KLDivLoss()(log_q, p)
    assert [w.filename for w in caught] == [__file__]
    assert "'batchmean' divides only by the batch size" in str(caught[0].message)
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        nn.KLDivLoss(reduction="avg")


PADS = [(1, 2), (0, 0, 1, 0), (2, 1, 0, 3, 1, 1), (-1, 1), (1, -2, -1, 0), (0, 0, 0, 0, 0, 0)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pad", PADS)
def test_pad_matches_pytorch(device, pad):
    torch = import_or_skip("torch")
    data = numpy.arange(24.0).reshape(2, 3, 4)
    ours = tp.tensor(data.tolist(), dtype=tp.float64, device=device, requires_grad=True)
    theirs = torch.tensor(data, requires_grad=True)
    mine = F.pad(ours, pad, value=-1.5)
    reference = torch.nn.functional.pad(theirs, pad, value=-1.5)
    assert tuple(mine.shape) == tuple(reference.shape)
    numpy.testing.assert_array_equal(values(mine), reference.detach().numpy())
    weights = numpy.arange(1.0, 1.0 + reference.numel()).reshape(tuple(reference.shape))
    (mine * tp.tensor(weights.tolist(), dtype=tp.float64, device=device)).sum().backward()
    (reference * torch.tensor(weights)).sum().backward()
    numpy.testing.assert_array_equal(values(ours.grad), theirs.grad.numpy())


def test_pad_defaults_and_refusals():
    x = tp.tensor([[1, 2]])
    assert F.pad(x, (1, 1)).tolist() == [[0, 1, 2, 0]] and F.pad(x, (1, 1)).dtype is tp.int64
    with pytest.raises(ValueError, match="divisible by 2"):
        F.pad(x, (1,))
    with pytest.raises(ValueError, match="too large"):
        F.pad(x, (1, 1, 1, 1, 1, 1))
    with pytest.raises(ValueError, match="negative output size"):
        F.pad(x, (-2, -1))
    with pytest.raises(ValueError, match="'constant' is"):
        F.pad(x, (1, 1), mode="reflect")
    with pytest.raises(TypeError, match="pad"):
        F.pad(x, (1.0, 1))
    assert x.tolist() == [[1, 2]]


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    x = tp.tensor([[0.5, -1.0]], device="cuda")
    p = tp.tensor([[0.3, 0.7]], device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        padded = F.pad(x, (1, 1), value=2.0)
        divergence = F.kl_div(x.log_softmax(1), p, reduction="batchmean")
    x.copy_(tp.tensor([[3.0, 4.0]], device="cuda"))
    graph.replay()
    assert padded.tolist() == [[2.0, 3.0, 4.0, 2.0]]
    # About 0.0024, a difference of terms near 0.03: float32's rounding of those terms is what
    # the tolerance allows, relative to them rather than to the result.
    expected = F.kl_div(x.cpu().double().log_softmax(1), p.cpu().double(), reduction="batchmean")
    assert divergence.item() == pytest.approx(expected.item(), abs=1e-6)
