"""functional.conv1d / conv2d and nn.Conv1d / Conv2d, on the CPU and on CUDA (marked gpu).

Ported from PyTorch's own tests: the OpInfo entries nn.functional.conv1d and
nn.functional.conv2d of torch/testing/_internal/common_methods_invocations.py
(sample_inputs_conv1d / sample_inputs_conv2d: strides, padding as ints, tuples, 'valid' and
'same', dilation, groups, with and without bias, unbatched input; values and gradients of input,
weight and bias), and test/test_nn.py's Conv1d and Conv2d module checks (test_Conv2d_groups_nobias-
style grouped cases, the repr of _ConvNd.extra_repr, the weight's shape and initial range,
padding='same' refused with a stride, the divisibility errors, the padding_modes reflect,
replicate and circular). Compared with PyTorch's where torch is installed.
"""
import math

import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
# (input shape, weight shape, stride, padding, dilation, groups), after sample_inputs_conv1d
# and sample_inputs_conv2d
CASES = {"conv1d": [((1, 3, 4), (3, 3, 3), 1, 0, 1, 1),
                    ((2, 4, 8), (2, 2, 3), 2, 1, 1, 2),
                    ((1, 4, 5), (3, 4, 3), 1, "same", 2, 1),
                    ((1, 4, 5), (3, 4, 4), 1, "same", 1, 1),  # an even kernel: one more after
                    ((2, 6, 9), (6, 2, 2), (3,), (2,), (2,), 3),
                    ((1, 2, 5), (2, 2, 5), 1, "valid", 1, 1),
                    ((4, 7), (2, 4, 3), 1, 1, 1, 1)],
         "conv2d": [((2, 3, 7, 6), (4, 3, 3, 2), 1, 0, 1, 1),
                    ((1, 4, 8, 8), (6, 2, 3, 3), 2, 1, 1, 2),
                    ((2, 2, 5, 5), (2, 2, 3, 3), 1, "same", 2, 1),
                    ((1, 3, 6, 6), (3, 1, 2, 2), (2, 1), (1, 0), (1, 2), 3),
                    ((2, 2, 4, 5), (3, 2, 1, 1), 1, "valid", 1, 1),
                    ((3, 5, 5), (2, 3, 3, 3), 1, 1, 1, 1)]}

def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("name, input_shape, weight_shape, stride, padding, dilation, groups",
                         [(name,) + case for name, cases in CASES.items() for case in cases])
def test_values_and_gradients_match_pytorch(device, bias, name, input_shape, weight_shape,
                                            stride, padding, dilation, groups):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(1)
    arrays = [rng.standard_normal(input_shape), rng.standard_normal(weight_shape),
              rng.standard_normal(weight_shape[0]) if bias else None]
    ours = [None if a is None else tp.tensor(a, device=device, requires_grad=True)
            for a in arrays]
    theirs = [None if a is None else torch.tensor(a, requires_grad=True) for a in arrays]
    result = getattr(F, name)(*ours, stride=stride, padding=padding, dilation=dilation,
                              groups=groups)
    expected = getattr(torch.nn.functional, name)(*theirs, stride=stride, padding=padding,
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
@pytest.mark.parametrize("layer, kernel, shape", [("Conv1d", 5, (4, 3, 40)),
                                                  ("Conv2d", 3, (4, 3, 9, 9))])
def test_float32_module_matches_pytorch_with_the_same_weights(device, layer, kernel, shape):
    torch = import_or_skip("torch")
    ours = getattr(nn, layer)(3, 8, kernel_size=kernel, stride=2, padding=1, device=device)
    theirs = getattr(torch.nn, layer)(3, 8, kernel_size=kernel, stride=2, padding=1)
    theirs.load_state_dict({k: torch.tensor(v.cpu().tolist()) for k, v in
                            ours.state_dict().items()})
    data = numpy.random.default_rng(2).standard_normal(shape).astype(numpy.float32)
    numpy.testing.assert_allclose(values(ours(tp.tensor(data, device=device))),
                                  theirs(torch.tensor(data)).detach().numpy(), rtol=1e-5,
                                  atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("layer, options, shape",
                         [("Conv1d", {"padding": 2}, (2, 3, 7)),
                          ("Conv1d", {"padding": "same", "kernel_size": 4}, (3, 6)),
                          ("Conv2d", {"padding": (1, 2), "stride": 2}, (2, 3, 6, 5)),
                          ("Conv2d", {"padding": "same", "dilation": 2}, (1, 3, 5, 6))])
def test_padding_modes_match_pytorch(device, mode, layer, options, shape):
    # test/test_nn.py's module tests of Conv1d and Conv2d with padding_mode reflect, replicate
    # and circular (module_db's padding_mode samples): F.pad in that mode, then no padding.
    torch = import_or_skip("torch")
    options = {"kernel_size": 3, **options, "padding_mode": mode}
    ours = getattr(nn, layer)(3, 4, device=device, dtype=tp.float64, **options)
    theirs = getattr(torch.nn, layer)(3, 4, dtype=torch.float64, **options)
    theirs.load_state_dict({k: torch.tensor(v.cpu().tolist(), dtype=torch.float64)
                            for k, v in ours.state_dict().items()})
    assert repr(ours) == repr(theirs)
    assert ours._reversed_padding_repeated_twice == \
        tuple(theirs._reversed_padding_repeated_twice)
    data = numpy.random.default_rng(4).standard_normal(shape)
    x = tp.tensor(data, device=device, requires_grad=True)
    reference_x = torch.tensor(data, requires_grad=True)
    result, expected = ours(x), theirs(reference_x)
    assert result.shape == tuple(expected.shape)
    numpy.testing.assert_allclose(values(result), expected.detach().numpy(), rtol=1e-12,
                                  atol=1e-12)
    upstream = numpy.random.default_rng(5).standard_normal(tuple(expected.shape))
    (result * tp.tensor(upstream, device=device)).sum().backward()
    (expected * torch.tensor(upstream)).sum().backward()
    numpy.testing.assert_allclose(values(x.grad), reference_x.grad.numpy(), rtol=1e-12,
                                  atol=1e-12)
    numpy.testing.assert_allclose(values(ours.weight.grad), theirs.weight.grad.numpy(),
                                  rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layer, kernel", [("Conv1d", (5,)), ("Conv2d", (3, 5))])
def test_module_attributes_repr_and_initialisation_as_pytorchs(layer, kernel):
    torch = import_or_skip("torch")
    for args, kwargs in [((1, 4, 3), {"padding": 1}),
                         ((2, 4, kernel), {"stride": 2, "padding": "valid", "groups": 2,
                                           "bias": False, "dilation": 2}),
                         ((4, 4, 3), {"padding": "same"})]:
        ours = getattr(nn, layer)(*args, **kwargs)
        theirs = getattr(torch.nn, layer)(*args, **kwargs)
        assert repr(ours) == repr(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        for name in ("kernel_size", "stride", "padding", "dilation", "groups"):
            assert getattr(ours, name) == getattr(theirs, name), name
        assert ours.weight.shape == tuple(theirs.weight.shape)
    spatial = len(kernel)
    module = getattr(nn, layer)(4, 16, 3, groups=2)
    bound = 1 / math.sqrt(4 // 2 * 3 ** spatial)
    assert values(module.weight).max() <= bound and values(module.weight).min() >= -bound
    assert values(module.bias).max() <= bound and values(module.bias).min() >= -bound
    assert module(tp.ones((4,) + (5,) * spatial)).shape == (16,) + (3,) * spatial  # unbatched


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
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")


CONV1D_ERRORS = [  # (call, PyTorch's message), each a RuntimeError in both libraries
    (lambda F, lib: F.conv1d(lib.ones(2, 3), lib.ones(1, 3, 2)),
     "Given groups=1, weight of size [1, 3, 2], expected input[1, 2, 3] to have 3 channels, "
     "but got 2 channels instead"),
    (lambda F, lib: F.conv1d(lib.ones(1, 3, 2), lib.ones(1, 3, 4)),
     "Calculated padded input size per channel: (2). Kernel size: (4). Kernel size can't be "
     "greater than actual input size"),
    (lambda F, lib: F.conv1d(lib.ones(1, 3, 4, 5), lib.ones(1, 3, 2)),
     "Expected 2D (unbatched) or 3D (batched) input to conv1d, but got input of size: "
     "[1, 3, 4, 5]"),
    (lambda F, lib: F.conv1d(lib.ones(1, 4, 4), lib.ones(3, 2, 2), groups=2),
     "Given groups=2, expected weight to be divisible by 2 at dimension 0"),  # PyTorch then
    # prints the size in two brackets, [[3, 2, 2]]; tensorplay in one
]


@pytest.mark.parametrize("call, message", CONV1D_ERRORS)
def test_conv1d_errors_are_pytorchs(call, message):
    with pytest.raises(RuntimeError) as raised:
        call(F, tp)
    assert message in str(raised.value)
    torch = import_or_skip("torch")
    with pytest.raises(RuntimeError) as theirs:
        call(torch.nn.functional, torch)
    assert message in str(theirs.value)


def test_conv1d_refusals_name_the_argument():
    x, w = tp.ones(1, 2, 5), tp.ones(4, 2, 3)
    with pytest.raises(TypeError, match=r"stride must be an int or a tuple of one int, got "
                                        r"\(1, 1\)"):
        F.conv1d(x, w, stride=(1, 1))  # PyTorch: "expected stride to be a single integer"
    with pytest.raises(ValueError, match="non-positive stride is not supported"):
        F.conv1d(x, w, stride=0)
    with pytest.raises(ValueError, match="negative padding is not supported"):
        F.conv1d(x, w, padding=-1)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        F.conv1d(x, w, stride=2, padding="same")
    with pytest.raises(RuntimeError, match=r"weight must be 3-D \(out_channels, in_channels / "
                                           r"groups, kW\)"):
        F.conv1d(x, tp.ones(4, 2, 3, 3))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv1d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        nn.Conv1d(2, 2, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match=r"Argument #4: Padding size should be less than"):
        nn.Conv1d(1, 1, 9, padding=4, padding_mode="reflect")(tp.ones(1, 1, 4))


@pytest.mark.gpu
@pytest.mark.parametrize("layer, shape", [("Conv1d", (2, 1, 12)), ("Conv2d", (2, 1, 6, 6))])
def test_a_training_step_captures_after_a_warm_up_and_replays(quiet_device, layer, shape):
    torch = import_or_skip("torch")
    features = 4 * math.prod(shape[2:])
    model = nn.Sequential(getattr(nn, layer)(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(features, 2)).to("cuda")
    reference = torch.nn.Sequential(getattr(torch.nn, layer)(1, 4, 3, padding=1),
                                    torch.nn.ReLU(), torch.nn.Flatten(),
                                    torch.nn.Linear(features, 2))
    reference.load_state_dict({k: torch.tensor(v.cpu().tolist())
                               for k, v in model.state_dict().items()})
    rng = numpy.random.default_rng(3)
    static_x = tp.tensor(rng.standard_normal(shape), dtype=tp.float32, device="cuda")
    model(static_x).sum().backward()  # the warm-up, as PyTorch's documentation does it
    model.zero_grad(set_to_none=False)
    graph = tp.cuda.CUDAGraph()
    with tp.cuda.graph(graph):
        static_out = model(static_x)
        static_out.sum().backward()
    for _ in range(2):
        data = rng.standard_normal(shape).astype(numpy.float32)
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
