"""tensorplay.nn: Module registration, iteration, modes, devices and state_dict; Parameter; the
layers (Linear's shapes, order and initial distribution, ReLU, Sequential, Dropout); PyTorch's
errors. CPU throughout, with the device moves and Dropout under the gpu marker too."""
import math

import numpy
import pytest

import tensorplay as tp
from tensorplay import nn

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


class TwoLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(3, 4)
        self.second = nn.Linear(4, 2, bias=False)
        self.register_buffer("steps", tp.zeros(1))

    def forward(self, x):
        return self.second(self.first(x).relu())


def test_parameter_is_a_leaf_tensor_sharing_its_data():
    data = tp.tensor([1.0, 2.0])
    parameter = nn.Parameter(data)
    assert isinstance(parameter, tp.Tensor) and isinstance(parameter, nn.Parameter)
    assert parameter.requires_grad and parameter.is_leaf and parameter.grad is None
    assert parameter.data_ptr() == data.data_ptr()
    data[0] = 5.0
    assert parameter.tolist() == [5.0, 2.0]
    assert repr(parameter).startswith("Parameter containing:\n")
    assert not nn.Parameter(data, requires_grad=False).requires_grad
    assert nn.Parameter().shape == (0,) and nn.Parameter().dtype == tp.float32


def test_parameter_refuses_what_cannot_be_one():
    with pytest.raises(TypeError, match="Parameter: data must be a tensor, got"):
        nn.Parameter([1.0])
    with pytest.raises(RuntimeError, match="only tensors of floating point dtype can require"):
        nn.Parameter(tp.tensor([1, 2]))
    assert not nn.Parameter(tp.tensor([1, 2]), requires_grad=False).requires_grad


def test_parameters_follow_registration_order_with_dotted_names():
    model = TwoLayers()
    assert [name for name, _ in model.named_parameters()] == \
        ["first.weight", "first.bias", "second.weight"]
    assert [p.shape for p in model.parameters()] == [(4, 3), (4,), (2, 4)]
    assert [p.shape for p in model.parameters(recurse=False)] == []
    assert [name for name, _ in model.named_buffers()] == ["steps"]
    assert list(model.children()) == [model.first, model.second]
    assert [name for name, _ in model.named_modules()] == ["", "first", "second"]
    assert model.second.bias is None
    # A module's own parameters and buffers come before its children's, as PyTorch's.
    assert list(model.state_dict()) == ["steps", "first.weight", "first.bias", "second.weight"]


def test_a_shared_module_or_parameter_appears_once():
    layer = nn.Linear(2, 2)
    model = nn.Sequential(layer, nn.ReLU(), layer)
    assert len(list(model.parameters())) == 2
    assert len(list(model.modules())) == 3


def test_attributes_reassign_and_delete_like_pytorch():
    model = TwoLayers()
    with pytest.raises(TypeError, match=r"cannot assign 'Tensor' as parameter 'weight' "
                                        r"\(tensorplay.nn.Parameter or None expected\)"):
        model.first.weight = tp.zeros(4, 3)
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'first'"):
        model.first = 3
    with pytest.raises(TypeError, match="cannot assign 'int' as buffer 'steps'"):
        model.steps = 3
    model.steps = tp.ones(1)
    assert model.state_dict()["steps"].tolist() == [1.0]
    model.first = None
    assert [name for name, _ in model.named_parameters()] == ["second.weight"]
    del model.second
    assert list(model.parameters()) == []
    with pytest.raises(AttributeError, match="'TwoLayers' object has no attribute 'second'"):
        model.second


def test_registering_checks_names_and_values_first():
    model = nn.Module()
    with pytest.raises(KeyError, match="parameter name can.+t be empty or contain"):
        model.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="cannot assign 'Tensor' object to parameter 'w'"):
        model.register_parameter("w", tp.zeros(1))
    model.plain = 1
    with pytest.raises(KeyError, match="attribute 'plain' already exists"):
        model.register_buffer("plain", tp.zeros(1))
    with pytest.raises(TypeError, match="module must be a tensorplay.nn.Module or None"):
        model.add_module("child", 3)
    assert list(model.parameters()) == [] and list(model.buffers()) == []


@pytest.mark.parametrize("name", ["train", "state_dict", "zero_grad", "forward", "training",
                                  "parameters", "register_parameter", "__call__"])
def test_a_parameter_or_module_under_a_name_the_class_has_is_refused(name):
    # A registration under a method's name would never be found (the method comes first), so
    # it is refused as register_parameter() refuses it; PyTorch takes the Module, not us.
    model = TwoLayers()
    before = [key for key, _ in model.named_parameters()]
    for value in (nn.Parameter(tp.ones(1)), nn.Linear(1, 1)):
        with pytest.raises(KeyError, match=f"attribute '{name}' already exists"):
            setattr(model, name, value)
        with pytest.raises(KeyError, match=f"attribute '{name}' already exists"):
            model.register_parameter(name, None) if isinstance(value, nn.Parameter) else \
                model.add_module(name, value)
    assert [key for key, _ in model.named_parameters()] == before
    assert callable(model.train) and model.training is True


def test_names_of_the_instance_may_be_registered_over():
    model = nn.Module()
    model.plain = 1  # an instance attribute, not the class's: replaced, as in PyTorch
    model.plain = nn.Parameter(tp.ones(1))
    assert [name for name, _ in model.named_parameters()] == ["plain"]
    model.plain = nn.Parameter(tp.zeros(1))  # a registered name takes a new Parameter
    assert model.plain.tolist() == [0.0]


def test_assigning_before_init_names_the_fix():
    class Early(nn.Module):
        def __init__(self):
            self.layer = nn.Linear(1, 1)
            super().__init__()

    with pytest.raises(AttributeError, match="cannot assign child modules before "
                                             r"Module.__init__\(\) call"):
        Early()


def test_calling_runs_forward_then_hooks_until_removed():
    model = nn.ReLU()
    seen = []
    handle = model.register_forward_hook(lambda module, args, output: seen.append(
        (module, args[0].tolist(), output.tolist())))
    doubled = model.register_forward_hook(lambda module, args, output: output * 2)
    x = tp.tensor([-1.0, 3.0])
    assert model(x).tolist() == [0.0, 6.0]
    assert seen == [(model, [-1.0, 3.0], [0.0, 3.0])]
    handle.remove()
    doubled.remove()
    doubled.remove()  # a second removal does nothing
    assert model(x).tolist() == [0.0, 3.0] and len(seen) == 1
    with pytest.raises(TypeError, match="hook must be callable"):
        model.register_forward_hook(3)


def test_a_module_without_forward_says_so():
    with pytest.raises(TypeError, match="Module must define forward()"):
        nn.Module()(tp.zeros(1))


def test_train_and_eval_reach_every_module():
    model = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout()))
    assert model.eval() is model
    assert not any(module.training for module in model.modules())
    model.train()
    assert all(module.training for module in model.modules())
    model[0].training = False  # this module alone
    assert [module.training for module in model.modules()] == [True, False, True, True]
    with pytest.raises(TypeError, match="training must be a bool"):
        model.training = 1


def test_zero_grad_drops_or_zeroes_every_grad():
    model = TwoLayers()
    model(tp.ones(2, 3)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    grad = model.first.weight.grad
    model.zero_grad(set_to_none=False)
    assert model.first.weight.grad is grad and not grad.numpy().any()
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_state_dict_round_trips_and_load_checks_everything_first():
    source, target = TwoLayers(), TwoLayers()
    state = source.state_dict()
    assert not state["first.weight"].requires_grad
    assert state["first.weight"].data_ptr() == source.first.weight.data_ptr()
    assert target.load_state_dict(state) == ([], [])
    for (name, mine), theirs in zip(target.state_dict().items(), source.state_dict().values()):
        assert numpy.array_equal(mine.numpy(), theirs.numpy()), name
    before = target.first.weight.numpy().copy()
    state = dict(source.state_dict())
    state["first.weight"] = tp.zeros(4, 4)
    state["extra"] = tp.zeros(1)
    del state["steps"]
    with pytest.raises(RuntimeError) as raised:
        target.load_state_dict(state)
    message = str(raised.value)
    assert message.startswith("Error(s) in loading state_dict for TwoLayers:")
    assert 'Missing key(s) in state_dict: "steps"' in message
    assert 'Unexpected key(s) in state_dict: "extra"' in message
    assert ("size mismatch for first.weight: copying a param with shape [4, 4] from checkpoint, "
            "the shape in current model is [4, 3].") in message
    assert numpy.array_equal(target.first.weight.numpy(), before)  # nothing was copied
    del state["first.weight"]
    assert target.load_state_dict(state, strict=False) == (["steps", "first.weight"], ["extra"])
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        target.load_state_dict([1])


def test_linear_matches_its_formula_and_pytorch_shapes():
    layer = nn.Linear(3, 2, dtype=tp.float64)
    assert layer.weight.shape == (2, 3) and layer.bias.shape == (2,)
    assert layer.weight.dtype == tp.float64
    assert repr(layer) == "Linear(in_features=3, out_features=2, bias=True)"
    x = numpy.random.default_rng(0).standard_normal((5, 3))
    expected = x @ layer.weight.numpy().T + layer.bias.numpy()
    assert numpy.allclose(layer(tp.tensor(x)).numpy(), expected)
    batched = numpy.random.default_rng(1).standard_normal((2, 5, 3))
    assert numpy.allclose(layer(tp.tensor(batched)).numpy(),
                          batched @ layer.weight.numpy().T + layer.bias.numpy())


def test_linear_initialisation_is_uniform_within_one_over_root_fan_in():
    tp.manual_seed(0)
    layer = nn.Linear(64, 256)
    bound = 1 / math.sqrt(64)
    weight, bias = layer.weight.numpy(), layer.bias.numpy()
    assert weight.min() >= -bound and weight.max() < bound
    assert bias.min() >= -bound and bias.max() < bound
    # U(-b, b) has mean 0 and variance b**2 / 3; 16384 draws pin both.
    assert abs(weight.mean()) < 0.01 * bound
    assert abs(weight.var() - bound ** 2 / 3) < 0.03 * bound ** 2 / 3
    assert weight.min() < -0.99 * bound and weight.max() > 0.99 * bound
    tp.manual_seed(0)
    assert numpy.array_equal(nn.Linear(64, 256).weight.numpy(), weight)  # seeded, reproducible


def test_linear_gradients_are_pytorchs_formulas():
    layer = nn.Linear(3, 2, dtype=tp.float64)
    x = numpy.random.default_rng(0).standard_normal((4, 3))
    layer(tp.tensor(x)).sum().backward()
    assert numpy.allclose(layer.weight.grad.numpy(), numpy.ones((4, 2)).T @ x)
    assert numpy.allclose(layer.bias.grad.numpy(), [4.0, 4.0])


def test_sequential_runs_in_order_and_indexes():
    first, second = nn.Linear(2, 3), nn.ReLU()
    model = nn.Sequential(first, second)
    assert len(model) == 2 and list(model) == [first, second]
    assert model[0] is first and model[-1] is second
    assert isinstance(model[1:], nn.Sequential) and list(model[1:]) == [second]
    x = tp.tensor([[1.0, -2.0]])
    assert numpy.allclose(model(x).numpy(), numpy.maximum(first(x).numpy(), 0))
    with pytest.raises(IndexError, match="index 2 is out of range for a Sequential of 2"):
        model[2]
    with pytest.raises(TypeError, match="Sequential: argument 1 must be a tensorplay.nn.Module"):
        nn.Sequential(first, 3)
    assert nn.Sequential()(x) is x


@pytest.mark.parametrize("device", DEVICES)
def test_dropout_zeroes_about_p_and_scales_the_rest(device):
    tp.manual_seed(0)
    dropout = nn.Dropout(0.25)
    x = tp.ones(100000, device=device, requires_grad=True)
    y = dropout(x)
    values = y.detach().cpu().numpy()
    kept = values != 0
    assert numpy.allclose(values[kept], 1 / 0.75)
    assert abs(kept.mean() - 0.75) < 0.01
    y.sum().backward()
    assert numpy.array_equal(x.grad.cpu().numpy() != 0, kept)  # the gradient uses the same mask
    assert not numpy.array_equal(dropout(x).detach().cpu().numpy(), values)  # a new mask
    dropout.eval()
    assert dropout(x) is x
    assert not nn.Dropout(1.0)(x).detach().cpu().numpy().any()


def test_dropout_refuses_a_probability_outside_zero_to_one():
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1, "
                                         "but got 1.5"):
        nn.Dropout(1.5)


@pytest.mark.gpu
def test_to_moves_parameters_in_place_and_buffers():
    model = TwoLayers()
    weight = model.first.weight
    model(tp.ones(1, 3)).sum().backward()
    expected = weight.numpy().copy()
    assert model.to("cuda") is model
    assert model.first.weight is weight and weight.is_cuda and weight.grad.is_cuda
    assert model.steps.is_cuda
    assert numpy.array_equal(weight.cpu().numpy(), expected)
    model(tp.ones(1, 3, device="cuda")).sum().backward()
    model.to("cpu")
    assert not weight.is_cuda and numpy.array_equal(weight.numpy(), expected)


def test_to_the_same_device_changes_nothing():
    model = TwoLayers()
    weight, pointer = model.first.weight, model.first.weight.data_ptr()
    assert model.to("cpu") is model
    assert model.first.weight is weight and weight.data_ptr() == pointer


def test_layers_and_to_check_their_arguments_by_name():
    with pytest.raises(TypeError, match=r"Linear: input must be a tensorplay Tensor, got str \('x'\)"):
        nn.Linear(2, 2)("x")
    with pytest.raises(TypeError, match="ReLU: input must be a tensorplay Tensor"):
        nn.ReLU()([1.0])
    with pytest.raises(ValueError, match="device"):
        nn.Module().to("tpu")  # refused even with nothing to move
    with pytest.raises(ValueError, match="name must be at most 4096 characters long, got 5000"):
        nn.Module().register_buffer("x" * 5000, None)
    with pytest.raises(ValueError, match="prefix must be at most 4096 characters"):
        nn.Module().named_parameters(prefix="x" * 5000)
