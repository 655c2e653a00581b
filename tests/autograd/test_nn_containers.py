"""nn.ModuleList, nn.ModuleDict, nn.Identity, Module.apply and Module.requires_grad_.

Ported from PyTorch's test/test_nn.py:
- TestNN.test_ModuleList: the list against a plain Python list after each of +=, append,
  extend, insert, __setitem__, slicing, del (int and slice), pop, and children()/modules()
  matching; extend with a non-iterable raises TypeError; a slice is a ModuleList;
- TestNN.test_ModuleDict: the dict against an OrderedDict after update() from a dict, a list
  of pairs and another ModuleDict, __setitem__, del, pop, clear; update() with a non-iterable
  and with elements that are not pairs raises TypeError / ValueError;
- TestNN.test_requires_grad_: requires_grad_(False) reaches every parameter and returns the
  module;
- TestNN.test_apply (and the weight-initialisation habit of module.apply(init_fn)): fn runs on
  every module, children before their parent.
Where torch is installed, state_dict keys and repr are compared with PyTorch's.
"""
import collections

import pytest

import tensorplay as tp
from tensorplay import nn

from tests.peers import import_or_skip


def linears(count):
    return [nn.Linear(2, 2) for _ in range(count)]


def check_list(module_list, expected):
    assert len(module_list) == len(expected)
    for position, module in enumerate(expected):
        assert module_list[position] is module
        assert module_list[position - len(expected)] is module
    assert list(module_list) == expected
    assert list(module_list.children()) == expected
    assert list(module_list.modules()) == [module_list] + expected
    assert [name for name, _ in module_list.named_children()] == \
        [str(position) for position in range(len(expected))]
    assert list(module_list.parameters()) == [p for m in expected for p in m.parameters()]


def test_module_list_follows_a_python_list():
    modules = linears(2)
    module_list = nn.ModuleList(modules)
    check_list(module_list, modules)
    more = linears(2)
    module_list += more
    modules += more
    check_list(module_list, modules)
    more = linears(2)
    assert module_list.extend(more) is module_list
    modules.extend(more)
    check_list(module_list, modules)
    extra = nn.ReLU()
    module_list.append(extra)
    modules.append(extra)
    check_list(module_list, modules)
    for index in (0, 3, -2, 100, -100):
        inserted = nn.Tanh()
        module_list.insert(index, inserted)
        modules.insert(index, inserted)
        check_list(module_list, modules)
    replacement = nn.Sigmoid()
    module_list[2] = replacement
    modules[2] = replacement
    check_list(module_list, modules)
    replacement = nn.Sigmoid()
    module_list[-1] = replacement
    modules[-1] = replacement
    check_list(module_list, modules)
    assert isinstance(module_list[1:4], nn.ModuleList)
    check_list(module_list[1:4], modules[1:4])
    check_list(module_list[::-2], modules[::-2])
    del module_list[3]
    del modules[3]
    check_list(module_list, modules)
    del module_list[1:5:2]
    del modules[1:5:2]
    check_list(module_list, modules)
    assert module_list.pop(1) is modules.pop(1)
    check_list(module_list, modules)
    assert module_list.pop(-1) is modules.pop(-1)
    check_list(module_list, modules)
    joined = module_list + linears(1)
    assert isinstance(joined, nn.ModuleList) and len(joined) == len(modules) + 1
    check_list(module_list, modules)  # + leaves both sides as they were


def test_module_list_refusals_change_nothing():
    modules = linears(2)
    module_list = nn.ModuleList(modules)
    with pytest.raises(TypeError, match="iterable"):
        module_list.extend(nn.ReLU())
    with pytest.raises(TypeError, match="iterable"):
        module_list += 3
    with pytest.raises(TypeError, match="element 1"):
        module_list.extend([nn.ReLU(), "relu"])
    with pytest.raises(TypeError, match="element 0"):
        module_list.append(tp.zeros(2))
    with pytest.raises(TypeError):
        module_list[0] = 3
    with pytest.raises(IndexError, match="out of range"):
        module_list[2]
    with pytest.raises(IndexError):
        module_list[-3] = nn.ReLU()
    with pytest.raises(IndexError):
        module_list.pop(5)
    with pytest.raises(TypeError, match="integers or slices"):
        module_list["0"]
    with pytest.raises(TypeError, match="integers or slices"):
        module_list[True]
    with pytest.raises(TypeError, match="element 1"):
        nn.ModuleList([nn.ReLU(), None])
    check_list(module_list, modules)


def test_module_list_inside_a_model_trains_and_moves():
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(2)])
            self.layers.append(nn.Linear(3, 1))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    model = Stack()
    names = [name for name, _ in model.named_parameters()]
    assert names == [f"layers.{i}.{kind}" for i in range(3) for kind in ("weight", "bias")]
    model(tp.ones(4, 3)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.double()
    assert all(p.dtype is tp.float64 for p in model.parameters())
    fresh = Stack()
    fresh.load_state_dict(model.double().state_dict())
    with pytest.raises(TypeError, match="forward"):
        model.layers(tp.ones(1, 3))  # a ModuleList has no forward of its own


def test_module_dict_follows_an_ordered_dict():
    modules = collections.OrderedDict([("conv", nn.Linear(1, 1)), ("act", nn.ReLU()),
                                       ("fc", nn.Linear(1, 2))])
    module_dict = nn.ModuleDict(modules)

    def check():
        assert len(module_dict) == len(modules)
        for first, second in zip(modules, module_dict.children()):
            assert modules[first] is second
        for key, value in zip(modules, module_dict):
            assert key == value
        for key, value in module_dict.items():
            assert modules[key] is value
        assert list(module_dict.keys()) == list(modules.keys())
        assert list(module_dict.values()) == list(modules.values())
        for key in modules:
            assert key in module_dict and module_dict[key] is modules[key]

    check()
    modules["conv"] = nn.Linear(1, 3)
    module_dict["conv"] = modules["conv"]
    check()
    extra = [("extra1", nn.Tanh()), ("extra2", nn.Sigmoid())]
    modules.update(extra)
    module_dict.update(extra)
    check()
    more = collections.OrderedDict([("more1", nn.ReLU()), ("more2", nn.Tanh())])
    modules.update(more)
    module_dict.update(more)
    check()
    other = nn.ModuleDict({"other": nn.ReLU()})
    modules.update(other.items())
    module_dict.update(other)
    check()
    del module_dict["fc"]
    del modules["fc"]
    check()
    assert module_dict.pop("act") is modules.pop("act")
    check()
    module_dict.clear()
    modules.clear()
    check()


def test_module_dict_refusals_change_nothing():
    module_dict = nn.ModuleDict({"a": nn.ReLU()})
    with pytest.raises(TypeError, match="iterable of key/value pairs"):
        module_dict.update(1)
    with pytest.raises(TypeError, match="element #0 should be Iterable"):
        module_dict.update([1])
    with pytest.raises(ValueError, match="element #1 has length 3; 2 is required"):
        module_dict.update([("b", nn.ReLU()), ("c", nn.ReLU(), nn.ReLU())])
    with pytest.raises(TypeError, match="Module"):
        module_dict.update({"b": nn.ReLU(), "c": 3})
    with pytest.raises(KeyError, match="already exists"):
        module_dict.update({"b": nn.ReLU(), "keys": nn.ReLU()})
    with pytest.raises(KeyError, match="be empty or contain"):
        module_dict["a.b"] = nn.ReLU()
    with pytest.raises(TypeError, match="keys must be str"):
        module_dict[1] = nn.ReLU()
    with pytest.raises(KeyError):
        module_dict["missing"]
    assert list(module_dict) == ["a"]


def test_identity_returns_its_input():
    x = tp.randn(3)
    assert nn.Identity()(x) is x
    assert nn.Identity(54, "ignored")(x) is x
    assert repr(nn.Identity()) == "Identity()"


def test_requires_grad_reaches_every_parameter():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Linear(3, 1)))
    assert model.requires_grad_(False) is model
    assert all(not p.requires_grad for p in model.parameters())
    model[2].requires_grad_()
    assert [p.requires_grad for p in model.parameters()] == [False, False, True, True]
    with pytest.raises(TypeError, match="requires_grad"):
        model.requires_grad_("yes")


def test_apply_visits_children_before_their_parent():
    inner = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    model = nn.Sequential(inner, nn.Linear(2, 1))
    visited = []
    assert model.apply(visited.append) is model
    assert visited == [inner[0], inner[1], inner, model[1], model]

    def initialise(module):
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.weight)

    model.apply(initialise)
    assert all(not module.weight.any().item() for module in model.modules()
               if isinstance(module, nn.Linear))
    with pytest.raises(TypeError, match="callable"):
        model.apply(None)


def test_against_pytorch_names_and_repr():
    torch = import_or_skip("torch")
    ours = nn.ModuleDict({"body": nn.ModuleList([nn.Linear(2, 2), nn.ReLU()]),
                          "head": nn.Identity()})
    theirs = torch.nn.ModuleDict({"body": torch.nn.ModuleList([torch.nn.Linear(2, 2),
                                                               torch.nn.ReLU()]),
                                  "head": torch.nn.Identity()})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [name for name, _ in ours.named_modules()] == \
        [name for name, _ in theirs.named_modules()]
    assert repr(ours).replace("tensorplay", "torch") == repr(theirs)
