"""tensorplay.optim.swa_utils: AveragedModel (SWA and EMA, with and without buffers), the
averaging functions, update_bn and SWALR; on the CPU, and on a CUDA device where one is visible
(marked gpu); against PyTorch where it is installed.

Ported from PyTorch's test/optim/test_swa_utils.py (TestSWAUtils: test_averaged_model_all_devices,
test_averaged_model_mixed_device, test_averaged_model_state_dict,
test_averaged_model_default_avg_fn_picklable, test_averaged_model_exponential, test_update_bn_dnn,
test_update_bn_cnn, test_bn_update_eval_momentum) and from test/optim/test_lrscheduler.py
(test_swalr_no_anneal, test_swalr_cosine_anneal_after_multiplicative,
test_swalr_linear_anneal_after_multiplicative, test_swalr_hypers, test_swa_lr_state_dict), with
PyTorch's targets and tensorplay's modules.
"""
import itertools
import math
import pickle

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn, optim
from tensorplay.optim.lr_scheduler import MultiplicativeLR
from tensorplay.optim.swa_utils import (SWALR, AveragedModel, get_ema_avg_fn,
                                        get_ema_multi_avg_fn, get_swa_avg_fn,
                                        get_swa_multi_avg_fn, update_bn)
from tensorplay.utils.data import DataLoader, TensorDataset

from tests.autograd.test_lr_scheduler import two_groups
from tests.peers import import_or_skip

cuda_only = pytest.mark.skipif(not tp.accelerator.is_available(),
                               reason="no CUDA device is visible (tensorplay.accelerator."
                                      "is_available() is False)")


def close(mine, reference, tolerance=1e-5):
    np.testing.assert_allclose(np.asarray(mine.tolist()), np.asarray(reference.tolist()),
                               rtol=tolerance, atol=tolerance)


class SWATestDNN(nn.Module):
    """PyTorch's SWATestDNN: Linear then BatchNorm1d."""

    def __init__(self, input_features):
        super().__init__()
        self.n_features = 100
        self.fc1 = nn.Linear(input_features, self.n_features)
        self.bn = nn.BatchNorm1d(self.n_features)

    def compute_preactivation(self, x):
        return self.fc1(x)

    def forward(self, x):
        return self.bn(self.fc1(x))


class SWATestCNN(nn.Module):
    """PyTorch's SWATestCNN: Conv2d then BatchNorm2d of momentum 0.3."""

    def __init__(self, input_channels):
        super().__init__()
        self.n_features = 10
        self.conv1 = nn.Conv2d(input_channels, self.n_features, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(self.n_features, momentum=0.3)

    def compute_preactivation(self, x):
        return self.conv1(x)

    def forward(self, x):
        return self.bn(self.conv1(x))


def network(device):
    return nn.Sequential(
        nn.Conv2d(1, 5, kernel_size=3), nn.ReLU(), nn.MaxPool2d(kernel_size=2),
        nn.BatchNorm2d(5, momentum=0.3), nn.Conv2d(5, 2, kernel_size=3), nn.ReLU(),
        nn.Linear(5, 5), nn.ReLU(), nn.Linear(5, 10)).to(device)


def run_averaged_steps(dnn, swa_device, ema):
    """PyTorch's _run_averaged_steps: ten random steps of dnn, averaged by AveragedModel and
    by hand."""
    decay = 0.999
    averaged_dnn = AveragedModel(dnn, device=swa_device, multi_avg_fn=(
        get_ema_multi_avg_fn(decay) if ema else get_swa_multi_avg_fn()))
    averaged = [tp.zeros_like(param) for param in dnn.parameters()]
    updates = 10
    for i in range(updates):
        for p, p_avg in zip(dnn.parameters(), averaged):
            p.detach().add_(tp.randn_like(p))
            if ema:
                p_avg += p.detach() * decay ** (updates - i - 1) * ((1 - decay) if i > 0 else 1.0)
            else:
                p_avg += p.detach() / updates
        averaged_dnn.update_parameters(dnn)
    return averaged, averaged_dnn


def check_averaged_model(net_device, swa_device, ema):
    dnn = network(net_device)
    averaged, averaged_dnn = run_averaged_steps(dnn, swa_device, ema)
    for p_avg, p_swa in zip(averaged, averaged_dnn.parameters()):
        close(p_avg, p_swa, 1e-4)
        assert p_swa.device == tp.device(swa_device) and p_avg.device == tp.device(net_device)
    assert averaged_dnn.n_averaged.device == tp.device(swa_device)
    assert averaged_dnn.n_averaged.item() == 10


# -- AveragedModel (TestSWAUtils) --------------------------------------------------------------

@pytest.mark.parametrize("ema", [True, False])
def test_averaged_model_cpu(ema):
    check_averaged_model("cpu", "cpu", ema)


@pytest.mark.gpu
@cuda_only
@pytest.mark.parametrize("ema", [True, False])
@pytest.mark.parametrize("net_device, swa_device", [("cuda", "cpu"), ("cpu", "cuda"),
                                                    ("cuda", "cuda")])
def test_averaged_model_all_devices(ema, net_device, swa_device):
    check_averaged_model(tp.device(net_device, 0) if net_device == "cuda" else "cpu",
                         tp.device(swa_device, 0) if swa_device == "cuda" else "cpu", ema)


@pytest.mark.gpu
@cuda_only
@pytest.mark.parametrize("ema", [True, False])
def test_averaged_model_mixed_device(ema):
    dnn = nn.Sequential(nn.Conv2d(1, 5, kernel_size=3), nn.Linear(5, 10))
    dnn[0].cuda()
    averaged, averaged_dnn = run_averaged_steps(dnn, None, ema)
    for p_avg, p_swa in zip(averaged, averaged_dnn.parameters()):
        close(p_avg, p_swa, 1e-4)
        assert p_avg.device == p_swa.device


@pytest.mark.parametrize("default", [True, False])
def test_averaged_model_default_average_is_the_mean(default):
    model = nn.Linear(3, 2)
    averaged = AveragedModel(model) if default else AveragedModel(
        model, avg_fn=get_swa_avg_fn())
    seen = []
    for _ in range(5):
        with tp.no_grad():
            model.weight.add_(tp.randn(2, 3))
        seen.append(model.weight.detach().clone())
        averaged.update_parameters(model)
    close(averaged.module.weight, tp.stack(seen).mean(0))
    assert not averaged.module.weight.requires_grad or averaged.module.weight.grad is None


def test_averaged_model_state_dict():
    dnn = nn.Sequential(nn.Conv2d(1, 5, kernel_size=3), nn.Linear(5, 10))
    averaged_dnn, averaged_dnn2 = AveragedModel(dnn), AveragedModel(dnn)
    for _ in range(10):
        for p in dnn.parameters():
            p.detach().add_(tp.randn_like(p))
        averaged_dnn.update_parameters(dnn)
    averaged_dnn2.load_state_dict(averaged_dnn.state_dict())
    for p_swa, p_swa2 in zip(averaged_dnn.parameters(), averaged_dnn2.parameters()):
        assert p_swa.tolist() == p_swa2.tolist()
    assert averaged_dnn.n_averaged.item() == averaged_dnn2.n_averaged.item() == 10
    assert list(averaged_dnn.state_dict())[0] == "n_averaged"  # its own buffer, then module's


def test_averaged_model_default_avg_fn_picklable():
    dnn = nn.Sequential(nn.Conv2d(1, 5, kernel_size=3), nn.BatchNorm2d(5), nn.Linear(5, 5))
    pickle.dumps(AveragedModel(dnn))


@pytest.mark.parametrize("use_multi_avg_fn", [True, False])
@pytest.mark.parametrize("use_buffers", [True, False])
def test_averaged_model_exponential(use_multi_avg_fn, use_buffers):
    dnn = nn.Sequential(nn.Conv2d(1, 5, kernel_size=3), nn.BatchNorm2d(5, momentum=0.3),
                        nn.Linear(5, 10))
    decay = 0.9
    if use_multi_avg_fn:
        averaged_dnn = AveragedModel(dnn, multi_avg_fn=get_ema_multi_avg_fn(decay),
                                     use_buffers=use_buffers)
    else:
        def avg_fn(p_avg, p, n_avg):
            return decay * p_avg + (1 - decay) * p

        averaged_dnn = AveragedModel(dnn, avg_fn=avg_fn, use_buffers=use_buffers)
    dnn_params = list(itertools.chain(dnn.parameters(), dnn.buffers())) if use_buffers \
        else list(dnn.parameters())
    averaged = [tp.zeros_like(param) for param in dnn_params if param.shape != ()]
    for i in range(10):
        updated = []
        for p, p_avg in zip([p for p in dnn_params if p.shape != ()], averaged):
            p.detach().add_(tp.randn_like(p))
            updated.append(p.detach().clone() if i == 0 else
                           (p_avg * decay + p.detach() * (1 - decay)).clone())
        averaged_dnn.update_parameters(dnn)
        averaged = updated
    if use_buffers:
        mine = [p for p in itertools.chain(averaged_dnn.module.parameters(),
                                           averaged_dnn.module.buffers()) if p.shape != ()]
        for p_avg, p_swa in zip(averaged, mine):
            close(p_avg, p_swa)
    else:
        for p_avg, p_swa in zip(averaged, averaged_dnn.parameters()):
            close(p_avg, p_swa)
        for b_avg, b_swa in zip(dnn.buffers(), averaged_dnn.module.buffers()):
            assert b_avg.tolist() == b_swa.tolist()


def test_averaged_model_forwards_and_refuses_another_model():
    model = nn.Linear(2, 3)
    averaged = AveragedModel(model)
    averaged.update_parameters(model)
    x = tp.randn(4, 2)
    close(averaged(x), model(x))
    before = averaged.module.weight.tolist()
    for other, message in ((nn.Linear(2, 4), r"has the shape \[4, 2\] where the averaged one "
                                             r"has \[3, 2\]"),
                           (nn.Linear(2, 3, bias=False), r"model has 1 parameters where the "
                                                         r"averaged model has 2")):
        with pytest.raises(ValueError, match=message):
            averaged.update_parameters(other)
    assert averaged.module.weight.tolist() == before and averaged.n_averaged.item() == 1
    with pytest.raises(TypeError, match="model must be a tensorplay.nn.Module"):
        averaged.update_parameters([model])
    with pytest.raises(ValueError, match="Only one of avg_fn and multi_avg_fn should be provided"):
        AveragedModel(model, avg_fn=get_swa_avg_fn(), multi_avg_fn=get_swa_multi_avg_fn())
    with pytest.raises(TypeError, match="avg_fn must be None or a function"):
        AveragedModel(model, avg_fn=0.9)


def test_averaging_functions():
    with pytest.raises(ValueError, match=r"Invalid decay value 1.5 provided. Please provide a "
                                         r"value in \[0,1\] range."):
        get_ema_multi_avg_fn(1.5)
    with pytest.raises(ValueError, match="Invalid decay value"):
        get_ema_avg_fn(-0.1)
    averaged, current = [tp.tensor([2.0, 4.0]), tp.tensor([1, 3])], [tp.tensor([5.0, 1.0]),
                                                                     tp.tensor([4, 6])]
    get_swa_multi_avg_fn()(averaged, current, tp.tensor(2))
    assert averaged[0].tolist() == [3.0, 3.0] and averaged[1].tolist() == [2, 4]
    close(get_ema_avg_fn(0.75)(tp.tensor([4.0]), tp.tensor([8.0]), 3), tp.tensor([5.0]))
    close(get_swa_avg_fn()(tp.tensor([4.0]), tp.tensor([8.0]), tp.tensor(3)), tp.tensor([5.0]))


# -- update_bn ---------------------------------------------------------------------------------

def check_update_bn(dnn, dl_x, dl_xy, device):
    """PyTorch's _test_update_bn: the statistics update_bn computes are the batches' mean and
    variance, from either loader and after the statistics were reset."""
    total = tp.zeros(dnn.n_features, device=device)
    squares = tp.zeros(dnn.n_features, device=device)
    count = 0
    for x in dl_x:
        x = x[0].to(device)
        dnn.forward(x)
        pre = dnn.compute_preactivation(x)
        if len(pre.shape) == 4:
            pre = pre.transpose(1, 3)
        pre = pre.contiguous().view(-1, dnn.n_features)
        count += pre.shape[0]
        total += tp.sum(pre, dim=0)
        squares += tp.sum(pre ** 2, dim=0)
    mean = total / count
    variance = squares / count - mean ** 2

    def reset(module):
        if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d)):
            module.running_mean = tp.zeros_like(module.running_mean)
            module.running_var = tp.ones_like(module.running_var)

    for loader in (dl_xy, dl_xy, dl_x):
        update_bn(loader, dnn, device=device)
        close(dnn.bn.running_mean, mean, 1e-4)
        close(dnn.bn.running_var, variance, 1e-1)
        dnn.apply(reset)


def loaders(*shape):
    x, y = tp.rand(100, *shape), tp.rand(100)
    return (DataLoader(TensorDataset(x), batch_size=5, shuffle=True),
            DataLoader(TensorDataset(x, y), batch_size=5, shuffle=True))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu,
                                                                        cuda_only])])
def test_update_bn_dnn(device):
    dnn = SWATestDNN(input_features=5).to(device)
    dnn.train()
    check_update_bn(dnn, *loaders(5), device)
    assert dnn.training


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu,
                                                                        cuda_only])])
def test_update_bn_cnn(device):
    cnn = SWATestCNN(input_channels=3).to(device)
    cnn.train()
    check_update_bn(cnn, *loaders(3, 5, 5), device)
    assert cnn.training


def test_bn_update_eval_momentum():
    cnn = SWATestCNN(input_channels=3)
    cnn.eval()
    update_bn(loaders(3, 5, 5)[0], cnn)
    assert not cnn.training and cnn.bn.momentum == 0.3


def test_update_bn_restores_the_mode_and_momentum_when_a_batch_fails():
    cnn = SWATestCNN(input_channels=3)
    cnn.eval()
    with pytest.raises(Exception):
        update_bn([tp.rand(2, 3, 5, 5), tp.rand(2, 4, 5, 5)], cnn)  # the second: 4 channels
    assert not cnn.training and cnn.bn.momentum == 0.3
    update_bn(iter([]), nn.Linear(2, 2))  # no BatchNorm: nothing read, nothing changed
    with pytest.raises(TypeError, match="loader must be an iterable"):
        update_bn(3, cnn)


# -- SWALR (test_swalr_*) ----------------------------------------------------------------------

def check_swalr(opt, swa_scheduler, scheduler, targets, swa_start, epochs):
    """PyTorch's _test_swalr."""
    for epoch in range(epochs):
        for group, target in zip(opt.param_groups, targets):
            assert group["lr"] == pytest.approx(target[epoch], abs=1e-5, rel=0), epoch
        if epoch >= swa_start:
            opt.step()
            swa_scheduler.step()
        elif scheduler is not None:
            opt.step()
            scheduler.step()


def test_swalr_no_anneal():
    opt = two_groups()
    epochs, swa_start, swa_lr = 10, 5, 0.01
    targets = [[lr] * (swa_start + 1) + [swa_lr] * (epochs - swa_start - 1)
               for lr in (0.05, 0.5)]
    check_swalr(opt, SWALR(opt, anneal_epochs=1, swa_lr=swa_lr), None, targets, swa_start,
                epochs)


@pytest.mark.parametrize("strategy, swa_lrs, anneal_epochs", [("cos", 0.01, 5),
                                                               ("linear", [0.01, 0.02], 4)])
def test_swalr_anneal_after_multiplicative(strategy, swa_lrs, anneal_epochs):
    opt = two_groups()
    epochs, swa_start, factor = 15, 5, 0.9
    scheduler = MultiplicativeLR(opt, lr_lambda=lambda epoch: factor)
    swa_scheduler = SWALR(opt, anneal_epochs=anneal_epochs, anneal_strategy=strategy,
                          swa_lr=swa_lrs)

    def coefficient(t):
        if t + 1 >= anneal_epochs:
            return 0.0
        if strategy == "cos":
            return (1 + math.cos(math.pi * (t + 1) / anneal_epochs)) / 2
        return 1 - (t + 1) / anneal_epochs

    swa_lrs = swa_lrs if isinstance(swa_lrs, list) else [swa_lrs] * 2
    before = [[lr * factor ** i for i in range(swa_start + 1)] for lr in (0.05, 0.5)]
    targets = [lrs + [lrs[-1] * coefficient(t) + swa_lr * (1 - coefficient(t))
                      for t in range(epochs - swa_start - 1)]
               for lrs, swa_lr in zip(before, swa_lrs)]
    check_swalr(opt, swa_scheduler, scheduler, targets, swa_start, epochs)


def test_swalr_hypers():
    opt = two_groups()
    with pytest.raises(ValueError, match="anneal_strategy must"):
        SWALR(opt, anneal_strategy="exponential", swa_lr=1.0)
    with pytest.raises(ValueError, match="anneal_epochs must"):
        SWALR(opt, anneal_epochs=-1, swa_lr=1.0)
    with pytest.raises(TypeError, match="anneal_epochs must"):  # PyTorch's: a ValueError
        SWALR(opt, anneal_epochs=1.7, swa_lr=1.0)
    with pytest.raises(ValueError, match="swa_lr must"):
        SWALR(opt, swa_lr=[1.0, 0.1, 0.01])
    assert all("swa_lr" not in group and "initial_lr" not in group
               for group in opt.param_groups)  # refused before anything changed


def test_swa_lr_state_dict():
    opt = two_groups()
    scheduler = SWALR(opt, anneal_epochs=3, swa_lr=0.5)
    for _ in range(10):
        opt.step()
        scheduler.step()
    other = SWALR(two_groups(), anneal_epochs=10, anneal_strategy="linear", swa_lr=5.0)
    state = scheduler.state_dict()
    assert "anneal_func" not in state and state["_anneal_strategy"] == "cos"
    other.load_state_dict(pickle.loads(pickle.dumps(state)))
    for key, value in vars(scheduler).items():
        if key != "optimizer":
            assert vars(other)[key] == value, key
    assert other.get_last_lr() == scheduler.get_last_lr()


# -- against PyTorch ---------------------------------------------------------------------------

@pytest.fixture
def torch():
    return import_or_skip("torch")


@pytest.mark.parametrize("strategy, anneal_epochs", [("cos", 5), ("linear", 3), ("cos", 0)])
def test_swalr_is_pytorchs(torch, strategy, anneal_epochs):
    lrs = [0.05, 0.5, 1.0]
    ours = optim.SGD([{"params": [nn.Parameter(tp.zeros(2))], "lr": lr} for lr in lrs])
    theirs = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.zeros(2))], "lr": lr}
                              for lr in lrs])
    mine = SWALR(ours, swa_lr=[0.01, 0.02, 0.03], anneal_epochs=anneal_epochs,
                 anneal_strategy=strategy)
    reference = torch.optim.swa_utils.SWALR(theirs, swa_lr=[0.01, 0.02, 0.03],
                                            anneal_epochs=anneal_epochs,
                                            anneal_strategy=strategy)
    for _ in range(12):
        assert [g["lr"] for g in ours.param_groups] == [g["lr"] for g in theirs.param_groups]
        for optimizer, scheduler in ((ours, mine), (theirs, reference)):
            optimizer.step()
            scheduler.step()
    assert mine.state_dict() == reference.state_dict()
    assert list(mine.state_dict()) == list(reference.state_dict())


@pytest.mark.parametrize("kind", ["swa", "ema", "swa_fn", "ema_fn"])
def test_averaged_model_is_pytorchs(torch, kind):
    values = np.random.default_rng(0).standard_normal((6, 3, 2)).astype(np.float32)
    ours, theirs = nn.Linear(2, 3, bias=False), torch.nn.Linear(2, 3, bias=False)
    keywords = {"swa": ({}, {}),
                "ema": ({"multi_avg_fn": get_ema_multi_avg_fn(0.8)},
                        {"multi_avg_fn": torch.optim.swa_utils.get_ema_multi_avg_fn(0.8)}),
                "swa_fn": ({"avg_fn": get_swa_avg_fn()},
                           {"avg_fn": torch.optim.swa_utils.get_swa_avg_fn()}),
                "ema_fn": ({"avg_fn": get_ema_avg_fn(0.8)},
                           {"avg_fn": torch.optim.swa_utils.get_ema_avg_fn(0.8)})}[kind]
    mine = AveragedModel(ours, **keywords[0])
    reference = torch.optim.swa_utils.AveragedModel(theirs, **keywords[1])
    for value in values:
        with tp.no_grad():
            ours.weight.copy_(tp.tensor(value))
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(value))
        mine.update_parameters(ours)
        reference.update_parameters(theirs)
        close(mine.module.weight, reference.module.weight.detach(), 1e-6)
    assert mine.n_averaged.item() == reference.n_averaged.item() == 6
    assert list(mine.state_dict()) == list(reference.state_dict())
