"""The losses L1Loss, SmoothL1Loss, HuberLoss, BCELoss and BCEWithLogitsLoss, their functional
forms, and functional.one_hot and normalize, on the CPU and on CUDA (marked gpu).

Ported from PyTorch's own tests:
- the OpInfo entries of torch/testing/_internal/common_methods_invocations.py for
  nn.functional.l1_loss, smooth_l1_loss (with beta, and beta 0), huber_loss (with delta),
  binary_cross_entropy (with weight) and binary_cross_entropy_with_logits (with weight and
  pos_weight), for every reduction, values and gradients of input and target;
- test/test_nn.py: TestNN.test_bce_loss_always_nonnegative, test_bce_with_logits_gives_same
  _result_as_sigmoid_and_bce_loss, test_bce_with_logits_has_correct_grad_at_zero,
  test_bce_with_logits_stability (no infinity for logits of +-100),
  test_bce_loss_input_range (PyTorch's CPU error), test_bce_loss_size_mismatch,
  test_bce_with_logits_raises_if_target_and_input_are_different_size,
  test_smoothl1loss_negative_beta_not_supported, test_huber_loss_invalid_delta,
  test_bce_loss_broadcasts_weights;
- test/test_nn.py TestNN.test_one_hot (the CPU errors, num_classes -1, the shape) and
  test_normalize.
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
REDUCTIONS = ["mean", "sum", "none"]
INPUT = [[-2.5, -0.4, 0.0, 0.3], [1.0, 1.7, 3.2, -1.0]]
TARGET = [[-2.0, 0.6, 0.0, -0.2], [2.5, 1.7, 0.1, 0.0]]
PROBABILITIES = [[0.0, 0.1, 0.5, 0.7], [1.0, 0.999, 0.25, 0.6]]
LABELS = [[0.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.3, 0.0]]
LOGITS = [[0.0, -100.0, 100.0, 2.5], [-3.0, 0.7, 25.0, -0.1]]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


def pair(data, device, dtype, torch):
    ours = tp.tensor(data, dtype=getattr(tp, dtype), device=device, requires_grad=True)
    theirs = torch.tensor(data, dtype=getattr(torch, dtype), requires_grad=True)
    return ours, theirs


REGRESSION = [
    ("l1_loss", {}), ("smooth_l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5}),
    ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {}), ("huber_loss", {"delta": 0.3}),
    ("mse_loss", {}),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name, options", REGRESSION,
                         ids=[f"{name}{options}" for name, options in REGRESSION])
def test_regression_losses_match_pytorch(device, dtype, reduction, name, options):
    torch = import_or_skip("torch")
    x, tx = pair(INPUT, device, dtype, torch)
    y, ty = pair(TARGET, device, dtype, torch)
    ours = getattr(F, name)(x, y, reduction=reduction, **options)
    theirs = getattr(torch.nn.functional, name)(tx, ty, reduction=reduction, **options)
    check(ours, theirs, (x, y), (tx, ty), dtype)


def check(ours, theirs, our_inputs, their_inputs, dtype):
    tolerance = 1e-6 if dtype == "float32" else 1e-12
    assert tuple(ours.shape) == tuple(theirs.shape)
    numpy.testing.assert_allclose(values(ours), theirs.detach().double().numpy(),
                                  rtol=tolerance, atol=tolerance)
    weights = numpy.arange(1.0, 1.0 + theirs.numel()).reshape(tuple(theirs.shape))
    (ours * tp.tensor(weights.tolist(), dtype=ours.dtype, device=ours.device)).sum().backward()
    (theirs * torch_of(theirs).tensor(weights.tolist(), dtype=theirs.dtype)).sum().backward()
    for mine, reference in zip(our_inputs, their_inputs):
        # infinite where PyTorch's is too (the target's gradient at a probability of 0 or 1)
        numpy.testing.assert_allclose(values(mine.grad), reference.grad.double().numpy(),
                                      rtol=tolerance, atol=tolerance)


def torch_of(tensor):
    import torch
    return torch


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy_matches_pytorch(device, dtype, reduction, weighted):
    torch = import_or_skip("torch")
    x, tx = pair(PROBABILITIES, device, dtype, torch)
    y, ty = pair(LABELS, device, dtype, torch)
    weight = [2.0, 0.5, 1.0, 3.0] if weighted else None  # broadcast over the rows
    ours = F.binary_cross_entropy(
        x, y, None if weight is None else tp.tensor(weight, dtype=x.dtype, device=device),
        reduction=reduction)
    theirs = torch.nn.functional.binary_cross_entropy(
        tx, ty, None if weight is None else torch.tensor(weight, dtype=tx.dtype),
        reduction=reduction)
    check(ours, theirs, (x, y), (tx, ty), dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("positive", [False, True])
def test_binary_cross_entropy_with_logits_matches_pytorch(device, dtype, reduction, weighted,
                                                          positive):
    torch = import_or_skip("torch")
    x, tx = pair(LOGITS, device, dtype, torch)
    y, ty = pair(LABELS, device, dtype, torch)
    weight = [2.0, 0.5, 1.0, 3.0] if weighted else None
    pos_weight = [3.0, 1.0, 0.5, 2.0] if positive else None

    def tensors(module, like):
        return tuple(None if data is None else module.tensor(data, dtype=like.dtype,
                                                             **({"device": device}
                                                                if module is tp else {}))
                     for data in (weight, pos_weight))

    ours = F.binary_cross_entropy_with_logits(x, y, tensors(tp, x)[0], reduction=reduction,
                                              pos_weight=tensors(tp, x)[1])
    theirs = torch.nn.functional.binary_cross_entropy_with_logits(
        tx, ty, tensors(torch, tx)[0], reduction=reduction, pos_weight=tensors(torch, tx)[1])
    check(ours, theirs, (x, y), (tx, ty), dtype)


def test_binary_cross_entropy_at_the_ends():
    # PyTorch clamps each log at -100 and guards the gradient's denominator: a probability of
    # exactly 0 or 1 gives a finite loss and gradient (0 where the target agrees).
    x = tp.tensor([0.0, 1.0, 0.0, 1.0], dtype=tp.float64, requires_grad=True)
    y = tp.tensor([0.0, 1.0, 1.0, 0.0], dtype=tp.float64)
    losses = F.binary_cross_entropy(x, y, reduction="none")
    assert losses.tolist() == [0.0, 0.0, 100.0, 100.0]
    losses.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, -1e12, 1e12]
    assert (F.binary_cross_entropy(tp.rand(50), tp.rand(50)) >= 0).item()


def test_with_logits_is_sigmoid_then_bce_and_stable():
    logits = tp.tensor([[-4.0, -0.5, 0.0, 1.5, 6.0]], dtype=tp.float64)
    target = tp.tensor([[0.0, 1.0, 0.5, 1.0, 0.0]], dtype=tp.float64)
    numpy.testing.assert_allclose(
        values(F.binary_cross_entropy_with_logits(logits, target)),
        values(F.binary_cross_entropy(logits.sigmoid(), target)), rtol=1e-12)
    extreme = tp.tensor([100.0, -100.0], requires_grad=True)
    losses = nn.BCEWithLogitsLoss(reduction="none")(extreme, tp.tensor([0.0, 1.0]))
    assert losses.tolist() == [100.0, 100.0]
    losses.sum().backward()
    assert extreme.grad.tolist() == [1.0, -1.0]
    zero = tp.zeros(3, requires_grad=True)  # the gradient at 0 is sigmoid(0) - y
    F.binary_cross_entropy_with_logits(zero, tp.ones(3), reduction="sum").backward()
    assert zero.grad.tolist() == [-0.5, -0.5, -0.5]


def test_modules_hold_their_settings_and_buffers():
    torch = import_or_skip("torch")
    weight = tp.tensor([1.0, 2.0])
    module = nn.BCEWithLogitsLoss(weight, pos_weight=tp.tensor([3.0, 1.0]))
    assert list(module.state_dict()) == list(torch.nn.BCEWithLogitsLoss(
        torch.ones(2), pos_weight=torch.ones(2)).state_dict())
    assert list(nn.BCELoss(weight).state_dict()) == ["weight"]
    assert list(nn.BCELoss().state_dict()) == []
    for ours, theirs in [(nn.L1Loss(), torch.nn.L1Loss()), (nn.BCELoss(), torch.nn.BCELoss()),
                         (nn.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5)),
                         (nn.HuberLoss(), torch.nn.HuberLoss()),
                         (nn.BCEWithLogitsLoss(), torch.nn.BCEWithLogitsLoss())]:
        assert repr(ours) == repr(theirs)
    x, y = tp.tensor([[0.3, -1.2]]), tp.tensor([[1.0, 0.0]])
    assert module(x, y).item() == F.binary_cross_entropy_with_logits(
        x, y, weight, pos_weight=tp.tensor([3.0, 1.0])).item()
    assert nn.HuberLoss("sum", 0.5)(x, y).item() == F.huber_loss(x, y, "sum", 0.5).item()
    assert nn.SmoothL1Loss(reduction="none", beta=2.0)(x, y).tolist() == \
        F.smooth_l1_loss(x, y, reduction="none", beta=2.0).tolist()
    assert nn.L1Loss(reduction="sum")(x, y).item() == pytest.approx(0.7 + 1.2)


def test_refusals_use_pytorchs_messages():
    x = tp.tensor([0.5, 0.2])
    with pytest.raises(RuntimeError, match="does not support negative values for beta"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(RuntimeError, match="does not support negative values for beta"):
        nn.SmoothL1Loss(beta=-1.0)
    with pytest.raises(RuntimeError, match="non-positive values for delta"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.raises(RuntimeError, match="non-positive values for delta"):
        nn.HuberLoss(delta=-2.0)
    with pytest.raises(ValueError, match="different to the input size"):
        F.binary_cross_entropy(x, tp.tensor([[0.5, 0.2]]))
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(x, tp.tensor([1.0]))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(tp.tensor([1.5, 0.5]), x)
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(tp.tensor([float("nan"), 0.5]), x)
    with pytest.raises(TypeError, match="target must have input's dtype"):
        F.binary_cross_entropy(x, tp.tensor([1, 0]))
    with pytest.raises(TypeError, match="floating point"):
        F.binary_cross_entropy_with_logits(tp.tensor([1, 0]), tp.tensor([1, 0]))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.l1_loss(x, x, reduction="avg")
    with pytest.raises(TypeError, match="weight"):
        nn.BCELoss([1.0, 2.0])
    with pytest.raises(TypeError, match="target"):
        F.huber_loss(x, [0.5, 0.2])
    assert x.tolist() == pytest.approx([0.5, 0.2])


def test_broadcast_target_warns_at_the_callers_line():
    for call in (lambda: F.l1_loss(tp.ones(3, 1), tp.ones(3)),
                 lambda: nn.HuberLoss()(tp.ones(3, 1), tp.ones(3)),
                 lambda: nn.MSELoss()(tp.ones(3, 1), tp.ones(3))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        assert [w.filename for w in caught] == [__file__]
        assert "different to the input size" in str(caught[0].message)


@pytest.mark.parametrize("device", DEVICES)
def test_one_hot(device):
    x = tp.tensor([[0, 2], [1, 0]], device=device)
    encoded = F.one_hot(x, 4)
    assert encoded.dtype is tp.int64 and tuple(encoded.shape) == (2, 2, 4)
    assert encoded.tolist() == [[[1, 0, 0, 0], [0, 0, 1, 0]], [[0, 1, 0, 0], [1, 0, 0, 0]]]
    assert F.one_hot(x).tolist() == F.one_hot(x, 3).tolist()  # -1: the largest index + 1
    assert tuple(F.one_hot(tp.zeros(0, dtype=tp.int64, device=device), 5).shape) == (0, 5)
    with pytest.raises(RuntimeError, match="LongTensor"):
        F.one_hot(tp.tensor([0.0, 1.0], device=device), 2)
    with pytest.raises(RuntimeError, match="empty tensor"):
        F.one_hot(tp.zeros(0, dtype=tp.int64, device=device))


def test_one_hot_checks_cpu_values_as_pytorch():
    torch = import_or_skip("torch")
    data = [3, 0, 1, 1]
    assert F.one_hot(tp.tensor(data)).tolist() == \
        torch.nn.functional.one_hot(torch.tensor(data)).tolist()
    with pytest.raises(RuntimeError, match="non-negative"):
        F.one_hot(tp.tensor([-1, 0]), 3)
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(tp.tensor([3, 0]), 3)
    with pytest.raises(ValueError, match="num_classes"):
        F.one_hot(tp.tensor([0]), -2)  # the wrapper checks the range


@pytest.mark.parametrize("device", DEVICES)
def test_normalize_matches_pytorch(device):
    torch = import_or_skip("torch")
    data = [[3.0, 4.0, 0.0], [0.0, 0.0, 0.0], [-1.0, 2.0, 2.0]]
    for p, dim in ((2.0, 1), (1.0, 0), (2.0, -1), (3.0, (0, 1))):
        x, tx = pair(data, device, "float64", torch)
        ours, theirs = F.normalize(x, p, dim), torch.nn.functional.normalize(tx, p, dim)
        numpy.testing.assert_allclose(values(ours), theirs.detach().numpy(), rtol=1e-12)
        ours.sum().backward()
        theirs.sum().backward()
        numpy.testing.assert_allclose(values(x.grad), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.gpu
def test_losses_capture_and_replay(quiet_device):
    logits = tp.tensor([[0.5, -1.0, 2.0]], device="cuda")
    labels = tp.tensor([[1.0, 0.0, 1.0]], device="cuda")
    classes = tp.tensor([2, 0], device="cuda")
    F.one_hot(classes, 3)  # the class indices are made once, eagerly, before a capture
    losses = [lambda: F.binary_cross_entropy_with_logits(logits, labels),
              lambda: F.binary_cross_entropy(logits.sigmoid(), labels),
              lambda: F.l1_loss(logits, labels), lambda: F.smooth_l1_loss(logits, labels),
              lambda: F.huber_loss(logits, labels), lambda: F.one_hot(classes, 3)]
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        outputs = [loss() for loss in losses]
    fresh = [[-0.25, 3.0, 1.0]]
    logits.copy_(tp.tensor(fresh, device="cuda"))
    graph.replay()
    cpu_logits = tp.tensor(fresh)
    cpu_labels = labels.cpu()
    expected = [F.binary_cross_entropy_with_logits(cpu_logits, cpu_labels),
                F.binary_cross_entropy(cpu_logits.sigmoid(), cpu_labels),
                F.l1_loss(cpu_logits, cpu_labels), F.smooth_l1_loss(cpu_logits, cpu_labels),
                F.huber_loss(cpu_logits, cpu_labels)]
    for output, want in zip(outputs, expected):
        numpy.testing.assert_allclose(values(output), values(want), rtol=1e-6)
    assert outputs[-1].tolist() == [[0, 0, 1], [1, 0, 0]]
