"""nn.BatchNorm1d, BatchNorm2d, BatchNorm3d and nn.functional.batch_norm: values, gradients and
running statistics against PyTorch after the same steps, the buffers, the errors, and (marked
gpu) the same on CUDA and inside a captured training step.

Ported from PyTorch's own tests:
- torch/testing/_internal/common_methods_invocations.py, the OpInfo nn.functional.batch_norm
  (sample_inputs_batch_norm): its input shapes, training and evaluation, momentum and eps
  (negative momenta included), weight and bias each None, and training without running
  statistics; values and the gradients of input, weight and bias compared with PyTorch's;
- test/test_nn.py, TestNNDeviceType._test_batchnorm_simple_average (momentum=None: the running
  statistics are the cumulative average of the batches, reset_running_stats()),
  _test_batchnorm_update_stats (training moves the statistics and counts the batch, eval does
  neither), _test_batchnorm_eval (eval passes repeat; with track_running_stats=False train and
  eval agree), test_batchnorm_buffer_update_when_stats_are_not_tracked,
  test_batchnorm_raises_error_if_less_than_one_value_per_channel, and the expected-dimensions
  errors of BatchNorm1d/2d/3d (test_batchnorm_input_dim checks in _BatchNorm._check_input_dim);
- torch/testing/_internal/common_modules.py, module_inputs_torch_nn_BatchNorm1d/2d/3d: the
  constructor forms (affine=False, track_running_stats=False, momentum=None, eps) and their
  reprs and state_dict keys, here checked to load across the two libraries.
"""
import inspect
import re

import numpy
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

from tests.peers import import_or_skip

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
MODULES = {1: "BatchNorm1d", 2: "BatchNorm2d", 3: "BatchNorm3d"}


def values(tensor):
    return numpy.array(tensor.detach().to(tp.float64).cpu().tolist(), dtype=numpy.float64)


def ours(array, device="cpu", requires_grad=False):
    return tp.tensor(array.tolist(), dtype=tp.float64, device=device,
                     requires_grad=requires_grad)


def close(mine, want, rtol=1e-10, atol=1e-12):
    numpy.testing.assert_allclose(values(mine), want.detach().double().numpy(), rtol=rtol,
                                  atol=atol)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name, shape", [("BatchNorm1d", (5, 3)), ("BatchNorm1d", (4, 3, 6)),
                                         ("BatchNorm2d", (2, 3, 4, 5)),
                                         ("BatchNorm3d", (2, 3, 2, 3, 2))])
@pytest.mark.parametrize("settings", [{}, {"momentum": 0.3, "eps": 1e-3}, {"momentum": None},
                                      {"affine": False}, {"bias": False},
                                      {"track_running_stats": False}])
def test_training_steps_then_eval_match_pytorch(device, name, shape, settings):
    torch = import_or_skip("torch")
    # PyTorch's bias= (and its place in the repr) came in 2.13; ours has it whatever torch says.
    torch_bias = "bias" in inspect.signature(torch.nn.BatchNorm1d).parameters
    if "bias" in settings and not torch_bias:
        pytest.skip(f"PyTorch {torch.__version__}'s BatchNorm takes no bias argument")
    rng = numpy.random.default_rng(7)
    mine = getattr(nn, name)(3, **settings, device=device, dtype=tp.float64)
    theirs = getattr(torch.nn, name)(3, **settings, dtype=torch.float64)
    assert (repr(mine) if torch_bias else re.sub(r" bias=\w+,", "", repr(mine))) == repr(theirs)
    assert list(mine.state_dict()) == list(theirs.state_dict())
    if mine.weight is not None:  # a learned scale and shift that are not the identity
        start = {"weight": rng.standard_normal(3) + 1, "bias": rng.standard_normal(3)}
        with tp.no_grad(), torch.no_grad():
            for key, array in start.items():
                if getattr(mine, key) is not None:
                    getattr(mine, key).copy_(ours(array, device))
                    getattr(theirs, key).copy_(torch.tensor(array))
    for step in range(4):
        if step == 3:
            mine.eval()
            theirs.eval()
        data = rng.standard_normal(shape) * 2 + 1
        upstream = rng.standard_normal(shape)
        x = ours(data, device, requires_grad=True)
        t = torch.tensor(data, requires_grad=True)
        output, expected = mine(x), theirs(t)
        close(output, expected)
        (output * ours(upstream, device)).sum().backward()
        (expected * torch.tensor(upstream)).sum().backward()
        close(x.grad, t.grad, rtol=1e-8, atol=1e-10)
        for key in ("weight", "bias"):
            if getattr(theirs, key) is not None:
                close(getattr(mine, key).grad, getattr(theirs, key).grad, rtol=1e-8,
                      atol=1e-10)
        for key, buffer in theirs.named_buffers():
            close(getattr(mine, key), buffer)
    if theirs.num_batches_tracked is not None:
        assert mine.num_batches_tracked.dtype == tp.int64
        assert mine.num_batches_tracked.item() == 3


# The OpInfo's sample inputs (sample_inputs_batch_norm): shape and keyword arguments.
OPINFO_CASES = [((5, 5, 5), {"training": True, "momentum": 0.5, "eps": 0.6}),
                ((3, 2, 4), {"training": False, "momentum": -1.2}),
                ((3, 1), {"training": True, "momentum": 0.0}),
                ((3, 2, 3, 4), {"training": True, "momentum": -1.0, "eps": 0.5}),
                ((3, 2, 3, 4), {"training": False, "momentum": -1.0, "eps": 0.5}),
                ((2, 1), {})]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape, kwargs", OPINFO_CASES)
@pytest.mark.parametrize("weighted, biased", [(True, True), (True, False), (False, True),
                                              (False, False)])
def test_functional_matches_pytorch(device, shape, kwargs, weighted, biased):
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(11)
    channels = shape[1]
    data = rng.standard_normal(shape)
    upstream = rng.standard_normal(shape)
    stats = [rng.uniform(0, 1, channels), rng.uniform(0.5, 2, channels)]
    affine = [rng.standard_normal(channels) if weighted else None,
              rng.standard_normal(channels) if biased else None]
    x = ours(data, device, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    running = [ours(array, device) for array in stats]
    their_running = [torch.tensor(array) for array in stats]
    parameters = [None if a is None else ours(a, device, requires_grad=True) for a in affine]
    their_parameters = [None if a is None else torch.tensor(a, requires_grad=True)
                        for a in affine]
    output = F.batch_norm(x, *running, *parameters, **kwargs)
    expected = torch.nn.functional.batch_norm(t, *their_running, *their_parameters, **kwargs)
    close(output, expected)
    (output * ours(upstream, device)).sum().backward()
    (expected * torch.tensor(upstream)).sum().backward()
    close(x.grad, t.grad, rtol=1e-8, atol=1e-10)
    for mine, theirs in zip(parameters, their_parameters):
        if theirs is not None:
            close(mine.grad, theirs.grad, rtol=1e-8, atol=1e-10)
    for mine, theirs in zip(running, their_running):  # moved in place while training
        close(mine, theirs)


def test_functional_training_without_running_statistics():
    # The OpInfo's last sample: training with no running statistics, weight or bias.
    torch = import_or_skip("torch")
    data = numpy.random.default_rng(2).standard_normal((1, 2, 3))
    x = ours(data, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    output = F.batch_norm(x, None, None, training=True)
    expected = torch.nn.functional.batch_norm(t, None, None, training=True)
    close(output, expected)
    (output ** 3).sum().backward()
    (expected ** 3).sum().backward()
    close(x.grad, t.grad, rtol=1e-8, atol=1e-10)


def test_simple_average():
    # _test_batchnorm_simple_average: momentum=None averages the batches seen since the reset.
    module = nn.BatchNorm1d(3, momentum=None)
    assert values(module.running_mean).tolist() == [0.0] * 3
    assert values(module.running_var).tolist() == [1.0] * 3
    first, second = tp.rand(4, 3), tp.rand(4, 3)
    result1 = module(first)
    mean1, var1 = values(module.running_mean), values(module.running_var)
    assert (mean1 != 0).all() and (var1 != 1).all()
    module.reset_running_stats()
    assert values(module.running_mean).tolist() == [0.0] * 3
    assert values(module.running_var).tolist() == [1.0] * 3
    assert module.num_batches_tracked.item() == 0
    result2 = module(second)
    mean2, var2 = values(module.running_mean), values(module.running_var)
    module.reset_running_stats()
    numpy.testing.assert_allclose(values(module(first)), values(result1), rtol=1e-6)
    numpy.testing.assert_allclose(values(module(second)), values(result2), rtol=1e-6)
    numpy.testing.assert_allclose(values(module.running_mean), (mean1 + mean2) / 2, rtol=1e-6)
    numpy.testing.assert_allclose(values(module.running_var), (var1 + var2) / 2, rtol=1e-6)
    assert module.num_batches_tracked.item() == 2


def test_update_stats_while_training_only():
    # _test_batchnorm_update_stats
    module = nn.BatchNorm1d(3)
    data = tp.rand(4, 3)
    before = [values(module.running_mean), values(module.running_var)]
    module(data)
    assert (values(module.running_mean) != before[0]).all()
    assert (values(module.running_var) != before[1]).all()
    assert module.num_batches_tracked.item() == 1
    module.eval()
    before = [values(module.running_mean), values(module.running_var)]
    module(data)
    assert (values(module.running_mean) == before[0]).all()
    assert (values(module.running_var) == before[1]).all()
    assert module.num_batches_tracked.item() == 1


def test_the_running_statistics_are_updated_in_place():
    # A captured step replays into the buffers it captured: they must keep their memory.
    module = nn.BatchNorm2d(2)
    buffers = [module.running_mean, module.running_var, module.num_batches_tracked]
    pointers = [buffer.data_ptr() for buffer in buffers]
    module(tp.randn(3, 2, 2, 2))
    assert [buffer.data_ptr() for buffer in buffers] == pointers
    assert all(now is then for now, then in zip(
        [module.running_mean, module.running_var, module.num_batches_tracked], buffers))
    assert not module.running_mean.requires_grad and module.running_mean.grad_fn is None


def test_eval_repeats_and_untracked_statistics_agree_in_both_modes():
    # _test_batchnorm_eval
    for ndim in (2, 3):
        module = nn.BatchNorm1d(3).eval()
        data = tp.rand(*[3] * ndim, requires_grad=True)
        grad = tp.rand(*[3] * ndim)
        results = []
        for _ in range(2):
            data.grad = None
            output = module(data)
            output.backward(grad)
            results.append((values(output), values(data.grad)))
        assert (results[0][0] == results[1][0]).all() and (results[0][1] == results[1][1]).all()
    module = nn.BatchNorm1d(3, track_running_stats=False)
    data = tp.rand(4, 3, requires_grad=True)
    grad = tp.rand(4, 3)
    results = []
    for mode in (True, False):
        module.train(mode)
        data.grad = None
        output = module(data)
        output.backward(grad)
        results.append((values(output), values(data.grad)))
    assert (results[0][0] == results[1][0]).all() and (results[0][1] == results[1][1]).all()
    assert module.running_mean is None and module.num_batches_tracked is None


def test_buffers_unchanged_when_stats_are_not_tracked():
    # test_batchnorm_buffer_update_when_stats_are_not_tracked: the buffers normalise in eval
    # mode but a training pass leaves them (and the count) as they were.
    module = nn.BatchNorm1d(4, track_running_stats=True)
    module.track_running_stats = False
    before = [values(buffer) for _, buffer in module.named_buffers()]
    module(tp.rand(32, 4))
    assert all((values(buffer) == old).all()
               for (_, buffer), old in zip(module.named_buffers(), before))


def test_state_dict_loads_across_libraries():
    torch = import_or_skip("torch")
    theirs = torch.nn.BatchNorm2d(3)
    theirs(torch.randn(4, 3, 2, 2))
    theirs(torch.randn(4, 3, 2, 2))
    mine = nn.BatchNorm2d(3)
    result = mine.load_state_dict({key: tp.from_numpy(value.numpy())
                                   for key, value in theirs.state_dict().items()})
    assert str(result) == "<All keys matched successfully>"
    assert mine.num_batches_tracked.item() == 2
    for key, value in theirs.state_dict().items():
        close(mine.state_dict()[key], value, rtol=0, atol=0)
    mine(tp.randn(4, 3, 2, 2))
    back = torch.nn.BatchNorm2d(3)
    back.load_state_dict({key: torch.from_numpy(numpy.asarray(value.tolist())).to(
        getattr(torch, str(value.dtype).split(".")[-1]))
        for key, value in mine.state_dict().items()})
    assert back.num_batches_tracked.item() == 3
    close(mine.running_var, back.running_var, rtol=1e-7)
    names = [key for key, _ in nn.BatchNorm1d(3, affine=False).named_parameters()]
    assert names == []
    assert list(nn.BatchNorm1d(3, track_running_stats=False).state_dict()) == ["weight", "bias"]


def test_parameters_and_buffers_start_as_pytorch():
    norm = nn.BatchNorm3d(4, dtype=tp.float64)
    assert values(norm.weight).tolist() == [1.0] * 4
    assert values(norm.bias).tolist() == [0.0] * 4
    assert norm.running_mean.dtype == tp.float64 and norm.num_batches_tracked.dtype == tp.int64
    assert norm.num_batches_tracked.shape == ()
    assert [key for key, _ in norm.named_buffers()] == ["running_mean", "running_var",
                                                        "num_batches_tracked"]
    norm(tp.randn(2, 4, 1, 2, 2, dtype=tp.float64))
    with tp.no_grad():
        norm.weight.fill_(3.0)
    norm.reset_parameters()
    assert values(norm.weight).tolist() == [1.0] * 4
    assert values(norm.running_mean).tolist() == [0.0] * 4
    assert norm.num_batches_tracked.item() == 0
    assert norm.bias is not None and nn.BatchNorm1d(2, bias=False).bias is None


def test_16_bit_inputs_compute_in_float32():
    torch = import_or_skip("torch")
    data = numpy.random.default_rng(5).standard_normal((6, 3, 2))
    for module_dtype in ("float32", "bfloat16"):
        mine = nn.BatchNorm1d(3, dtype=getattr(tp, module_dtype))
        theirs = torch.nn.BatchNorm1d(3, dtype=getattr(torch, module_dtype))
        x = tp.tensor(data.tolist(), dtype=tp.bfloat16)
        output = mine(x)
        expected = theirs(torch.tensor(data, dtype=torch.bfloat16))
        assert output.dtype == tp.bfloat16 and mine.running_mean.dtype == getattr(tp,
                                                                                  module_dtype)
        close(output, expected, rtol=1e-2, atol=1e-2)
        close(mine.running_var, theirs.running_var, rtol=1e-2)


def test_an_empty_batch_leaves_the_statistics():
    torch = import_or_skip("torch")
    mine, theirs = nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    x = tp.zeros(0, 3, requires_grad=True)
    output = mine(x)
    theirs(torch.zeros(0, 3))
    assert output.shape == (0, 3)
    output.sum().backward()
    assert values(mine.weight.grad).tolist() == [0.0] * 3
    for key, buffer in theirs.named_buffers():
        close(getattr(mine, key), buffer)


@pytest.mark.parametrize("name, wrong", [("BatchNorm1d", (2, 3, 4, 5)), ("BatchNorm1d", (3,)),
                                         ("BatchNorm2d", (2, 3, 4)),
                                         ("BatchNorm3d", (2, 3, 4, 4))])
def test_wrong_dimensions_are_refused_with_pytorchs_message(name, wrong):
    torch = import_or_skip("torch")
    with pytest.raises(ValueError) as expected:
        getattr(torch.nn, name)(3)(torch.zeros(wrong))
    module = getattr(nn, name)(3)
    with pytest.raises(ValueError) as raised:
        module(tp.zeros(*wrong))
    assert str(raised.value) == str(expected.value)
    assert module.num_batches_tracked.item() == 0


def test_one_value_per_channel_is_refused_while_training():
    # test_batchnorm_raises_error_if_less_than_one_value_per_channel
    module = nn.BatchNorm1d(10)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training, "
                                         r"got input size \(1, 10, 1\)"):
        module(tp.rand(1, 10, 1))
    # refused before anything changed
    assert module.num_batches_tracked.item() == 0
    assert values(module.running_var).tolist() == [1.0] * 10
    module.eval()
    assert module(tp.rand(1, 10)).shape == (1, 10)  # evaluation needs no batch
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.batch_norm(tp.rand(1, 3), None, None, training=True)


def test_functional_errors_follow_pytorch():
    x = tp.randn(4, 3)
    stats = tp.zeros(3), tp.ones(3)
    with pytest.raises(ValueError, match="running_mean must be defined in evaluation mode"):
        F.batch_norm(x, None, None)
    with pytest.raises(ValueError, match="running_var must be defined in evaluation mode"):
        F.batch_norm(x, stats[0], None)
    with pytest.raises(ValueError, match="either both be None or neither be None"):
        F.batch_norm(x, stats[0], None, training=True)
    with pytest.raises(ValueError, match="running_mean should contain 3 elements not 4"):
        F.batch_norm(x, tp.zeros(4), stats[1])
    with pytest.raises(ValueError, match="weight should contain 3 elements not 2"):
        F.batch_norm(x, *stats, weight=tp.ones(2))
    with pytest.raises(ValueError, match="bias must be 1-dimensional"):
        F.batch_norm(x, *stats, bias=tp.ones(3, 1))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        F.batch_norm(tp.randn(3), *stats)
    with pytest.raises(TypeError, match="floating point"):
        F.batch_norm(tp.ones(4, 3, dtype=tp.int64), *stats)
    with pytest.raises(TypeError, match="mixed dtype"):
        F.batch_norm(x, tp.zeros(3, dtype=tp.float64), stats[1])
    with pytest.raises(TypeError, match="running_var"):
        F.batch_norm(x, stats[0], [1.0, 1.0, 1.0])
    with pytest.raises(TypeError, match="momentum"):
        F.batch_norm(x, *stats, momentum=None)
    with pytest.raises(TypeError, match="training"):
        F.batch_norm(x, *stats, training=1)
    # a refused training call leaves the statistics as they were
    with pytest.raises(ValueError):
        F.batch_norm(x, *stats, weight=tp.ones(2), training=True)
    assert values(stats[0]).tolist() == [0.0] * 3


def test_constructor_arguments_are_checked():
    with pytest.raises(TypeError, match="num_features"):
        nn.BatchNorm1d(3.0)
    with pytest.raises(ValueError, match="num_features"):
        nn.BatchNorm1d(-1)
    with pytest.raises(TypeError, match="momentum"):
        nn.BatchNorm2d(3, momentum="fast")
    with pytest.raises(TypeError, match="eps"):
        nn.BatchNorm2d(3, eps=None)
    with pytest.raises(TypeError, match="affine"):
        nn.BatchNorm2d(3, affine=1)
    with pytest.raises(TypeError, match="dtype"):
        nn.BatchNorm1d(3, dtype=tp.int64)
    assert repr(nn.BatchNorm1d(0)) == ("BatchNorm1d(0, eps=1e-05, momentum=0.1, affine=True, "
                                       "bias=True, track_running_stats=True)")


def training_steps_against_pytorch(device, momentum, captured):
    """Four training steps of BatchNorm1d against PyTorch's: the first eager (the warm-up that
    makes the gradients), the others eager or (captured) replays of one captured step fed new
    batches; each compared with PyTorch's output, gradients and buffers."""
    torch = import_or_skip("torch")
    rng = numpy.random.default_rng(3)
    batches = [rng.standard_normal((4, 3, 5)) * 3 + 2 for _ in range(4)]
    upstream = rng.standard_normal((4, 3, 5))
    norm = nn.BatchNorm1d(3, momentum=momentum, device=device)
    reference = torch.nn.BatchNorm1d(3, momentum=momentum)
    x = tp.tensor(batches[0].tolist(), device=device, requires_grad=True)
    weights = tp.tensor(upstream.tolist(), device=device)

    def step():
        output = norm(x)
        (output * weights).sum().backward()
        return output

    output = step()
    (reference(torch.tensor(batches[0], dtype=torch.float32)) * torch.tensor(
        upstream)).sum().backward()
    if captured:
        graph = tp.cuda.CUDAGraph()
        with tp.cuda.graph(graph):
            output = step()
        assert norm.num_batches_tracked.item() == 1  # the capture itself moves nothing
    for data in batches[1:]:
        with tp.no_grad():
            x.copy_(tp.tensor(data.tolist(), device=device))
            x.grad.zero_()
            norm.weight.grad.zero_()
        if captured:
            graph.replay()
        else:
            output = step()
        t = torch.tensor(data, dtype=torch.float32, requires_grad=True)
        reference.weight.grad = None
        expected = reference(t)
        (expected * torch.tensor(upstream)).sum().backward()
        close(output, expected, rtol=1e-4, atol=1e-5)
        close(x.grad, t.grad, rtol=1e-3, atol=1e-5)
        close(norm.weight.grad, reference.weight.grad, rtol=1e-4, atol=1e-5)
        for key, buffer in reference.named_buffers():
            close(getattr(norm, key), buffer, rtol=1e-5, atol=1e-6)
    assert norm.num_batches_tracked.item() == 4


@pytest.mark.parametrize("momentum", [0.1, None])
def test_eager_training_steps_match_pytorch(momentum):
    training_steps_against_pytorch("cpu", momentum, captured=False)


@pytest.mark.gpu
@pytest.mark.parametrize("momentum", [0.1, None])
def test_a_captured_training_step_moves_the_statistics_at_every_replay(quiet_device, momentum):
    training_steps_against_pytorch("cuda", momentum, captured=True)
