"""nn.KLDivLoss / functional.kl_div and functional.pad (every mode), on the CPU and on CUDA
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
  output size;
- the OpInfo entries nn.functional.pad reflect, replicate and circular
  (torch/testing/_internal/common_methods_invocations.py, sample_inputs_nn_pad: batched and
  unbatched inputs of one to three padded dimensions, positive, zero and negative pads) and
  test/nn/test_padding.py's TestPaddingNN (test_ReplicationPad_empty, test_ReflectionPad_fails,
  test_pad_circular's wrap-around refusal, a value refused outside constant mode).
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


def assert_pad_matches_pytorch(device, shape, pad, **options):
    """F.pad's values and gradient against PyTorch's; each output element takes its own weight,
    so an input element's gradient is the sum over its copies."""
    torch = import_or_skip("torch")
    data = numpy.arange(float(numpy.prod(shape))).reshape(shape)
    ours = tp.tensor(data.tolist(), dtype=tp.float64, device=device, requires_grad=True)
    theirs = torch.tensor(data, requires_grad=True)
    mine = F.pad(ours, pad, **options)
    reference = torch.nn.functional.pad(theirs, pad, **options)
    assert tuple(mine.shape) == tuple(reference.shape)
    numpy.testing.assert_array_equal(values(mine), reference.detach().numpy())
    weights = numpy.arange(1.0, 1.0 + reference.numel()).reshape(tuple(reference.shape))
    (mine * tp.tensor(weights.tolist(), dtype=tp.float64, device=device)).sum().backward()
    (reference * torch.tensor(weights)).sum().backward()
    numpy.testing.assert_array_equal(values(ours.grad), theirs.grad.numpy())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pad", PADS)
def test_pad_matches_pytorch(device, pad):
    assert_pad_matches_pytorch(device, (2, 3, 4), pad, value=-1.5)


def test_pad_defaults_and_refusals():
    x = tp.tensor([[1, 2]])
    assert F.pad(x, (1, 1)).tolist() == [[0, 1, 2, 0]] and F.pad(x, (1, 1)).dtype is tp.int64
    with pytest.raises(ValueError, match="divisible by 2"):
        F.pad(x, (1,))
    with pytest.raises(ValueError, match="too large"):
        F.pad(x, (1, 1, 1, 1, 1, 1))
    with pytest.raises(ValueError, match="negative output size"):
        F.pad(x, (-2, -1))
    with pytest.raises(ValueError, match="mode must be one of 'constant', 'reflect', "
                                         "'replicate', 'circular', got 'wrap'"):
        F.pad(x, (1, 1), mode="wrap")
    with pytest.raises(TypeError, match="pad"):
        F.pad(x, (1.0, 1))
    assert x.tolist() == [[1, 2]]


# (input shape, pad) of the OpInfo's samples for the modes other than constant: one to three
# padded dimensions, unbatched and batched, with zero and negative pads.
MODE_SAMPLES = [((3, 5), (2, 1)), ((2, 3, 5), (1, 2)), ((2, 3, 5), (-1, 2)), ((2, 3, 5), (2, -1)),
                ((2, 3, 5), (-1, -1)), ((2, 3, 5), (0, 0)), ((2, 3, 5), (4, 4)),
                ((3, 4, 5), (1, 2, 2, 1)), ((1, 2, 4, 5), (0, 3, -1, 2)),
                ((2, 3, 4, 5), (1, 1, 1, 1)), ((2, 3, 3, 4), (1, 2, 0, 1, 2, 1)),
                ((1, 2, 2, 3, 4), (-1, 1, 1, 0, 1, 1))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape, pad", MODE_SAMPLES)
def test_pad_modes_match_pytorch(device, mode, shape, pad):
    assert_pad_matches_pytorch(device, shape, pad, mode=mode)


@pytest.mark.parametrize("device", DEVICES)
def test_pad_modes_keep_the_dtype_and_give_a_new_tensor(device):
    x = tp.tensor([[1, 2, 3]], dtype=tp.int8, device=device)
    assert F.pad(x, (2, 1), mode="reflect").tolist() == [[3, 2, 1, 2, 3, 2]]
    assert F.pad(x, (2, 1), mode="replicate").tolist() == [[1, 1, 1, 2, 3, 3]]
    assert F.pad(x, (2, 1), mode="circular").dtype is tp.int8
    same = F.pad(x, (0, 0), mode="reflect", value=0)
    same[0, 0] = 7
    assert x.tolist() == [[1, 2, 3]]
    assert F.pad(tp.ones(0, 2, 3, device=device), (1, 1), mode="replicate").shape == (0, 2, 5)
    assert F.pad(tp.ones(1, 0, 3, device=device), (1, 1), mode="circular").shape == (1, 0, 5)
    # Wrapping around more than what a negative pad keeps: PyTorch writes through overlapping
    # memory there (its overlap error, or uninitialised values where nothing is kept).
    for pad in ((3, -2), (-3, 1)):
        with pytest.raises(ValueError, match="wrapping around more than once"):
            F.pad(tp.ones(1, 2, 3, device=device), pad, mode="circular")
    # the legal edges beside the refusals: a circular pad of the whole size, a replicate pad
    # beyond it, a reflect pad one short of it
    for mode, pad in (("circular", (3, 0)), ("replicate", (0, 5)), ("reflect", (2, 2))):
        assert_pad_matches_pytorch(device, (1, 2, 3), pad, mode=mode)


PAD_MODE_ERRORS = [  # (input shape, pad, mode, value, PyTorch's message)
    ((1, 2, 3), (3, 0), "reflect", None, r"Argument #4: Padding size should be less than the "
     r"corresponding input dimension, but got: padding \(3, 0\) at dimension 2 of input "
     r"\[1, 2, 3\]"),
    ((1, 1, 3, 4), (0, 0, 3, 0), "reflect", None, r"Argument #6: .* at dimension 2 of input"),
    ((1, 2, 3), (4, 0), "circular", None, "Padding value causes wrapping around more than once"),
    ((1, 2, 3), (-2, -2), "circular", None, "Negative padding value is resulting in an empty "
     "dimension"),
    ((1, 2, 3), (-2, -1), "reflect", None, r"input \(W: 3\) is too small. Calculated output "
     "W: 0"),
    ((1, 2, 3), (-2, -1), "replicate", None, r"input \(W: 3\) is too small"),
    ((1, 1, 3, 4), (-2, -2, 0, 0), "replicate", None, r"Calculated output H: 3 W: 0 must be >= "
     r"1 in every dimension \(input H: 3, W: 4\)"),
    ((1, 0, 3), (1, 1), "reflect", None, r"Expected 2D or 3D \(batch mode\) tensor with "
     r"possibly 0 batch size and other non-zero dimensions for input, but got: \[1, 0, 3\]"),
    ((0, 3), (1, 1), "replicate", None, "other non-zero dimensions"),
    ((3,), (1, 1), "reflect", None, "Padding size 2 is not supported for 1D input tensor."),
    ((1, 2, 3), (1, 1, 1, 1, 1, 1), "replicate", None, "Padding size 6 is not supported for "
     "3D input tensor."),
    ((1, 2, 3), (1, 1), "circular", 1.0, 'Padding mode "circular" doesn\'t take in value '
     "argument"),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape, pad, mode, value, message", PAD_MODE_ERRORS)
def test_pad_mode_refusals_are_pytorchs(device, shape, pad, mode, value, message):
    torch = import_or_skip("torch")
    x = tp.ones(shape, device=device, requires_grad=True)
    with pytest.raises(ValueError, match=message):
        F.pad(x, pad, mode=mode, value=value)
    with pytest.raises((RuntimeError, NotImplementedError), match=message):
        torch.nn.functional.pad(torch.ones(shape), pad, mode=mode, value=value)
    assert x.grad is None and x.tolist() == torch.ones(shape).tolist()


@pytest.mark.gpu
def test_capture_and_replay(quiet_device):
    x = tp.tensor([[0.5, -1.0]], device="cuda")
    p = tp.tensor([[0.3, 0.7]], device="cuda")
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        padded = F.pad(x, (1, 1), value=2.0)
        reflected = F.pad(x, (1, 1), mode="reflect")
        wrapped = F.pad(x, (2, 0), mode="circular")
        divergence = F.kl_div(x.log_softmax(1), p, reduction="batchmean")
    x.copy_(tp.tensor([[3.0, 4.0]], device="cuda"))
    graph.replay()
    assert padded.tolist() == [[2.0, 3.0, 4.0, 2.0]]
    assert reflected.tolist() == [[4.0, 3.0, 4.0, 3.0]]
    assert wrapped.tolist() == [[3.0, 4.0, 3.0, 4.0]]
    # About 0.0024, a difference of terms near 0.03: float32's rounding of those terms is what
    # the tolerance allows, relative to them rather than to the result.
    expected = F.kl_div(x.cpu().double().log_softmax(1), p.cpu().double(), reduction="batchmean")
    assert divergence.item() == pytest.approx(expected.item(), abs=1e-6)
