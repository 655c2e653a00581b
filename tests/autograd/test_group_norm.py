"""nn.GroupNorm and functional.group_norm, on the CPU and on CUDA (marked gpu), against
PyTorch where it is installed.

Ported from PyTorch's own tests: test/test_nn.py's TestNN.test_GroupNorm_general (inputs of
2 to 5 dimensions, one group, one group per channel and between, each against the mean and
variance of its group computed apart), the module_db entries of nn.GroupNorm
(torch/testing/_internal/common_modules.py, module_inputs_torch_nn_GroupNorm: affine or not,
eps, 1-D to 3-D spatial inputs; values and gradients of input, weight and bias), and the
errors of group_norm's checks (at least 2 dimensions, num_groups dividing the channels, weight
and bias of the channels' shape) and of nn.GroupNorm's constructor, with their messages.
"""
import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
# (input shape, num_groups), after test_GroupNorm_general and module_db's samples
CASES = [((3, 6), 3), ((3, 6, 5), 2), ((2, 6, 4, 3), 1), ((2, 6, 4, 3), 6), ((2, 4, 2, 3, 2), 2),
         ((1, 4, 7), 4)]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape, groups", CASES)
def test_values_and_gradients_match_pytorch(device, affine, shape, groups):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(3)
    arrays = [rng.normal(2.0, 3.0, shape), rng.normal(0, 1, shape[1]), rng.normal(0, 1, shape[1])]
    if not affine:
        arrays[1:] = [None, None]
    ours = [None if a is None else tp.tensor(a.tolist(), dtype=tp.float64, device=device,
                                             requires_grad=True) for a in arrays]
    theirs = [None if a is None else torch.tensor(a, requires_grad=True) for a in arrays]
    result = F.group_norm(ours[0], groups, ours[1], ours[2], eps=1e-3)
    expected = torch.nn.functional.group_norm(theirs[0], groups, theirs[1], theirs[2], eps=1e-3)
    numpy.testing.assert_allclose(values(result), expected.detach().numpy(), rtol=1e-12,
                                  atol=1e-12)
    upstream = rng.normal(0, 1, shape)
    (result * tp.tensor(upstream.tolist(), dtype=tp.float64, device=device)).sum().backward()
    (expected * torch.tensor(upstream)).sum().backward()
    for mine, reference in zip(ours, theirs):
        if mine is not None:
            numpy.testing.assert_allclose(values(mine.grad), reference.grad.numpy(),
                                          rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape, groups", CASES)
def test_each_group_has_mean_zero_and_variance_one(device, shape, groups):
    # test_GroupNorm_general: the statistics of each sample's group, computed apart
    data = numpy.random.default_rng(5).normal(4.0, 2.0, shape)
    result = values(F.group_norm(tp.tensor(data.tolist(), dtype=tp.float64, device=device),
                                 groups, eps=0.0))
    rows = result.reshape(shape[0], groups, -1)
    numpy.testing.assert_allclose(rows.mean(2), 0.0, atol=1e-12)
    numpy.testing.assert_allclose(rows.var(2), 1.0, rtol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_module_matches_pytorch_and_keeps_16_bit_inputs(device):
    torch = import_or_skip("torch")
    for args, kwargs in [((2, 4), {}), ((1, 4), {"eps": 1e-3, "affine": False}),
                         ((4, 4), {"bias": False})]:
        ours, theirs = nn.GroupNorm(*args, **kwargs), torch.nn.GroupNorm(*args, **kwargs)
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        for name, value in ours.state_dict().items():
            assert value.tolist() == theirs.state_dict()[name].tolist()
    module = nn.GroupNorm(2, 4, device=device)
    data = numpy.random.default_rng(6).normal(0, 1, (3, 4, 5))
    half = module(tp.tensor(data.tolist(), dtype=tp.float16, device=device))
    assert half.dtype is tp.float16
    expected = torch.nn.GroupNorm(2, 4)(torch.tensor(data, dtype=torch.float16).float())
    numpy.testing.assert_allclose(values(half), expected.detach().numpy(), rtol=2e-3,
                                  atol=2e-3)
    assert module(tp.zeros(0, 4, 3, device=device)).shape == (0, 4, 3)


def test_refusals_are_pytorchs():
    x = tp.ones(2, 4, 5)
    with pytest.raises(RuntimeError, match=r"Expected number of channels in input to be "
                                           r"divisible by num_groups, but got input of shape "
                                           r"\[2, 4, 5\] and num_groups=3"):
        F.group_norm(x, 3)
    with pytest.raises(RuntimeError, match="Expected at least 2 dimensions for input tensor "
                                           "but received 1"):
        F.group_norm(tp.ones(4), 2)
    for name in ("weight", "bias"):
        with pytest.raises(RuntimeError, match=fr"Expected {name} to be a vector of size equal "
                                               fr"to the number of channels in input, but got "
                                               fr"{name} of shape \[3\] and input of shape"):
            F.group_norm(x, 2, **{name: tp.ones(3)})
    with pytest.raises(ValueError, match=r"num_channels \(4\) must be divisible by num_groups "
                                         r"\(3\)"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ValueError, match="num_groups"):
        nn.GroupNorm(0, 4)
    with pytest.raises(TypeError, match="floating point"):
        F.group_norm(tp.ones(2, 4, dtype=tp.int64), 2)
    with pytest.raises(RuntimeError, match="Expected weight to be a vector"):
        nn.GroupNorm(2, 4)(tp.ones(2, 6, 3))  # the channels differ from the module's
