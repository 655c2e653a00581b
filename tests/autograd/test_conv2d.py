"""functional.conv2d and nn.Conv2d, on the CPU and on CUDA (marked gpu).

Ported from PyTorch's own tests: the OpInfo entry nn.functional.conv2d of
torch/testing/_internal/common_methods_invocations.py (sample_inputs_conv2d: strides, padding
as ints, pairs, 'valid' and 'same', dilation, groups, with and without bias, unbatched input;
values and gradients of input, weight and bias), and test/test_nn.py's Conv2d module checks
(test_Conv2d_groups_nobias-style grouped cases, the repr of _ConvNd.extra_repr, the weight's
shape and initial range, padding='same' refused with a stride, the divisibility errors).
Compared with PyTorch's where torch is installed.
"""
import math

import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
# (input shape, weight shape, stride, padding, dilation, groups), after sample_inputs_conv2d
CASES = [((2, 3, 7, 6), (4, 3, 3, 2), 1, 0, 1, 1),
         ((1, 4, 8, 8), (6, 2, 3, 3), 2, 1, 1, 2),
         ((2, 2, 5, 5), (2, 2, 3, 3), 1, "same", 2, 1),
         ((1, 3, 6, 6), (3, 1, 2, 2), (2, 1), (1, 0), (1, 2), 3),
         ((2, 2, 4, 5), (3, 2, 1, 1), 1, "valid", 1, 1),
         ((3, 5, 5), (2, 3, 3, 3), 1, 1, 1, 1)]


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("input_shape, weight_shape, stride, padding, dilation, groups", CASES)
def test_values_and_gradients_match_pytorch(device, bias, input_shape, weight_shape, stride,
                                            padding, dilation, groups):
    torch = pytest.importorskip("torch")
    if len(input_shape) == 3 and weight_shape[1] != input_shape[0]:
        weight_shape = (weight_shape[0], input_shape[0]) + weight_shape[2:]
    rng = numpy.random.default_rng(1)
    arrays = [rng.standard_normal(input_shape), rng.standard_normal(weight_shape),
              rng.standard_normal(weight_shape[0]) if bias else None]
    ours = [None if a is None else tp.tensor(a, device=device, requires_grad=True)
            for a in arrays]
    theirs = [None if a is None else torch.tensor(a, requires_grad=True) for a in arrays]
    result = F.conv2d(*ours, stride=stride, padding=padding, dilation=dilation, groups=groups)
    expected = torch.nn.functional.conv2d(*theirs, stride=stride, padding=padding,
                                          dilation=dilation, groups=groups)
    assert result.shape == tuple(expected.shape)
    numpy.testing.assert_allclose(values(result), expected.detach().numpy(), rtol=1e-12,
                                  atol=1e-12)
    upstream = rng.standard_normal(tuple(expected.shape))
    (result * tp.tensor(upstream, device=device)).sum().backward()
    (expected * torch.tensor(upstream)).sum().backward()
    for mine, reference in zip(ours, theirs):
        if mine is not None:
            numpy.testing.assert_allclose(values(mine.grad), reference.grad.numpy(),
                                          rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_float32_module_matches_pytorch_with_the_same_weights(device):
    torch = pytest.importorskip("torch")
    ours = nn.Conv2d(3, 8, kernel_size=3, stride=2, padding=1, device=device)
    theirs = torch.nn.Conv2d(3, 8, kernel_size=3, stride=2, padding=1)
    theirs.load_state_dict({k: torch.tensor(v.cpu().tolist()) for k, v in
                            ours.state_dict().items()})
    data = numpy.random.default_rng(2).standard_normal((4, 3, 9, 9)).astype(numpy.float32)
    numpy.testing.assert_allclose(values(ours(tp.tensor(data, device=device))),
                                  theirs(torch.tensor(data)).detach().numpy(), rtol=1e-5,
                                  atol=1e-5)


def test_module_attributes_repr_and_initialisation_as_pytorchs():
    torch = pytest.importorskip("torch")
    for args, kwargs in [((1, 4, 3), {"padding": 1}),
                         ((2, 4, (3, 5)), {"stride": 2, "padding": "valid", "groups": 2,
                                           "bias": False, "dilation": 2}),
                         ((4, 4, 3), {"padding": "same"})]:
        ours, theirs = nn.Conv2d(*args, **kwargs), torch.nn.Conv2d(*args, **kwargs)
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        for name in ("kernel_size", "stride", "padding", "dilation", "groups"):
            assert getattr(ours, name) == getattr(theirs, name), name
        assert ours.weight.shape == tuple(theirs.weight.shape)
    layer = nn.Conv2d(4, 16, 3, groups=2)
    bound = 1 / math.sqrt(4 // 2 * 3 * 3)
    assert values(layer.weight).max() <= bound and values(layer.weight).min() >= -bound
    assert values(layer.bias).max() <= bound and values(layer.bias).min() >= -bound
    assert layer(tp.ones(4, 5, 5)).shape == (16, 3, 3)  # unbatched


def test_refusals_follow_pytorch():
    x, w = tp.ones(1, 2, 5, 5), tp.ones(4, 2, 3, 3)
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input "
                                           r"to conv2d, but got input of size: \[2, 5\]"):
        F.conv2d(tp.ones(2, 5), w)
    with pytest.raises(RuntimeError, match=r"expected input\[1, 2, 5, 5\] to have 4 channels, "
                                           r"but got 2 channels instead"):
        F.conv2d(x, tp.ones(4, 4, 3, 3))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input"):
        F.conv2d(x, tp.ones(4, 2, 7, 7))
    with pytest.raises(ValueError, match="non-positive stride is not supported"):
        F.conv2d(x, w, stride=0)
    with pytest.raises(ValueError, match="negative padding is not supported"):
        F.conv2d(x, w, padding=-1)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        F.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        F.conv2d(x, w, padding="full")
    with pytest.raises(TypeError, match="stride"):
        F.conv2d(x, w, stride=(1, 2, 3))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv2d(4, 3, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode 'reflect' is not offered"):
        nn.Conv2d(1, 1, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")


@pytest.mark.gpu
def test_a_training_step_captures_after_a_warm_up_and_replays(quiet_device):
    torch = pytest.importorskip("torch")
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 6 * 6, 2)).to("cuda")
    reference = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
                                    torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 2))
    reference.load_state_dict({k: torch.tensor(v.cpu().tolist())
                               for k, v in model.state_dict().items()})
    rng = numpy.random.default_rng(3)
    static_x = tp.tensor(rng.standard_normal((2, 1, 6, 6)), dtype=tp.float32, device="cuda")
    model(static_x).sum().backward()  # the warm-up, as PyTorch's documentation does it
    model.zero_grad(set_to_none=False)
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        static_out = model(static_x)
        static_out.sum().backward()
    for _ in range(2):
        data = rng.standard_normal((2, 1, 6, 6)).astype(numpy.float32)
        static_x.copy_(tp.tensor(data, device="cuda"))
        model.zero_grad(set_to_none=False)
        graph.replay()
        reference.zero_grad()
        expected = reference(torch.tensor(data))
        expected.sum().backward()
        numpy.testing.assert_allclose(values(static_out), expected.detach().numpy(),
                                      rtol=1e-4, atol=1e-5)
        numpy.testing.assert_allclose(values(model[0].weight.grad),
                                      reference[0].weight.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_a_shape_first_seen_inside_a_capture_is_captured_and_not_cached(quiet_device):
    # Sizes no other test uses, so that their index tensors are made inside the capture (a
    # device arange, as PyTorch's): from the graph's pool, so the process-wide cache must not
    # keep them.
    from tensorplay._runtime.autograd import nn as runtime_nn
    x = tp.tensor(numpy.random.default_rng(5).standard_normal((1, 1, 60, 61)),
                  dtype=tp.float32, device="cuda")
    weight = tp.ones(1, 1, 29, 23, device="cuda")
    F.conv2d(tp.ones(1, 1, 3, 3, device="cuda"), tp.ones(1, 1, 1, 1, device="cuda"))  # loaded
    kept = set(runtime_nn._CLASS_INDICES)
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        captured = F.conv2d(x, weight)
    assert set(runtime_nn._CLASS_INDICES) == kept
    graph.replay()
    eager = F.conv2d(x, weight)
    assert (29, 0) in runtime_nn._CLASS_INDICES  # made eagerly: kept
    assert captured.shape == eager.shape == (1, 1, 32, 39)
    numpy.testing.assert_allclose(values(captured), values(eager), rtol=1e-5, atol=1e-4)
    graph.reset()
    numpy.testing.assert_allclose(values(F.conv2d(x, weight)), values(eager), rtol=1e-5)
