"""tensorplay.nn against PyTorch (CPU): a module registered under two names in named_children()
and state_dict(), train()'s bool check, register_forward_hook's keyword arguments and what
load_state_dict() prints; Module.to's forms and the dtype conversions (floating tensors only,
the same Parameter objects), cpu() and cuda() (under the gpu marker). Skipped as a whole where
PyTorch is not importable."""
import numpy
import pytest

import tensorplay as tp
from tensorplay import nn, optim

from tests.peers import import_or_skip

torch = import_or_skip("torch")


def shared(library):
    """A module whose one Linear is registered as both "a" and "b"."""
    model = library.nn.Module()
    model.a = library.nn.Linear(2, 2)
    model.b = model.a
    return model


def test_a_child_under_two_names_is_listed_once_but_saved_under_both():
    mine, theirs = shared(tp), shared(torch)
    assert ([name for name, _ in mine.named_children()]
            == [name for name, _ in theirs.named_children()] == ["a"])
    assert len(list(mine.children())) == 1
    assert list(mine.state_dict()) == list(theirs.state_dict()) == [
        "a.weight", "a.bias", "b.weight", "b.bias"]
    assert mine.state_dict()["b.weight"].data_ptr() == mine.a.weight.data_ptr()


def test_loading_a_shared_child_wants_every_name():
    partial = {"a.weight": tp.zeros(2, 2), "a.bias": tp.zeros(2)}
    result = shared(tp).load_state_dict(partial, strict=False)
    expected = shared(torch).load_state_dict({name: torch.zeros(value.shape) for name, value
                                              in partial.items()}, strict=False)
    assert result.missing_keys == expected.missing_keys == ["b.weight", "b.bias"]
    assert result.unexpected_keys == expected.unexpected_keys == []


def test_load_state_dict_prints_as_pytorchs_result():
    model = nn.Linear(2, 1)
    matched = model.load_state_dict(model.state_dict())
    reference = torch.nn.Linear(2, 1)
    assert str(matched) == repr(matched) == str(reference.load_state_dict(
        reference.state_dict())) == "<All keys matched successfully>"
    partial = model.load_state_dict({"weight": tp.zeros(1, 2)}, strict=False)
    assert repr(partial) == "IncompatibleKeys(missing_keys=['bias'], unexpected_keys=[])"
    assert str(partial) == repr(partial)
    assert partial == (["bias"], [])


@pytest.mark.parametrize("mode", ["x", 1, 0, None])
def test_train_wants_a_bool_as_pytorch(mode):
    with pytest.raises(ValueError) as theirs:
        torch.nn.Linear(1, 1).train(mode)
    model = nn.Sequential(nn.Linear(1, 1))
    with pytest.raises(ValueError) as mine:
        model.train(mode)
    assert str(mine.value) == str(theirs.value) == "training mode is expected to be boolean"
    assert all(module.training for module in model.modules())  # nothing changed


def hook_order(library):
    layer = library.nn.ReLU()
    order = []
    layer.register_forward_hook(lambda module, args, output: order.append("first"))
    layer.register_forward_hook(lambda module, args, output: order.append("prepended"),
                                prepend=True)
    layer.register_forward_hook(lambda module, args, output: order.append("last"))
    handle = layer.register_forward_hook(
        lambda module, args, kwargs, output: order.append(("kwargs", kwargs)),
        prepend=True, with_kwargs=True)
    layer(library.ones(1))
    handle.remove()
    layer(library.ones(1))
    return order


def test_forward_hooks_prepend_and_take_kwargs_as_pytorchs():
    assert hook_order(tp) == hook_order(torch) == [
        ("kwargs", {}), "prepended", "first", "last", "prepended", "first", "last"]


def test_a_hook_with_kwargs_may_replace_the_output():
    layer = nn.ReLU()
    layer.register_forward_hook(lambda module, args, kwargs, output: output + 1,
                                with_kwargs=True)
    assert layer(tp.tensor([-1.0, 2.0])).tolist() == [1.0, 3.0]


def keyword_calls(library):
    """A module called with keyword arguments, as PyTorch code calls them (PyTorch's
    test_nn.py test_module_forward_kwargs-style cases): forward's keywords, a loss's input and
    target by name, and a with_kwargs hook seeing them."""
    class Masked(library.nn.Module):
        def forward(self, x, mask=None, scale=1.0):
            return x * scale if mask is None else x.masked_fill(mask, 0.0) * scale

    model = Masked()
    seen = []
    model.register_forward_hook(lambda module, args, kwargs, output: seen.append(
        (len(args), sorted(kwargs))), with_kwargs=True)
    x = library.tensor([1.0, -2.0, 3.0])
    mask = library.tensor([False, True, False])
    values = [model(x).tolist(), model(x, mask=mask).tolist(),
              model(x, scale=2.0, mask=mask).tolist(), model(x=x).tolist(),
              library.nn.MSELoss()(input=x, target=x * 0).item()]
    return values, seen


def test_modules_take_keyword_arguments_as_pytorchs():
    assert keyword_calls(tp) == keyword_calls(torch)
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        nn.ReLU()(tp.ones(1), colour=1)


def test_forward_hook_refuses_always_call_and_non_bool_flags():
    layer = nn.ReLU()
    with pytest.raises(TypeError, match="always_call"):  # not offered (docs/design.md)
        layer.register_forward_hook(lambda *args: None, always_call=True)
    with pytest.raises(TypeError, match="prepend"):
        layer.register_forward_hook(lambda *args: None, prepend="yes")
    with pytest.raises(TypeError):
        layer.register_forward_hook(lambda *args: None, True)  # keyword-only, as PyTorch's
    assert not layer._forward_hooks  # nothing registered by a refused call


def with_buffers(library):
    """A Linear with a float and an int64 buffer, in either library."""
    model = library.nn.Linear(2, 3)
    model.register_buffer("scale", library.ones(3))
    model.register_buffer("count", library.zeros(1, dtype=library.int64))
    return model


def dtypes_of(model):
    return {name: str(value.dtype).split(".")[-1] for name, value in model.state_dict().items()}


@pytest.mark.parametrize("convert", [
    lambda model, library: model.to(library.float64),
    lambda model, library: model.to("cpu", library.float16),
    lambda model, library: model.to(dtype=library.bfloat16),
    lambda model, library: model.to(library.zeros(1, dtype=library.float64)),
    lambda model, library: model.double(),
    lambda model, library: model.half(),
    lambda model, library: model.bfloat16(),
    lambda model, library: model.double().float(),
    lambda model, library: model.cpu(),
])
def test_module_dtype_conversions_follow_pytorch(convert):
    mine, theirs = with_buffers(tp), with_buffers(torch)
    weight = mine.weight
    mine(tp.ones(1, 2)).sum().backward()
    values = weight.tolist()
    assert convert(mine, tp) is mine
    convert(theirs, torch)
    assert dtypes_of(mine) == dtypes_of(theirs)  # floating ones converted, int64 kept
    assert mine.weight is weight and isinstance(weight, nn.Parameter)  # the same Parameter
    assert weight.requires_grad and weight.grad.dtype == weight.dtype
    assert numpy.allclose(numpy.array(weight.tolist()), numpy.array(values), atol=1e-2)


def test_an_optimiser_keeps_training_a_converted_module():
    model = nn.Linear(2, 1)
    opt = optim.SGD(model.parameters(), lr=0.1)
    model.double()
    before = model.weight.tolist()
    model(tp.ones(1, 2, dtype=tp.float64)).sum().backward()
    opt.step()
    assert model.weight.dtype == tp.float64
    assert model.weight.tolist() != before


def test_module_to_refuses_what_pytorch_refuses():
    model = nn.Linear(1, 1)
    with pytest.raises(TypeError) as theirs:
        torch.nn.Linear(1, 1).to(torch.int64)
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point or complex "
                                        "dtypes, but got desired dtype="):
        model.to(tp.int64)
    assert "only accepts floating point" in str(theirs.value)
    with pytest.raises(TypeError, match="dtype twice"):
        model.to(tp.float64, tp.float64)
    with pytest.raises(RuntimeError, match="Invalid device, must be cuda device"):
        model.cuda("cpu")
    assert model.weight.dtype == tp.float32  # nothing changed


@pytest.mark.gpu
def test_cuda_moves_in_place_and_to_converts_on_the_way():
    model = with_buffers(tp)
    weight = model.weight
    assert model.cuda() is model and weight.is_cuda and model.count.is_cuda
    model.to("cpu", tp.float64)
    assert not weight.is_cuda and weight.dtype == tp.float64 and model.count.dtype == tp.int64
    assert model.cuda(0).weight.is_cuda
