"""tensorplay.nn.init against PyTorch's torch.nn.init (CPU): the fans, the gains and the bounds
exactly, the deterministic fills by value and the random fills by their bounds and statistics;
the errors by type and message."""
import math

import numpy
import pytest

import tensorplay as tp
from tensorplay._python.init import _calculate_fan_in_and_fan_out  # not public: see api.yaml
from tensorplay.nn import init

from tests.autograd.against_pytorch import same_error
from tests.peers import import_or_skip

torch = import_or_skip("torch")
from torch.nn import init as torch_init  # noqa: E402

SHAPES = [(3, 4), (5, 2, 3), (4, 3, 2, 5), (2, 3, 1, 2, 2)]
NONLINEARITIES = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d", "sigmoid", "tanh", "relu",
                  "leaky_relu", "selu"]


@pytest.mark.parametrize("shape", SHAPES)
def test_fans_as_pytorch(shape):
    assert _calculate_fan_in_and_fan_out(tp.empty(*shape)) == \
        torch_init._calculate_fan_in_and_fan_out(torch.empty(*shape))


@pytest.mark.parametrize("shape", [(), (3,)])
def test_fans_refuse_fewer_than_two_dims(shape):
    same_error(lambda: _calculate_fan_in_and_fan_out(tp.empty(shape)),
               lambda: torch_init._calculate_fan_in_and_fan_out(torch.empty(shape)))
    same_error(lambda: init.xavier_uniform_(tp.empty(shape)),
               lambda: torch_init.xavier_uniform_(torch.empty(shape)))


@pytest.mark.parametrize("nonlinearity", NONLINEARITIES)
def test_gains_as_pytorch(nonlinearity):
    assert init.calculate_gain(nonlinearity) == torch_init.calculate_gain(nonlinearity)
    for slope in (0, 0.2, 3):
        assert init.calculate_gain(nonlinearity, slope) == \
            torch_init.calculate_gain(nonlinearity, slope)


@pytest.mark.parametrize("call", [lambda lib: lib.calculate_gain("softplus"),
                                  lambda lib: lib.calculate_gain("leaky_relu", True),
                                  lambda lib: lib.calculate_gain("leaky_relu", "x")])
def test_gain_errors_as_pytorch(call):
    same_error(lambda: call(init), lambda: call(torch_init))


def test_constant_fills_as_pytorch():
    for ours, theirs in ((init.zeros_, torch_init.zeros_), (init.ones_, torch_init.ones_),
                         (lambda t: init.constant_(t, 2.5), lambda t: torch_init.constant_(t, 2.5))):
        weight = tp.full((2, 3), 7.0, requires_grad=True)  # a leaf that requires grad: no_grad
        result = ours(weight)
        assert result is weight and weight.requires_grad
        assert weight.tolist() == theirs(torch.full((2, 3), 7.0, requires_grad=True)).tolist()
        assert weight.grad_fn is None


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
@pytest.mark.parametrize("nonlinearity,a", [("leaky_relu", 0), ("leaky_relu", math.sqrt(5)),
                                            ("relu", 0), ("tanh", 0)])
def test_kaiming_uniform_within_pytorch_bound(shape, mode, nonlinearity, a):
    fan_in, fan_out = torch_init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    bound = torch_init.calculate_gain(nonlinearity, a) * math.sqrt(
        3.0 / (fan_in if mode == "fan_in" else fan_out))
    weight = tp.empty(*shape, requires_grad=True)
    assert init.kaiming_uniform_(weight, a, mode, nonlinearity) is weight
    values = numpy.array(weight.tolist())
    assert (values >= -bound).all() and (values < bound).all()
    assert weight.grad_fn is None


def test_random_fills_by_statistics():
    count = 200_000
    for fill, bound in ((lambda t: init.kaiming_uniform_(t, nonlinearity="relu"),
                         math.sqrt(2.0) * math.sqrt(3.0 / 400)),
                        (lambda t: init.xavier_uniform_(t, gain=2.0),
                         2.0 * math.sqrt(6.0 / (400 + count // 400)))):
        values = numpy.array(fill(tp.empty(count // 400, 400)).tolist())
        assert values.min() >= -bound and values.max() < bound
        assert abs(values.mean()) < 0.01 * bound
        assert abs(values.std() - bound / math.sqrt(3.0)) < 0.01 * bound  # uniform's std
    values = numpy.array(init.normal_(tp.empty(count), 2.0, 0.5).tolist())
    assert abs(values.mean() - 2.0) < 0.01 and abs(values.std() - 0.5) < 0.01
    values = numpy.array(init.uniform_(tp.empty(count), -1.0, 3.0).tolist())
    assert values.min() >= -1.0 and values.max() < 3.0 and abs(values.mean() - 1.0) < 0.02


def test_generator_makes_fills_repeatable():
    for fill in (lambda t, g: init.uniform_(t, generator=g),
                 lambda t, g: init.normal_(t, generator=g),
                 lambda t, g: init.kaiming_uniform_(t, generator=g),
                 lambda t, g: init.xavier_uniform_(t, generator=g)):
        first = fill(tp.empty(4, 5), tp.Generator().manual_seed(3)).tolist()
        assert fill(tp.empty(4, 5), tp.Generator().manual_seed(3)).tolist() == first


def test_kaiming_errors_and_empty_tensor_as_pytorch():
    same_error(lambda: init.kaiming_uniform_(tp.empty(3, 4), mode="fan_avg"),
               lambda: torch_init.kaiming_uniform_(torch.empty(3, 4), mode="fan_avg"))
    same_error(lambda: init.kaiming_uniform_(tp.empty(3)),
               lambda: torch_init.kaiming_uniform_(torch.empty(3)))
    same_error(lambda: init.kaiming_uniform_(tp.empty(3, 4), nonlinearity="softplus"),
               lambda: torch_init.kaiming_uniform_(torch.empty(3, 4), nonlinearity="softplus"))
    empty = tp.empty(0, 4)
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        assert init.kaiming_uniform_(empty) is empty


def test_fills_refuse_what_is_not_a_tensor():
    with pytest.raises(TypeError, match="tensor"):
        init.zeros_(numpy.zeros(3))


@pytest.mark.gpu
def test_init_on_cuda():
    if not tp.cuda.is_available():
        pytest.skip("no CUDA device")
    weight = tp.empty(64, 32, device="cuda", requires_grad=True)
    init.kaiming_uniform_(weight, a=math.sqrt(5))
    bound = torch_init.calculate_gain("leaky_relu", math.sqrt(5)) * math.sqrt(3.0 / 32)
    values = numpy.array(weight.cpu().tolist())
    assert (abs(values) <= bound).all() and weight.grad_fn is None
    assert init.constant_(weight, 0.25).cpu().tolist() == [[0.25] * 32] * 64
