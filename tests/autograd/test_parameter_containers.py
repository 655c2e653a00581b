"""nn.ParameterList and nn.ParameterDict, as PyTorch's.

Ported from PyTorch's own tests: test/test_nn.py's test_ParameterList and test_ParameterDict
(indexing, negative indices, slices, assignment, append / extend / +=, iteration order, keys,
items, values, update from a mapping and from pairs, pop, clear, get, membership, and the
parameters registering under "0", "1", ... or their keys, in order) and
test_ParameterList_meta / test_ParameterDict_replication-style reprs. Compared with PyTorch's
where torch is installed.
"""
import pytest

import tensorplay as tp
from tensorplay import nn

from tests.peers import import_or_skip


def make_param():
    return nn.Parameter(tp.randn(2, 2))


def test_parameter_list_as_pytorchs_test():
    parameters = [make_param(), make_param()]
    param_list = nn.ParameterList(parameters)

    def check():
        assert len(parameters) == len(param_list)
        for p1, p2 in zip(parameters, param_list):
            assert p1 is p2
        for p1, p2 in zip(filter(lambda p: p.requires_grad, parameters),
                          param_list.parameters()):
            assert p1 is p2
        for i in range(len(parameters)):
            assert parameters[i] is param_list[i]

    check()
    parameters += [make_param()]
    param_list += [parameters[-1]]
    check()
    parameters.append(make_param())
    param_list.append(parameters[-1])
    check()
    next_params = [make_param(), make_param()]
    parameters.extend(next_params)
    param_list.extend(next_params)
    check()
    parameters[2] = make_param()
    param_list[2] = parameters[2]
    check()
    parameters[-1] = make_param()
    param_list[-1] = parameters[-1]
    check()
    idx = tp.tensor(2, dtype=tp.int32)
    parameters[2] = make_param()
    param_list[int(idx)] = parameters[2]
    assert param_list[int(idx)] is parameters[2]
    check()
    assert list(param_list[1:]) == parameters[1:] or \
        all(a is b for a, b in zip(param_list[1:], parameters[1:]))
    assert all(a is b for a, b in zip(param_list[3:], parameters[3:]))
    assert all(a is b for a, b in zip(param_list[:-1], parameters[:-1]))
    assert all(a is b for a, b in zip(param_list[::2], parameters[::2]))
    with pytest.raises(TypeError):
        param_list += make_param()  # a single Parameter is not an iterable of them
    with pytest.raises(TypeError):
        param_list.extend(make_param())
    # A plain tensor is held as a Parameter that requires grad.
    plain = tp.randn(3)
    param_list.append(plain)
    assert isinstance(param_list[-1], nn.Parameter) and param_list[-1].requires_grad
    assert [name for name, _ in param_list.named_parameters()] == \
        [str(i) for i in range(len(param_list))]


def test_parameter_dict_as_pytorchs_test():
    parameters = {"p1": make_param(), "p2": make_param(), "p3": make_param()}
    parameter_dict = nn.ParameterDict(parameters)

    def check():
        assert len(parameter_dict) == len(parameters)
        for k1, k2 in zip(parameters, parameter_dict):
            assert k1 == k2
        for k1, (k2, v2) in zip(parameters, parameter_dict.items()):
            assert k1 == k2 and parameters[k1] is v2
        for k in parameter_dict:
            assert parameter_dict[k] is parameters[k]
        for k in parameter_dict.keys():
            assert parameter_dict[k] is parameters[k]
        for k, v in parameter_dict.items():
            assert v is parameters[k]
        for k1, (k2, v2) in zip(parameters, parameter_dict.named_parameters()):
            assert k1 == k2 and parameters[k1] is v2
        for k in parameter_dict:
            assert k in parameter_dict

    check()
    parameters["p4"] = make_param()
    parameter_dict["p4"] = parameters["p4"]
    check()
    next_parameters = [("p5", make_param()), ("p2", make_param())]
    parameters.update(next_parameters)
    parameter_dict.update(next_parameters)
    check()
    next_parameters = {"p6": make_param(), "p1": make_param()}
    parameters.update(next_parameters)
    parameter_dict.update(next_parameters)
    check()
    del parameter_dict["p3"]
    del parameters["p3"]
    check()
    with pytest.raises(TypeError):
        parameter_dict.update(1)
    with pytest.raises(TypeError):
        parameter_dict.update([1])
    with pytest.raises(ValueError, match="has length 10; 2 is required"):  # rows, not pairs
        parameter_dict.update(nn.Parameter(tp.randn(10, 10)))
    p_pop = parameter_dict.pop("p4")
    assert p_pop is parameters.pop("p4")
    check()
    assert parameter_dict.get("p1") is parameters["p1"]
    assert parameter_dict.get("missing") is None
    assert parameter_dict.get("missing", 3) == 3
    parameter_dict.clear()
    assert len(parameter_dict) == 0 and list(parameter_dict.parameters()) == []


def test_a_refused_call_changes_nothing():
    first, second = make_param(), make_param()
    param_list = nn.ParameterList([first])
    with pytest.raises(TypeError, match="element 1"):
        param_list.extend([second, "not a tensor"])
    assert len(param_list) == 1
    with pytest.raises(RuntimeError, match="floating point"):
        param_list.append(tp.tensor([1, 2]))  # Parameter(int tensor) requires grad: refused
    assert len(param_list) == 1
    with pytest.raises(IndexError, match="out of range for a ParameterList of 1 parameters"):
        param_list[1]
    parameter_dict = nn.ParameterDict({"a": first})
    with pytest.raises(KeyError, match="be empty or contain"):
        parameter_dict.update({"b": second, "c.d": second})
    with pytest.raises(KeyError, match="attribute 'keys' already exists"):
        parameter_dict["keys"] = second
    with pytest.raises(TypeError, match="keys must be str"):
        parameter_dict.update({1: second})
    assert list(parameter_dict) == ["a"]


def test_state_dicts_and_reprs_match_pytorch():
    torch = import_or_skip("torch")
    ours = nn.Module()
    ours.weights = nn.ParameterList([tp.ones(2), tp.zeros(1, 3)])
    ours.scales = nn.ParameterDict({"left": tp.ones(4)})
    theirs = torch.nn.Module()
    theirs.weights = torch.nn.ParameterList([torch.ones(2), torch.zeros(1, 3)])
    theirs.scales = torch.nn.ParameterDict({"left": torch.ones(4)})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [name for name, _ in ours.named_parameters()] == \
        [name for name, _ in theirs.named_parameters()]
    assert repr(ours.weights) == repr(theirs.weights).replace("torch.", "tensorplay.")
    assert repr(ours.scales) == repr(theirs.scales).replace("torch.", "tensorplay.")
    theirs.load_state_dict({k: torch.tensor(v.tolist()) for k, v in ours.state_dict().items()})
