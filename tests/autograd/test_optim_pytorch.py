"""tensorplay.optim against PyTorch's torch.optim (CPU): Adam and AdamW (every flag, the
capturable branch too), SGD's nesterov, dampening and maximize, parameter groups with their
own settings, add_param_group's and the constructors' errors, and state_dict() /
load_state_dict() in PyTorch's format (a loaded optimiser continues as the saved one would,
its state tensors copied in place); marked gpu, a whole Adam training step captured into one
CUDA graph that replays as the eager steps do."""
import numpy
import pytest

import tensorplay as tp
from tensorplay import nn, optim

from tests.autograd.against_pytorch import same_error
from tests.autograd.training import check_captured_steps_replay_as_eager, steps_on_cuda
from tests.peers import import_or_skip

torch = import_or_skip("torch")

SHAPES = [(3, 2), (4,)]


def pair(seed=0, dtype="float64"):
    """Parameters and gradient sequences, as ours and as PyTorch's."""
    rng = numpy.random.default_rng(seed)
    starts = [rng.standard_normal(shape) for shape in SHAPES]
    grads = [[rng.standard_normal(shape) for shape in SHAPES] for _ in range(5)]
    ours = [nn.Parameter(tp.tensor(start, dtype=getattr(tp, dtype))) for start in starts]
    theirs = [torch.nn.Parameter(torch.tensor(start, dtype=getattr(torch, dtype)))
              for start in starts]
    return ours, theirs, grads


def run(ours, theirs, grads, make_ours, make_theirs, dtype="float64"):
    mine, reference = make_ours(ours), make_theirs(theirs)
    for step in grads:
        for param, grad in zip(ours, step):
            param.grad = tp.tensor(grad, dtype=getattr(tp, dtype))
        for param, grad in zip(theirs, step):
            param.grad = torch.tensor(grad, dtype=getattr(torch, dtype))
        mine.step()
        reference.step()
    return mine, reference


def same_values(ours, theirs, rtol=1e-12, atol=1e-12):
    for mine, reference in zip(ours, theirs):
        assert numpy.allclose(mine.numpy(), reference.detach().numpy(), rtol=rtol, atol=atol)


ADAM_OPTIONS = [{}, {"weight_decay": 0.1}, {"amsgrad": True}, {"maximize": True},
                {"betas": (0.5, 0.9), "eps": 1e-3}, {"capturable": True},
                {"capturable": True, "amsgrad": True, "weight_decay": 0.1},
                {"decoupled_weight_decay": True, "weight_decay": 0.1}]


@pytest.mark.parametrize("options", ADAM_OPTIONS)
def test_adam_steps_as_pytorchs(options):
    ours, theirs, grads = pair()
    theirs_options = {key: value for key, value in options.items() if key != "capturable"}
    # PyTorch refuses capturable on the CPU; its eager branch is the same arithmetic.
    mine, reference = run(ours, theirs, grads, lambda p: optim.Adam(p, lr=0.05, **options),
                          lambda p: torch.optim.Adam(p, lr=0.05, **theirs_options))
    # The capturable branch corrects by float32 numbers (its step count is float32, as
    # PyTorch's capturable one), the eager branch by Python floats.
    tolerance = 1e-4 if options.get("capturable") else 1e-12
    same_values(ours, theirs, tolerance, tolerance)
    for param, other in zip(ours, theirs):
        assert mine.state[param]["step"].item() == reference.state[other]["step"].item() == 5
        assert mine.state[param]["step"].dtype == tp.float32
        assert sorted(mine.state[param]) == sorted(reference.state[other])


@pytest.mark.parametrize("options", [{}, {"weight_decay": 0.3}, {"amsgrad": True},
                                     {"capturable": True}])
def test_adamw_steps_as_pytorchs(options):
    ours, theirs, grads = pair(1)
    theirs_options = {key: value for key, value in options.items() if key != "capturable"}
    run(ours, theirs, grads, lambda p: optim.AdamW(p, lr=0.05, **options),
        lambda p: torch.optim.AdamW(p, lr=0.05, **theirs_options))
    tolerance = 1e-4 if options.get("capturable") else 1e-12
    same_values(ours, theirs, tolerance, tolerance)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_capturable_branch_matches_the_eager_one_in_float32_and_float64(dtype):
    ours, _, grads = pair(2, dtype)
    other = [nn.Parameter(param.detach().clone()) for param in ours]
    first = optim.Adam(ours, lr=0.01, capturable=True)
    second = optim.Adam(other, lr=0.01)
    for step in grads:
        for params in (ours, other):
            for param, grad in zip(params, step):
                param.grad = tp.tensor(grad, dtype=getattr(tp, dtype))
        first.step()
        second.step()
    tolerance = 1e-4  # float32 bias corrections (1 - beta2 ** t is small: its error grows)
    for mine, reference in zip(ours, other):
        assert numpy.allclose(mine.numpy(), reference.numpy(), rtol=tolerance, atol=tolerance)


def test_defaults_are_pytorchs():
    param = nn.Parameter(tp.ones(1))
    mine = optim.Adam([param]).param_groups[0]
    theirs = torch.optim.Adam([torch.nn.Parameter(torch.ones(1))]).param_groups[0]
    for key in ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize", "foreach",
                "capturable", "differentiable", "fused", "decoupled_weight_decay"):
        assert mine[key] == theirs[key], key
    assert optim.AdamW([param]).param_groups[0]["weight_decay"] == 0.01
    assert optim.AdamW([param]).param_groups[0]["decoupled_weight_decay"] is True
    sgd = optim.SGD([param]).param_groups[0]
    theirs = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))]).param_groups[0]
    for key in ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize",
                "foreach", "differentiable", "fused"):
        assert sgd[key] == theirs[key], key


@pytest.mark.parametrize("options", [{"lr": -1.0}, {"eps": -1.0}, {"betas": (1.0, 0.9)},
                                     {"betas": (0.9, -0.1)}, {"weight_decay": -0.5}])
def test_adam_refuses_settings_with_pytorchs_messages(options):
    same_error(lambda: optim.Adam([nn.Parameter(tp.ones(1))], **options),
               lambda: torch.optim.Adam([torch.nn.Parameter(torch.ones(1))], **options))


@pytest.mark.parametrize("options", [{"nesterov": True}, {"nesterov": True, "momentum": 0.9,
                                                          "dampening": 0.1},
                                     {"momentum": -1.0}, {"lr": -0.1}])
def test_sgd_refuses_settings_with_pytorchs_messages(options):
    same_error(lambda: optim.SGD([nn.Parameter(tp.ones(1))], **options),
               lambda: torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], **options))


@pytest.mark.parametrize("options", [{"momentum": 0.9, "nesterov": True},
                                     {"momentum": 0.9, "dampening": 0.3},
                                     {"momentum": 0.5, "dampening": 0.5, "weight_decay": 0.1},
                                     {"maximize": True, "momentum": 0.9},
                                     {"maximize": True}])
def test_sgd_nesterov_dampening_and_maximize_step_as_pytorchs(options):
    ours, theirs, grads = pair(3)
    run(ours, theirs, grads, lambda p: optim.SGD(p, lr=0.1, **options),
        lambda p: torch.optim.SGD(p, lr=0.1, **options))
    same_values(ours, theirs)


@pytest.mark.parametrize("kind, options", [("SGD", {"momentum": 0.9}), ("Adam", {})])
def test_parameter_groups_take_their_own_settings(kind, options):
    ours, theirs, grads = pair(4)

    def groups(params):
        return [{"params": [params[0]], "lr": 0.2}, {"params": [params[1]]}]
    mine, reference = run(ours, theirs, grads,
                          lambda p: getattr(optim, kind)(groups(p), lr=0.01, **options),
                          lambda p: getattr(torch.optim, kind)(groups(p), lr=0.01, **options))
    same_values(ours, theirs)
    assert [group["lr"] for group in mine.param_groups] == [0.2, 0.01]


def test_add_param_group_as_pytorchs():
    ours, theirs, grads = pair(5)
    mine = optim.SGD([ours[0]], lr=0.1, momentum=0.9)
    reference = torch.optim.SGD([theirs[0]], lr=0.1, momentum=0.9)
    mine.add_param_group({"params": ours[1], "lr": 0.3, "nesterov": True})
    reference.add_param_group({"params": theirs[1], "lr": 0.3, "nesterov": True})
    for step in grads:
        for param, other, grad in zip(ours, theirs, step):
            param.grad = tp.tensor(grad, dtype=tp.float64)
            other.grad = torch.tensor(grad)
        mine.step()
        reference.step()
    same_values(ours, theirs)
    assert mine.param_groups[1]["params"][0] is ours[1]


def test_add_param_group_errors_are_pytorchs():
    param, other = nn.Parameter(tp.ones(1)), nn.Parameter(tp.ones(1))
    theirs, their_other = torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))
    mine, reference = optim.SGD([param]), torch.optim.SGD([theirs])
    same_error(lambda: mine.add_param_group([other]),
               lambda: reference.add_param_group([their_other]))
    same_error(lambda: mine.add_param_group({"params": {other}}),
               lambda: reference.add_param_group({"params": {their_other}}))
    same_error(lambda: mine.add_param_group({"params": [param]}),
               lambda: reference.add_param_group({"params": [theirs]}))
    with pytest.raises(ValueError, match="Invalid learning rate: -1.0"):  # PyTorch adds it
        mine.add_param_group({"params": [other], "lr": -1.0})
    assert len(mine.param_groups) == 1  # a refused group is not added
    with pytest.raises(TypeError, match=r"optimizer can only optimize Tensors, but "
                                        r"param_group\['params'\]\[0\] is int"):
        mine.add_param_group({"params": [3]})


@pytest.mark.parametrize("kind, options", [("SGD", {"momentum": 0.9, "dampening": 0.2}),
                                           ("Adam", {"amsgrad": True}),
                                           ("Adam", {"capturable": True}), ("AdamW", {})])
def test_state_dict_is_pytorchs_format_and_loads_across_both(kind, options):
    ours, theirs, grads = pair(6)
    theirs_options = {key: value for key, value in options.items() if key != "capturable"}
    mine, reference = run(ours, theirs, grads[:3],
                          lambda p: getattr(optim, kind)([{"params": [p[0]]},
                                                          {"params": [p[1]], "lr": 0.02}],
                                                         lr=0.05, **options),
                          lambda p: getattr(torch.optim, kind)([{"params": [p[0]]},
                                                                {"params": [p[1]],
                                                                 "lr": 0.02}],
                                                               lr=0.05, **theirs_options))
    tolerance = 1e-4 if options.get("capturable") else 1e-12
    saved, their_saved = mine.state_dict(), reference.state_dict()
    assert [group["params"] for group in saved["param_groups"]] == [[0], [1]]
    assert sorted(saved["state"]) == sorted(their_saved["state"]) == [0, 1]
    for index in (0, 1):
        assert sorted(saved["state"][index]) == sorted(their_saved["state"][index])
        for key, value in saved["state"][index].items():
            assert numpy.allclose(value.cpu().numpy(), their_saved["state"][index][key].numpy(),
                                  rtol=1e-4)
    for group, their_group in zip(saved["param_groups"], their_saved["param_groups"]):
        assert {key: group[key] for key in their_group} == dict(their_group, **options)

    # A new optimiser over copies of the parameters, loaded, continues as the first one.
    copies = [nn.Parameter(param.detach().clone()) for param in ours]
    loaded = getattr(optim, kind)([{"params": [copies[0]]}, {"params": [copies[1]]}], lr=0.5,
                                  **options)
    loaded.load_state_dict(saved)
    assert loaded.param_groups[1]["lr"] == 0.02 and loaded.param_groups[1]["params"][0] \
        is copies[1]
    for step in grads[3:]:
        for params in (ours, copies):
            for param, grad in zip(params, step):
                param.grad = tp.tensor(grad, dtype=tp.float64)
        for param, grad in zip(theirs, step):
            param.grad = torch.tensor(grad)
        mine.step()
        loaded.step()
        reference.step()
    same_values(copies, theirs, tolerance, tolerance)
    same_values(ours, theirs, tolerance, tolerance)


def test_load_state_dict_copies_into_the_state_in_place():
    param = nn.Parameter(tp.ones(3))
    opt = optim.Adam([param], lr=0.1, capturable=True)
    param.grad = tp.ones(3)
    opt.step()
    state = opt.state[param]
    addresses = {key: value.data_ptr() for key, value in state.items()}
    saved = {"state": {0: {key: value.clone() * 0 + 2 for key, value in state.items()}},
             "param_groups": opt.state_dict()["param_groups"]}
    opt.load_state_dict(saved)
    assert {key: value.data_ptr() for key, value in opt.state[param].items()} == addresses
    assert opt.state[param]["exp_avg"].tolist() == [2.0] * 3
    assert opt.state[param]["step"].item() == 2.0


def test_load_state_dict_from_pytorch():
    ours, theirs, grads = pair(7)
    _, reference = run(ours, theirs, grads[:2], lambda p: optim.Adam(p),
                       lambda p: torch.optim.Adam(p))
    saved = reference.state_dict()
    converted = {"state": {index: {key: tp.tensor(value.numpy()) for key, value in entry.items()}
                           for index, entry in saved["state"].items()},
                 "param_groups": saved["param_groups"]}
    copies = [nn.Parameter(tp.tensor(param.detach().numpy())) for param in theirs]
    loaded = optim.Adam(copies)
    loaded.load_state_dict(converted)
    for step in grads[2:]:
        for param, other, grad in zip(copies, theirs, step):
            param.grad = tp.tensor(grad, dtype=tp.float64)
            other.grad = torch.tensor(grad)
        loaded.step()
        reference.step()
    same_values(copies, theirs)


def test_load_state_dict_errors_are_pytorchs():
    param, other = nn.Parameter(tp.ones(1)), nn.Parameter(tp.ones(1))
    theirs = [torch.nn.Parameter(torch.ones(1)) for _ in range(2)]
    mine = optim.SGD([param, other])
    reference = torch.optim.SGD(theirs)
    same_error(lambda: mine.load_state_dict({"state": {}, "param_groups": []}),
               lambda: reference.load_state_dict({"state": {}, "param_groups": []}))
    short = {"state": {}, "param_groups": [dict(mine.state_dict()["param_groups"][0],
                                                params=[0])]}
    their_short = {"state": {}, "param_groups": [dict(reference.state_dict()["param_groups"][0],
                                                      params=[0])]}
    same_error(lambda: mine.load_state_dict(short),
               lambda: reference.load_state_dict(their_short))


def test_capturing_flags_are_refused_or_accepted():
    param = nn.Parameter(tp.ones(1))
    with pytest.raises(ValueError, match="fused=True"):
        optim.Adam([{"params": [param], "fused": True}])
    with pytest.raises(ValueError, match="differentiable=True"):
        optim.SGD([{"params": [param], "differentiable": True}])
    optim.Adam([param], foreach=False)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["Adam", "AdamW"])
def test_a_captured_adam_training_step_replays_as_the_eager_steps(quiet_device, kind):
    check_captured_steps_replay_as_eager(
        lambda parameters: getattr(optim, kind)(parameters, lr=0.01, weight_decay=0.01,
                                                capturable=True), 40)


@pytest.mark.gpu
def test_a_captured_adam_step_follows_a_loaded_state(quiet_device):
    from tensorplay import cuda
    param = nn.Parameter(tp.ones(4, device="cuda"))
    optimizer = optim.Adam([param], lr=0.1, capturable=True)
    param.grad = tp.ones(4, device="cuda")
    optimizer.step()
    saved = {"state": {0: {key: value.clone() for key, value in
                           optimizer.state[param].items()}},
             "param_groups": optimizer.state_dict()["param_groups"]}
    start = param.detach().clone()
    graph = cuda.CUDAGraph()
    with cuda.graph(graph):
        optimizer.step()
    graph.replay()
    after_one = param.detach().clone()
    with tp.no_grad():
        param.copy_(start)
    optimizer.load_state_dict(saved)  # back to the state after the first step
    graph.replay()
    assert param.tolist() == after_one.tolist()
    assert optimizer.state[param]["step"].item() == 2.0


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["Adam", "RMSprop", "Adamax", "NAdam", "RAdam", "Adadelta",
                                  "Rprop", "ASGD"])
def test_capturing_a_step_that_is_not_capturable_is_pytorchs_error(quiet_device, kind):
    # PyTorch's _cuda_graph_capture_health_check, which each of these optimisers' step() runs;
    # their capturable=True steps are captured in test_optim_more.py and here.
    from tensorplay import cuda
    param = nn.Parameter(tp.ones(4, device="cuda"))
    optimizer = getattr(optim, kind)([param])
    param.grad = tp.ones(4, device="cuda")
    optimizer.step()
    after_one = param.tolist()
    graph = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="Attempting CUDA graph capture of step\\(\\) for an "
                                           f"instance of {kind} but param_groups' capturable is "
                                           "False"):
        with cuda.graph(graph):
            optimizer.step()
    assert optimizer.state[param]["step"].item() == 1  # the refused step changed nothing
    assert param.tolist() == after_one


@pytest.mark.gpu
@pytest.mark.parametrize("kind, options", [("SGD", {"momentum": 0.9, "nesterov": True}),
                                           ("SGD", {"momentum": 0.9, "dampening": 0.5}),
                                           ("SGD", {"maximize": True, "weight_decay": 0.1}),
                                           ("Adam", {"amsgrad": True, "capturable": True}),
                                           ("AdamW", {"capturable": True})])
def test_steps_on_cuda_as_pytorchs_and_captured_replays_as_eager(quiet_device, kind, options):
    _, theirs, grads = pair(8)
    theirs_options = {key: value for key, value in options.items() if key != "capturable"}
    reference = getattr(torch.optim, kind)(theirs, lr=0.05, **theirs_options)
    ours, graphed, captured = steps_on_cuda(
        lambda parameters, graphed: getattr(optim, kind)(parameters, lr=0.05, **options),
        theirs, reference, grads)
    # capturable=True computes the bias corrections from a float32 step count on the device,
    # as PyTorch's capturable branch does, so it agrees with the eager reference (PyTorch on the
    # CPU, where capturable is refused) to float32's precision.
    rtol = 1e-5 if options.get("capturable") else 1e-10
    same_values([param.cpu() for param in ours], theirs, rtol=rtol, atol=1e-12)
    same_values([param.cpu() for param in graphed], theirs, rtol=rtol, atol=1e-12)


@pytest.mark.gpu
def test_a_captured_first_step_with_dampening_is_refused(quiet_device):
    from tensorplay import cuda
    param = nn.Parameter(tp.ones(4, device="cuda"))
    optimizer = optim.SGD([param], lr=0.5, momentum=0.9, dampening=0.5)
    param.grad = tp.ones(4, device="cuda")
    graph = cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="has not been used yet"):
        with cuda.graph(graph):
            optimizer.step()
    assert param.tolist() == [1.0] * 4
