"""tensorplay.optim.lr_scheduler's policies beyond the plain decays (CPU: a scheduler does no
device work): MultiplicativeLR, PolynomialLR, CosineAnnealingWarmRestarts, SequentialLR,
ChainedScheduler, ReduceLROnPlateau, CyclicLR and OneCycleLR. The lr and momentum sequences,
the errors (checked before any change), state_dict() round trips; against PyTorch where it is
installed.

Ported from PyTorch's test/optim/test_lrscheduler.py (TestLRScheduler), with tensorplay's SGD,
Adam and Adagrad (for PyTorch's Rprop, an optimiser without momentum) and float lrs:
test_poly_lr, test_closed_form_poly_lr, test_polynomial_lr_is_constant_for_constant_epoch,
test_multiplicative_lr, test_multiplicative_lr_with_lr_lambda,
test_CosineAnnealingWarmRestarts_lr1, _lr2, _lr3, _T_cur_reset and _lr_state_dict,
test_reduce_lr_on_plateau1 to 8, test_reduce_lr_on_plateau_get_last_lr_before_step,
test_compound_reduce_lr_on_plateau1 to 5, test_reduce_lr_on_plateau_state_dict,
test_add_param_group_does_not_break_reduce_lr_on_plateau,
test_add_param_group_errors_reduce_lr_on_plateau, test_sequentiallr1 to 5,
test_sequentiallr_no_warnings, test_get_last_lr_sequentiallr, test_chained_lr1 to 5,
test_chained_lr2_get_last_lr_before_step, test_cycle_lr_* (the modes, one lr and two,
step_size_up and down, without momentum, with Adam's beta1, a momentumless optimiser, out of
scope, state_dict picklable, scale_fn restored), test_onecycle_lr_* (invalid anneal strategy
and pct_start, no total steps, linear, three phases, cosine), test_cycle_lr_with_adam,
test_cosine_then_cyclic, and these classes' cases of test_lr_scheduler_state_dict_load
(through pickle) and test_constant_initial_lr. The targets are PyTorch's; its helpers (_test,
_test_cycle_lr, _test_reduce_lr_on_plateau) are the ones below.
"""
import functools
import gc
import math
import pickle
import warnings
import weakref

import pytest

import tensorplay as tp
from tensorplay import nn, optim
from tensorplay.optim import lr_scheduler
from tensorplay.optim.lr_scheduler import (ChainedScheduler, ConstantLR, CosineAnnealingLR,
                                           CosineAnnealingWarmRestarts, CyclicLR,
                                           ExponentialLR, LinearLR, LRScheduler, MultiStepLR,
                                           MultiplicativeLR, OneCycleLR, PolynomialLR,
                                           ReduceLROnPlateau, SequentialLR, StepLR)

from tests.autograd.against_pytorch import same_error
from tests.autograd.test_lr_scheduler import check_lrs, scaled, two_groups, untouched
from tests.peers import import_or_skip


def adam_groups():
    return optim.Adam([{"params": [nn.Parameter(tp.zeros(1))]},
                       {"params": [nn.Parameter(tp.zeros(1))], "lr": 0.5}], lr=0.05)


def lrs(opt):
    return [group["lr"] for group in opt.param_groups]


def check_plateau(opt, schedulers, targets, metrics, epochs):
    """PyTorch's _test_reduce_lr_on_plateau: each scheduler steps (ReduceLROnPlateau on the
    epoch's metric), then each group's lr is checked."""
    for epoch in range(epochs):
        opt.step()
        for scheduler in schedulers:
            if isinstance(scheduler, ReduceLROnPlateau):
                scheduler.step(metrics[epoch])
            else:
                scheduler.step()
        for group, target in zip(opt.param_groups, targets):
            assert group["lr"] == pytest.approx(target[epoch], abs=1e-5, rel=0), epoch


def check_cycle(opt, scheduler, lr_targets, momentum_targets, batches, beta1=False):
    """PyTorch's _test_cycle_lr: each group's lr and momentum (betas[0] with beta1), then a
    step."""
    for batch in range(batches):
        for group, lr_target, momentum_target in zip(opt.param_groups, lr_targets,
                                                     momentum_targets):
            assert group["lr"] == pytest.approx(lr_target[batch], abs=1e-5, rel=0), batch
            momentum = group["betas"][0] if beta1 else group.get("momentum")
            if momentum_target[batch] is not None:
                assert momentum == pytest.approx(momentum_target[batch], abs=1e-5, rel=0), batch
        opt.step()
        scheduler.step()


def at_half(opt):
    for group in opt.param_groups:
        group["lr"] = 0.5
    return opt


# -- PolynomialLR and MultiplicativeLR (test_poly_lr, test_multiplicative_lr, ...) -------------

def test_poly_lr():
    single = [(1.0 - x / 5) ** 0.9 * 0.05 for x in range(5)] + [0.0] * 5
    opt = two_groups()
    check_lrs(opt, [PolynomialLR(opt, power=0.9, total_iters=5)], scaled(single), 10)


def test_closed_form_poly_lr():
    chained_opt, closed_opt = two_groups(), two_groups()
    chained, closed = PolynomialLR(chained_opt, power=0.9), PolynomialLR(closed_opt, power=0.9)
    for epoch in range(1, 20):
        chained_opt.step()
        chained.step()
        closed_opt.step()
        with pytest.warns(UserWarning, match="The epoch parameter"):
            closed.step(epoch)
        assert closed.get_last_lr() == pytest.approx(chained.get_last_lr(), abs=1e-5, rel=0)


def test_polynomial_lr_is_constant_for_constant_epoch():
    opt = two_groups()
    scheduler = PolynomialLR(opt, power=0.9)
    seen = []
    for _ in range(10):
        opt.step()
        with pytest.warns(UserWarning, match="The epoch parameter"):
            scheduler.step(2)
        seen.append(opt.param_groups[0]["lr"])
    assert min(seen) == max(seen)


def test_multiplicative_lr():
    opt = two_groups()
    opt.param_groups[1]["lr"] = 0.4
    scheduler = MultiplicativeLR(opt, lr_lambda=[lambda x1: 0.9, lambda x2: 0.8])
    check_lrs(opt, [scheduler], [[0.05 * 0.9 ** x for x in range(10)],
                                 [0.4 * 0.8 ** x for x in range(10)]], 10)


def test_multiplicative_lr_with_lr_lambda():
    opt = two_groups()
    with pytest.raises(TypeError, match="lr_lambda must be a function"):
        MultiplicativeLR(opt, 0.95)
    with pytest.raises(TypeError, match=r"lr_lambda\[0\] must be a function"):
        MultiplicativeLR(opt, [0.95, 0.95])
    untouched(opt)


def test_multiplicative_lr_state_dict_keeps_callable_objects():
    class Factor:
        def __init__(self, value):
            self.value = value

        def __call__(self, epoch):
            return self.value

    opt = two_groups()
    scheduler = MultiplicativeLR(opt, Factor(0.5))
    opt.step()
    scheduler.step()
    state = scheduler.state_dict()
    assert state["lr_lambdas"] == [{"value": 0.5}, {"value": 0.5}]
    other = MultiplicativeLR(two_groups(), Factor(0.9))
    other.load_state_dict(state)
    assert other.lr_lambdas[0].value == 0.5 and other.last_epoch == 1


# -- CosineAnnealingWarmRestarts ---------------------------------------------------------------

def restart_targets(T_mult, steps, step, eta_min=1e-10):
    """PyTorch's targets: the cosine at T_cur of T_i, T_cur moved by step each time."""
    T_i, T_cur = 10, 0
    targets = [[0.05], [0.5]]
    for _ in range(steps):
        T_cur = round(T_cur + step, 1)
        if T_cur >= T_i:
            T_cur = T_cur - T_i
            T_i = T_mult * T_i
        for target, base in zip(targets, (0.05, 0.5)):
            target.append(eta_min + (base - eta_min) * (1 + math.cos(math.pi * T_cur / T_i)) / 2)
    return targets


@pytest.mark.parametrize("T_mult", [1, 2, 4])
def test_cosine_annealing_warm_restarts_lr1(T_mult):
    opt = two_groups()
    scheduler = CosineAnnealingWarmRestarts(opt, T_0=10, T_mult=T_mult, eta_min=1e-10)
    check_lrs(opt, [scheduler], restart_targets(T_mult, 99, 1), 100)


@pytest.mark.parametrize("T_mult", [1, 2, 4])
def test_cosine_annealing_warm_restarts_lr2_fractional_epochs(T_mult):
    opt = two_groups()
    scheduler = CosineAnnealingWarmRestarts(opt, T_0=10, T_mult=T_mult, eta_min=1e-10)
    targets = restart_targets(T_mult, 299, 0.1)
    for index in range(300):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # its step(epoch) does not warn, as PyTorch's
            scheduler.step(round(index * 0.1, 1))
        for group, target in zip(opt.param_groups, targets):
            assert group["lr"] == pytest.approx(target[index], abs=1e-5, rel=0), index


@pytest.mark.parametrize("T_mult, epochs, T_curs, T_is", [
    (1, [0, 1, 2, 3, 4, 5, 12, 27, 3, 4, 5, 6, 13],
     [1, 2, 3, 4, 5, 2, 7, 3, 4, 5, 6, 3], [10] * 12),
    (2, [0, 1, 2, 3, 4, 5, 25, 32, 33, 34, 80, 81, 3],
     [1, 2, 3, 4, 5, 15, 2, 3, 4, 10, 11, 3], [10, 10, 10, 10, 10, 20, 40, 40, 40, 80, 80, 10]),
    (3, [0, 0.1, 0.2, 0.3, 1.3, 2.3, 17.5, 18.5, 19.5, 29.5, 30.5, 31.5, 50],
     [0.1, 0.2, 0.3, 1.3, 2.3, 7.5, 8.5, 9.5, 19.5, 20.5, 21.5, 10],
     [10, 10, 10, 10, 10, 30, 30, 30, 30, 30, 30, 90]),
])
def test_cosine_annealing_warm_restarts_lr3_interleaved(T_mult, epochs, T_curs, T_is):
    opt = two_groups()
    scheduler = CosineAnnealingWarmRestarts(opt, T_0=10, T_mult=T_mult, eta_min=1e-10)
    targets = [[0.05], [0.5]]
    for T_cur, T_i in zip(T_curs, T_is):
        for target, base in zip(targets, (0.05, 0.5)):
            target.append(1e-10 + (base - 1e-10) * (1 + math.cos(math.pi * T_cur / T_i)) / 2)
    for index, epoch in enumerate(epochs):
        scheduler.step(epoch)
        for group, target in zip(opt.param_groups, targets):
            assert group["lr"] == pytest.approx(target[index], abs=1e-5, rel=0), epoch


def test_cosine_annealing_warm_restarts_T_cur_reset():
    scheduler = CosineAnnealingWarmRestarts(two_groups(), T_0=4)
    for epoch in [7, 8, 9]:
        scheduler.T_cur = epoch
        scheduler.step()
        assert scheduler.T_cur == (epoch + 1) % scheduler.T_0


def test_cosine_annealing_warm_restarts_refusals_change_nothing():
    opt = two_groups()
    scheduler = CosineAnnealingWarmRestarts(opt, T_0=3)
    opt.step()
    scheduler.step()
    before = dict(vars(scheduler)), lrs(opt)
    for epoch, error, message in ((-1, ValueError, r"Expected non-negative epoch, but got -1"),
                                  (math.nan, ValueError, r"non-negative epoch, but got nan"),
                                  ("2", TypeError, r"epoch must be None or a number"),
                                  (True, TypeError, r"epoch must be None or a number")):
        with pytest.raises(error, match=message):
            scheduler.step(epoch)
        assert (dict(vars(scheduler)), lrs(opt)) == before
    for kwargs, error, message in (({"T_0": 0}, ValueError, r"T_0 must be from 1"),
                                   ({"T_0": 2, "T_mult": 0}, ValueError, r"T_mult must be from 1"),
                                   ({"T_0": 2.5}, TypeError, r"T_0 must be an int"),
                                   ({"T_0": 2, "eta_min": "0"}, TypeError, r"eta_min must be a")):
        fresh = two_groups()
        with pytest.raises(error, match=message):
            CosineAnnealingWarmRestarts(fresh, **kwargs)
        untouched(fresh)


# -- ReduceLROnPlateau (test_reduce_lr_on_plateau1 to 8, ...) ----------------------------------

PLATEAUS = {
    1: (dict(threshold_mode="abs", mode="min", threshold=0.01, patience=5, cooldown=5),
        [[0.5] * 20], [10 - i * 0.0167 for i in range(20)], 10),
    2: (dict(patience=5, cooldown=0, threshold_mode="abs", mode="min", threshold=0.1),
        [[0.5] * 6 + [0.05] * 7 + [0.005] * 7 + [0.0005] * 2],
        [10 - i * 0.0165 for i in range(22)], 22),
    3: (dict(mode="max", patience=5, cooldown=5, threshold_mode="abs"),
        [[0.5] * (2 + 6) + [0.05] * (5 + 6) + [0.005] * 4], [-0.8] * 2 + [-0.234] * 20, 22),
    4: (dict(mode="max", patience=3, threshold_mode="rel", threshold=0.1),
        [[0.5] * 20], [1.5 * (1.025 ** i) for i in range(20)], 20),
    5: (dict(mode="max", threshold_mode="rel", threshold=0.1, patience=5, cooldown=5),
        [[0.5] * 6 + [0.05] * (5 + 6) + [0.005] * 4], [1.5 * (1.005 ** i) for i in range(20)],
        20),
    6: (dict(mode="min", threshold_mode="rel", threshold=0.1),
        [[0.5] * 20], [1.5 * (0.85 ** i) for i in range(20)], 20),
    7: (dict(mode="min", threshold_mode="rel", threshold=0.1, patience=5, cooldown=5),
        [[0.5] * 6 + [0.05] * (5 + 6) + [0.005] * 4], [1] * 7 + [0.6] + [0.5] * 12, 20),
    8: (dict(mode="max", threshold_mode="rel", min_lr=[0.4, 0.3], threshold=0.1, patience=5,
             cooldown=5),
        [[0.5] * 6 + [0.4] * 14, [0.5] * 6 + [0.3] * 14],
        [1.5 * (1.005 ** i) for i in range(20)], 20),
}


@pytest.mark.parametrize("case", PLATEAUS)
def test_reduce_lr_on_plateau(case):
    kwargs, targets, metrics, epochs = PLATEAUS[case]
    opt = at_half(two_groups())
    check_plateau(opt, [ReduceLROnPlateau(opt, **kwargs)], targets, metrics, epochs)


def test_reduce_lr_on_plateau_takes_a_tensor_metric():
    opt = at_half(two_groups())
    scheduler = ReduceLROnPlateau(opt, patience=0)
    scheduler.step(tp.tensor(1.0))
    scheduler.step(tp.tensor([2.0]))
    assert lrs(opt) == [0.05, 0.05] and scheduler.best == 1.0


def test_reduce_lr_on_plateau_get_last_lr_before_step():
    opt = at_half(two_groups())
    scheduler = ReduceLROnPlateau(opt)
    assert scheduler.get_last_lr() == [0.5, 0.5]
    assert not hasattr(scheduler, "base_lrs") and "step" not in vars(opt)  # PyTorch's
    assert not scheduler.in_cooldown


# PyTorch's test_compound_reduce_lr_on_plateau1 to 5: its targets list is emptied ("the test
# runs step before checking lr"), so its tests check no lr; here each runs beside PyTorch's
# where torch is installed (test_compound_reduce_lr_on_plateau_as_pytorch).
COMPOUND_PLATEAUS = {
    1: (dict(threshold_mode="abs", mode="min", threshold=0.01, patience=5, cooldown=5),
        lambda m, opt: m.StepLR(opt, gamma=0.1, step_size=3),
        [10 - i * 0.0167 for i in range(20)], 10),
    2: (dict(patience=5, cooldown=0, threshold_mode="abs", mode="min", threshold=0.1),
        lambda m, opt: m.MultiStepLR(opt, gamma=0.1, milestones=[3, 8, 12]),
        [10 - i * 0.0165 for i in range(22)], 22),
    3: (dict(mode="max", patience=5, cooldown=5, threshold_mode="abs"),
        lambda m, opt: m.ExponentialLR(opt, gamma=0.1), [-0.8] * 2 + [-0.234] * 20, 22),
    4: (dict(mode="max", patience=3, threshold_mode="rel", threshold=0.1),
        lambda m, opt: m.CosineAnnealingLR(opt, 10, 1e-10),
        [1.5 * (1.025 ** i) for i in range(20)], 10),
    5: (dict(patience=5, cooldown=0, threshold_mode="abs", mode="min", threshold=0.1),
        lambda m, opt: m.LinearLR(opt, start_factor=0.4, total_iters=4),
        [10 - i * 0.0165 for i in range(22)], 22),
}


def test_reduce_lr_on_plateau_state_dict():
    opt = two_groups()
    scheduler = ReduceLROnPlateau(opt, mode="min", factor=0.1, patience=2)
    for score in [1.0, 2.0, 3.0, 4.0, 3.0, 4.0, 5.0, 3.0, 2.0, 1.0]:
        scheduler.step(score)
    copy = ReduceLROnPlateau(opt, mode="max", factor=0.5, patience=10)
    copy.load_state_dict(scheduler.state_dict())
    for key, value in vars(scheduler).items():
        if key != "optimizer":
            assert vars(copy)[key] == value, key
    with pytest.raises(ValueError, match="mode sideways is unknown!"):
        copy.load_state_dict({**scheduler.state_dict(), "mode": "sideways", "patience": 0})
    assert copy.patience == 2  # nothing was loaded


@pytest.mark.parametrize("min_lr", ["scalar", "list"])
def test_add_param_group_does_not_break_reduce_lr_on_plateau(min_lr):
    opt = at_half(two_groups())
    targets = [[0.5] * 6 + [0.05] * (5 + 6) + [0.005] * 4]
    metrics = [1] * 7 + [0.6] + [0.5] * 12
    scheduler = ReduceLROnPlateau(opt, mode="min", threshold_mode="rel", threshold=0.1,
                                  patience=5, cooldown=5,
                                  min_lr=0 if min_lr == "scalar" else [1e-5, 1e-4])
    for epoch in range(20):
        if epoch == 8:
            opt.add_param_group({"params": [nn.Parameter(tp.zeros(2, 3))], "lr": 0.05})
            if min_lr == "list":
                scheduler.min_lrs.append(1e-6)
        opt.step()
        scheduler.step(metrics[epoch])
        for group, target in zip(opt.param_groups, targets):
            assert group["lr"] == pytest.approx(target[epoch], abs=1e-5, rel=0), epoch


def test_add_param_group_errors_reduce_lr_on_plateau():
    opt = two_groups()
    scheduler = ReduceLROnPlateau(opt, mode="min", threshold_mode="rel", threshold=1e-5,
                                  patience=0, cooldown=0, min_lr=[1e-5, 1e-4])
    opt.add_param_group({"params": [nn.Parameter(tp.zeros(2, 3))], "lr": 0.05})
    opt.step()
    scheduler.step(1)
    before = dict(vars(scheduler)), lrs(opt)
    with pytest.raises(RuntimeError, match="The number of param groups in the"):
        opt.step()
        scheduler.step(1.3)
    assert (dict(vars(scheduler)), lrs(opt)) == before  # the refused step changed nothing


@pytest.mark.parametrize("make, error, message", [
    (lambda opt: ReduceLROnPlateau(opt, factor=1.0), ValueError, r"Factor should be < 1\.0\."),
    (lambda opt: ReduceLROnPlateau(opt, factor=-0.5), ValueError, r"factor must be from 0"),
    (lambda opt: ReduceLROnPlateau(opt, factor=math.nan), ValueError, r"factor must be from 0"),
    (lambda opt: ReduceLROnPlateau(opt, mode="least"), ValueError, r"mode least is unknown!"),
    (lambda opt: ReduceLROnPlateau(opt, threshold_mode="x"), ValueError,
     r"threshold mode x is unknown!"),
    (lambda opt: ReduceLROnPlateau(opt, min_lr=[0.1]), ValueError, r"expected 2 min_lrs, got 1"),
    (lambda opt: ReduceLROnPlateau(opt, min_lr="0"), TypeError, r"min_lr must be a float"),
    (lambda opt: ReduceLROnPlateau(opt, patience=-1), ValueError, r"patience must be from 0"),
    (lambda opt: ReduceLROnPlateau(opt, cooldown=1.5), TypeError, r"cooldown must be an int"),
    (lambda opt: ReduceLROnPlateau(object()), TypeError, r"object is not an Optimizer"),
])
def test_reduce_lr_on_plateau_refusals(make, error, message):
    opt = two_groups()
    with pytest.raises(error, match=message):
        make(opt)
    untouched(opt)


def test_reduce_lr_on_plateau_step_refusals_change_nothing():
    opt = two_groups()
    scheduler = ReduceLROnPlateau(opt, patience=0)
    scheduler.step(1.0)
    before = dict(vars(scheduler))
    for metrics, epoch, error, message in (("low", None, TypeError, r"metrics must be a number"),
                                           (None, None, TypeError, r"metrics must be a number"),
                                           (2.0, 1.5, TypeError, r"epoch must be None or an int"),
                                           (2.0, -1, ValueError, r"epoch must be from 0")):
        with pytest.raises(error, match=message):
            scheduler.step(metrics, epoch)
        assert dict(vars(scheduler)) == before


# -- SequentialLR and ChainedScheduler ---------------------------------------------------------

SEQUENCES = {
    1: (lambda opt: [ExponentialLR(opt, gamma=0.8), StepLR(opt, gamma=0.1, step_size=4)], [3],
        [0.05, 0.04, 0.032] + [0.05] * 4 + [0.005] * 4 + [0.0005] * 4 + [0.00005] * 4, 19),
    2: (lambda opt: [ConstantLR(opt, factor=0.1, total_iters=3), ExponentialLR(opt, gamma=0.9)],
        [3], [0.005, 0.005, 0.005] + [0.05 * 0.9 ** x for x in range(10)], 13),
    3: (lambda opt: [ConstantLR(opt, factor=0.1, total_iters=3), ExponentialLR(opt, gamma=0.8),
                     StepLR(opt, gamma=0.1, step_size=2)], [3, 6],
        [0.005] * 3 + [0.05, 0.04, 0.032] + [0.05, 0.05, 0.005, 0.005, 0.0005, 0.0005], 12),
    5: (lambda opt: [ChainedScheduler([LinearLR(opt, start_factor=0.1, total_iters=5),
                                       ConstantLR(opt, factor=0.1, total_iters=5)]),
                     ConstantLR(opt, factor=0.5, total_iters=5)], [5],
        [0.0005, 0.0014, 0.0023, 0.0032, 0.0041] + [0.025] * 5, 10),
}


@pytest.mark.parametrize("case", SEQUENCES)
def test_sequentiallr(case):
    make, milestones, single, epochs = SEQUENCES[case]
    opt = two_groups()
    with warnings.catch_warnings():
        # Case 5's ChainedScheduler steps its schedulers again when SequentialLR restarts it,
        # before any optimizer.step(): PyTorch's step-order warning, which PyTorch's gives too.
        warnings.simplefilter("ignore")
        scheduler = SequentialLR(opt, schedulers=make(opt), milestones=milestones)
    check_lrs(opt, [scheduler], [single], epochs)


def test_sequentiallr4_keeps_the_initial_lr():
    opt = optim.SGD([nn.Parameter(tp.tensor(0.5))], lr=0.1)
    SequentialLR(opt, [ConstantLR(opt, factor=1), ConstantLR(opt, factor=0.1)], milestones=[10])
    assert opt.param_groups[0]["lr"] == 0.1


def test_sequentiallr_no_warnings():
    opt = two_groups()
    scheduler = SequentialLR(opt, [LinearLR(opt, start_factor=0.5, end_factor=0.1,
                                            total_iters=5), ExponentialLR(opt, gamma=0.9)],
                             milestones=[5])
    for _ in range(10):
        opt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            scheduler.step()


def test_get_last_lr_sequentiallr():
    opt = two_groups()
    scheduler = SequentialLR(opt, [ConstantLR(opt, factor=0.1, total_iters=3),
                                   ExponentialLR(opt, gamma=0.8),
                                   StepLR(opt, gamma=0.1, step_size=2)], milestones=[3, 6])
    single = [0.005] * 3 + [0.05, 0.04, 0.032] + [0.05, 0.05, 0.005, 0.005, 0.0005, 0.0005]
    for epoch in range(12):
        result = scheduler.get_last_lr()
        opt.step()
        scheduler.step()
        assert result == pytest.approx([single[epoch], single[epoch] * 10], abs=1e-5, rel=0)


CHAINS = {
    1: (lambda opt: [StepLR(opt, gamma=0.1, step_size=3)],
        [0.05] * 3 + [0.005] * 3 + [0.0005] * 3 + [0.00005] * 3),
    2: (lambda opt: [LinearLR(opt, start_factor=0.4, total_iters=3)], [0.02, 0.03, 0.04]
        + [0.05] * 9),
    3: (lambda opt: [LinearLR(opt, start_factor=0.4, total_iters=3),
                     MultiStepLR(opt, milestones=[4, 8, 10], gamma=0.1)],
        [0.02, 0.03, 0.04, 0.05] + [0.005] * 4 + [0.0005] * 3 + [0.00005] * 3),
    4: (lambda opt: [ExponentialLR(opt, gamma=0.9), ConstantLR(opt, factor=0.2, total_iters=4),
                     StepLR(opt, gamma=0.1, step_size=3)],
        [0.05 * 0.2 * 0.9 ** x for x in range(3)] + [0.05 * 0.2 * 0.9 ** 3 * 0.1]
        + [0.05 * 0.9 ** x * 0.1 for x in range(4, 6)]
        + [0.05 * 0.9 ** x * 0.01 for x in range(6, 9)]),
    5: (lambda opt: [PolynomialLR(opt, power=0.9, total_iters=5), ConstantLR(opt, factor=0.1)],
        [0.1 * 0.05 * (1.0 - x / 5) ** 0.9 for x in range(5)] + [0.0] * 5),
}


@pytest.mark.parametrize("case", CHAINS)
def test_chained_lr(case):
    make, single = CHAINS[case]
    opt = two_groups()
    schedulers = make(opt)
    scheduler = ChainedScheduler(schedulers)
    check_lrs(opt, [scheduler], [single], min(len(single), 10))
    assert scheduler.get_last_lr() == schedulers[-1].get_last_lr()


def test_chained_lr2_get_last_lr_before_step():
    opt = two_groups()
    schedulers = [LinearLR(opt, start_factor=0.4, total_iters=3),
                  MultiStepLR(opt, milestones=[4, 8, 10], gamma=0.1)]
    assert ChainedScheduler(schedulers).get_last_lr() == schedulers[-1].get_last_lr()


def test_schedulers_of_schedulers_state_dict_round_trip():
    opt = two_groups()

    def make():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the step-order warning of test_sequentiallr[5]
            return SequentialLR(opt, [ChainedScheduler([LinearLR(opt, start_factor=0.1,
                                                                 total_iters=5),
                                                        ExponentialLR(opt, gamma=0.9)]),
                                      StepLR(opt, step_size=2)], [5])

    scheduler = make()
    for _ in range(8):
        opt.step()
        scheduler.step()
    state = pickle.loads(pickle.dumps(scheduler.state_dict()))
    assert list(state) == ["_milestones", "last_epoch", "_last_lr", "_schedulers"]
    # SequentialLR gave the ChainedScheduler its first step again, which counts it: PyTorch's
    # keys, in its order.
    assert list(state["_schedulers"][0]) == ["_last_lr", "_step_count", "_is_initial",
                                             "_schedulers"]
    other = make()
    other.load_state_dict(state)
    assert other.state_dict() == scheduler.state_dict()
    # The chain ran epochs 1 to 4; StepLR took over at 5, from its epoch 0 (PyTorch's too).
    assert other._schedulers[0]._schedulers[1].last_epoch == 4
    assert other._schedulers[1].last_epoch == 3 and other.last_epoch == 8
    with pytest.raises(ValueError, match=r"state_dict\['_schedulers'\] must be a list of one"):
        other.load_state_dict({**state, "last_epoch": 0, "_schedulers": state["_schedulers"][:1]})
    assert other.last_epoch == 8  # nothing was loaded


@pytest.mark.parametrize("make, error, message", [
    (lambda opt: SequentialLR(opt, [], []), ValueError,
     r"SequentialLR expects at least one scheduler, but got no scheduler\."),
    (lambda opt: SequentialLR(opt, [ReduceLROnPlateau(opt)], []), ValueError,
     r"SequentialLR does not support `ReduceLROnPlateau` scheduler"),
    (lambda opt: SequentialLR(opt, [StepLR(two_groups(), 2)], []), ValueError,
     r"SequentialLR expects all schedulers to belong to the same optimizer"),
    (lambda opt: SequentialLR(opt, [object()], []), TypeError,
     r"SequentialLR at index 0 should be a scheduler"),
    (lambda opt: SequentialLR(opt, (StepLR(two_groups(), 2) for _ in ()), []), TypeError,
     r"schedulers must be a list of schedulers"),
    (lambda opt: SequentialLR(opt, [StepLR(opt, 2)] * 2, []), ValueError,
     r"Sequential Schedulers expects number of schedulers provided to be one more than the "
     r"number of milestone points, but got number of schedulers 2 and the number of "
     r"milestones to be equal to 0"),
    (lambda opt: SequentialLR(opt, [StepLR(opt, 2)] * 3, [5, 2]), ValueError,
     r"milestones must not decrease"),
    (lambda opt: SequentialLR(opt, [StepLR(opt, 2)] * 2, [2.5]), TypeError,
     r"milestones must hold ints"),
    (lambda opt: ChainedScheduler([]), ValueError,
     r"ChainedScheduler expects at least one scheduler"),
    (lambda opt: ChainedScheduler([StepLR(opt, 2), StepLR(two_groups(), 2)]), ValueError,
     r"ChainedScheduler expects all schedulers to belong to the same optimizer, but got "
     r"scheduler StepLR at index 1"),
    (lambda opt: ChainedScheduler([ReduceLROnPlateau(opt)]), ValueError,
     r"ChainedScheduler does not support `ReduceLROnPlateau`"),
    (lambda opt: ChainedScheduler([StepLR(opt, 2)], optimizer=object()), TypeError,
     r"object is not an Optimizer"),
])
def test_schedulers_of_schedulers_refusals(make, error, message):
    opt = two_groups()
    with pytest.raises(error, match=message):
        make(opt)


def test_sequentiallr_refusal_changes_nothing():
    opt = two_groups()
    first = StepLR(opt, 2)
    before = dict(vars(first)), lrs(opt)
    with pytest.raises(ValueError, match="milestones must not decrease"):
        SequentialLR(opt, [first, first, first], [4, 3])
    assert (dict(vars(first)), lrs(opt)) == before


# -- CyclicLR (test_cycle_lr_*) ----------------------------------------------------------------

TRIANGLE = [1, 2, 3, 4, 5, 4, 3, 2, 1, 2, 3]
TRIANGLE2 = [1, 2, 3, 4, 5, 4, 3, 2, 1, 1.5, 2.0, 2.5, 3.0, 2.5, 2.0, 1.5, 1, 1.25, 1.50, 1.75,
             2.00, 1.75]
MOMENTUM2 = [5.0, 4.0, 3.0, 2.0, 1.0, 2.0, 3.0, 4.0, 5.0, 4.5, 4.0, 3.5, 3.0, 3.5, 4.0, 4.5,
             5.0, 4.75, 4.5, 4.25, 4.0, 4.25]
EXP_XS = [0, 0.25, 0.5, 0.75, 1, 0.75, 0.50, 0.25, 0, 0.25, 0.5, 0.75, 1]


def exp_range(base, top, xs, gamma=0.9, sign=1):
    start = base if sign > 0 else top
    return [start + sign * x * (top - base) * gamma ** i for i, x in enumerate(xs)]


CYCLES = {
    "triangular_one_lr": (dict(base_lr=1, max_lr=5, step_size_up=4, base_momentum=1,
                               max_momentum=5, mode="triangular"),
                          [TRIANGLE] * 2, [[6 - x for x in TRIANGLE]] * 2),
    "triangular2_one_lr": (dict(base_lr=1, max_lr=5, step_size_up=4, base_momentum=1,
                                max_momentum=5, mode="triangular2"),
                           [TRIANGLE2] * 2, [MOMENTUM2] * 2),
    "exp_range_one_lr": (dict(base_lr=1, max_lr=5, step_size_up=4, base_momentum=1,
                              max_momentum=5, mode="exp_range", gamma=0.9),
                         [exp_range(1, 5, EXP_XS)] * 2, [exp_range(1, 5, EXP_XS, sign=-1)] * 2),
    "triangular": (dict(base_lr=[1, 2], max_lr=[5, 6], step_size_up=4, base_momentum=[1, 2],
                        max_momentum=[5, 6], mode="triangular"),
                   [TRIANGLE, [x + 1 for x in TRIANGLE]],
                   [[6 - x for x in TRIANGLE], [7 - x for x in TRIANGLE]]),
    "triangular2": (dict(base_lr=[1, 3], max_lr=[5, 7], step_size_up=4, base_momentum=[1, 3],
                         max_momentum=[5, 7], mode="triangular2"),
                    [TRIANGLE2, [x + 2 for x in TRIANGLE2]],
                    [MOMENTUM2, [x + 2 for x in MOMENTUM2]]),
    "exp_range": (dict(base_lr=[1, 5], max_lr=[5, 12], step_size_up=4, base_momentum=[1, 5],
                       max_momentum=[5, 12], mode="exp_range", gamma=0.9),
                  [exp_range(1, 5, EXP_XS), exp_range(5, 12, EXP_XS)],
                  [exp_range(1, 5, EXP_XS, sign=-1), exp_range(5, 12, EXP_XS, sign=-1)]),
    "triangular_up_down": (
        dict(base_lr=1, max_lr=5, step_size_up=4, step_size_down=6, base_momentum=1,
             max_momentum=5, mode="triangular"),
        [[1.0, 2.0, 3.0, 4.0, 5.0, 13.0 / 3, 11.0 / 3, 9.0 / 3, 7.0 / 3, 5.0 / 3, 1.0]] * 2,
        [[5.0, 4.0, 3.0, 2.0, 1.0, 5.0 / 3, 7.0 / 3, 3.0, 11.0 / 3, 13.0 / 3, 5.0]] * 2),
    "triangular2_up_down": (
        dict(base_lr=[1, 3], max_lr=[5, 7], step_size_up=2, step_size_down=6,
             base_momentum=[1, 3], max_momentum=[5, 7], mode="triangular2"),
        [[x + delta for x in [1.0, 3.0, 5.0, 13.0 / 3, 11.0 / 3, 9.0 / 3, 7.0 / 3, 5.0 / 3, 1.0,
                              2.0, 3.0, 8.0 / 3, 7.0 / 3, 6.0 / 3, 5.0 / 3, 4.0 / 3, 1.0,
                              3.0 / 2, 2.0, 11.0 / 6, 10.0 / 6, 9.0 / 6, 8.0 / 6, 7.0 / 6]]
         for delta in (0, 2)],
        [[x + delta for x in [5.0, 3.0, 1.0, 5.0 / 3, 7.0 / 3, 3.0, 11.0 / 3, 13.0 / 3, 5.0,
                              4.0, 3.0, 10.0 / 3, 11.0 / 3, 4.0, 13.0 / 3, 14.0 / 3, 5.0, 4.5,
                              4.0, 25.0 / 6, 13.0 / 3, 4.5, 14.0 / 3, 29.0 / 6]]
         for delta in (0, 2)]),
    "exp_range_up_down": (
        dict(base_lr=1, max_lr=5, step_size_up=2, step_size_down=6, base_momentum=1,
             max_momentum=5, mode="exp_range", gamma=0.9),
        [exp_range(1, 5, [0.0, 0.5, 1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6, 0.0, 0.5, 1.0,
                          5 / 6, 4 / 6])] * 2,
        [exp_range(1, 5, [0.0, 0.5, 1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6, 0.0, 0.5, 1.0,
                          5 / 6, 4 / 6], sign=-1)] * 2),
}


@pytest.mark.parametrize("case", CYCLES)
def test_cycle_lr(case):
    kwargs, lr_targets, momentum_targets = CYCLES[case]
    opt = two_groups()
    scheduler = CyclicLR(opt, cycle_momentum=True, **kwargs)
    check_cycle(opt, scheduler, lr_targets, momentum_targets, len(lr_targets[0]))


def test_cycle_lr_triangular_mode_one_lr_no_momentum():
    opt = two_groups()
    scheduler = CyclicLR(opt, base_lr=1, max_lr=5, step_size_up=4, cycle_momentum=False)
    check_cycle(opt, scheduler, [TRIANGLE] * 2, [[opt.defaults["momentum"]] * 11] * 2, 11)


def test_cycle_lr_with_momentumless_optimizer():
    opt = adam_groups()
    scheduler = CyclicLR(opt, base_lr=1, max_lr=5, step_size_up=4, cycle_momentum=False)
    check_cycle(opt, scheduler, [TRIANGLE] * 2, [[None] * 11] * 2, 11)
    assert [group["betas"] for group in opt.param_groups] == [(0.9, 0.999)] * 2


def test_cycle_lr_cycle_momentum_fail_with_momentumless_optimizer():
    opt = optim.Adagrad([nn.Parameter(tp.zeros(1))])
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1 with "
                                         "`cycle_momentum` option enabled"):
        CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=True)
    untouched(opt, [0.01])


def test_cycle_lr_cycle_momentum_with_beta1_optimizer():
    opt = adam_groups()
    CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=True)
    assert [group["betas"] for group in opt.param_groups] == [(0.9, 0.999)] * 2
    assert [group["base_momentum"] for group in opt.param_groups] == [0.8, 0.8]


def test_cycle_lr_removed_after_out_of_scope():
    def make():
        return weakref.ref(CyclicLR(adam_groups(), base_lr=1, max_lr=5, cycle_momentum=False))

    gc.disable()
    try:
        assert make()() is None
    finally:
        gc.enable()


class ScaleFn:
    """PyTorch's callable scale_fn class (test_cycle_lr_state_dict_picklable, case 3)."""

    def __init__(self):
        self.x = 0.5

    def __call__(self, _):
        return self.x


def test_cycle_lr_state_dict_picklable():
    opt = adam_groups()
    state = CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=False).state_dict()
    assert "_scale_fn_ref" not in state and state["_scale_fn_custom"] is None
    pickle.dumps(state)
    state = CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=False,
                     scale_fn=lambda _: 0.5).state_dict()
    assert state["_scale_fn_custom"] is None
    pickle.dumps(state)
    scale_fn = ScaleFn()
    state = CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=False,
                     scale_fn=scale_fn).state_dict()
    assert state["_scale_fn_custom"] == scale_fn.__dict__
    assert list(state)[-1] == "_scale_fn_custom"
    pickle.dumps(state)


def test_cycle_lr_scale_fn_restored_from_state_dict():
    opt = adam_groups()
    scheduler = CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=False, mode="triangular2")
    restored = CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=False)
    restored.load_state_dict(scheduler.state_dict())
    assert restored.mode == scheduler.mode == "triangular2"
    assert restored.scale_fn(3) == scheduler.scale_fn(3) == 0.25
    assert restored._scale_fn_custom is None and scheduler._scale_fn_custom is None

    def scale_fn(_):
        return 0.5

    scheduler = CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=False, scale_fn=scale_fn)
    restored = CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=False, scale_fn=scale_fn)
    restored.load_state_dict(scheduler.state_dict())
    assert scheduler._scale_fn_custom is scale_fn and restored._scale_fn_custom is scale_fn
    shaped = CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=False, scale_fn=ScaleFn())
    shaped._scale_fn_custom.x = 0.25
    plain = CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=False)
    with pytest.raises(ValueError, match="holds the attributes of a custom scale_fn"):
        plain.load_state_dict({**shaped.state_dict(), "last_epoch": 7})
    assert plain.last_epoch == 0  # nothing was loaded
    again = CyclicLR(opt, base_lr=1, max_lr=5, cycle_momentum=False, scale_fn=ScaleFn())
    again.load_state_dict(shaped.state_dict())
    assert again._scale_fn_custom.x == 0.25


def test_cosine_then_cyclic():
    # PyTorch's test of its issue 21965: CyclicLR after CosineAnnealingLR stays in its range.
    opt = optim.SGD(nn.Linear(2, 1).parameters(), lr=0.5)
    cosine = CosineAnnealingLR(opt, T_max=20, eta_min=0.1)
    cyclic = CyclicLR(opt, base_lr=0.1, max_lr=0.3, step_size_up=1, step_size_down=3)
    for i in range(40):
        opt.step()
        if i <= cosine.T_max:
            cosine.step()
        else:
            cyclic.step()
    assert opt.param_groups[0]["lr"] <= 0.3


@pytest.mark.parametrize("make, error, message", [
    (lambda opt: CyclicLR(opt, base_lr=0, max_lr=0, mode="CATS"), ValueError,
     r"mode is invalid and scale_fn is None"),
    (lambda opt: CyclicLR(opt, 0.1, 1.0, scale_fn=lambda x: 1.0, scale_mode="epochs"),
     ValueError, r"scale_mode must be 'cycle' or 'iterations'"),
    (lambda opt: CyclicLR(opt, 0.1, 1.0, scale_fn=0.5), TypeError,
     r"scale_fn must be None or a function"),
    (lambda opt: CyclicLR(opt, [0.1], 1.0), ValueError,
     r"base_lr must have the same length as optimizer\.param_groups\. base_lr has 1 values, "
     r"param_groups has 2\."),
    (lambda opt: CyclicLR(opt, 0.1, [1.0, "2"]), TypeError, r"max_lr\[1\] must be a float"),
    (lambda opt: CyclicLR(opt, 0.1, 1.0, step_size_up=0), ValueError,
     r"step_size_up must be from 1"),
    (lambda opt: CyclicLR(opt, 0.1, 1.0, step_size_down=-1), ValueError,
     r"step_size_down must be from 0 to 2\*\*63 - 1, got -1"),
    (lambda opt: CyclicLR(opt, 0.1, 1.0, step_size_down=2.5), TypeError,
     r"step_size_down must be None or an int"),
    (lambda opt: CyclicLR(opt, 0.1, 1.0, base_momentum=[0.8, 0.8, 0.8]), ValueError,
     r"base_momentum must have the same length"),
    (lambda opt: CyclicLR(opt, 0.1, 1.0, last_epoch=3), KeyError,
     r"param 'initial_lr' is not specified in param_groups\[0\] when resuming CyclicLR"),
])
def test_cycle_lr_refusals(make, error, message):
    opt = two_groups()
    with pytest.raises(error, match=message):
        make(opt)
    untouched(opt)
    assert all("momentum" not in group or group["momentum"] == 0 for group in opt.param_groups)


# -- OneCycleLR (test_onecycle_lr_*) -----------------------------------------------------------

def annealing_cos(start, end, pct):
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)


ONE_CYCLES = {
    "linear": (dict(max_lr=25, final_div_factor=2, base_momentum=1, max_momentum=22,
                    total_steps=10, anneal_strategy="linear"),
               [1, 13, 25, 21.5, 18, 14.5, 11, 7.5, 4, 0.5],
               [22, 11.5, 1, 4, 7, 10, 13, 16, 19, 22]),
    "linear_three_phases": (dict(max_lr=25, div_factor=25, base_momentum=1, max_momentum=22,
                                 total_steps=10, anneal_strategy="linear", pct_start=0.4,
                                 final_div_factor=4, three_phase=True),
                            [1, 9, 17, 25, 17, 9, 1, 0.75, 0.5, 0.25],
                            [22, 15, 8, 1, 8, 15, 22, 22, 22, 22]),
    "cosine": (dict(max_lr=25, final_div_factor=2, base_momentum=1, max_momentum=22,
                    total_steps=10),
               [1, 13, 25] + [annealing_cos(25, 0.5, i / 7.0) for i in range(1, 7)] + [0.5],
               [22, 11.5, 1] + [annealing_cos(1, 22, i / 7.0) for i in range(1, 7)] + [22]),
}


@pytest.mark.parametrize("case", ONE_CYCLES)
def test_onecycle_lr(case):
    kwargs, lr_target, momentum_target = ONE_CYCLES[case]
    opt = two_groups()
    scheduler = OneCycleLR(opt, **kwargs)
    check_cycle(opt, scheduler, [lr_target] * 2, [momentum_target] * 2, 10)


def test_cycle_lr_with_adam():
    # PyTorch's name: OneCycleLR over Adam, the momentum betas[0]. PyTorch's test cycles beta1
    # between 1 and 22, which tensorplay's Adam refuses at its next step (a beta outside
    # [0, 1)); the momenta here run between 0.1 and 0.8 along the same lines.
    kwargs, lr_target, _ = ONE_CYCLES["linear"]
    opt = adam_groups()
    scheduler = OneCycleLR(opt, **{**kwargs, "base_momentum": 0.1, "max_momentum": 0.8})
    momentum_target = [0.8, 0.45, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    check_cycle(opt, scheduler, [lr_target] * 2, [momentum_target] * 2, 10, beta1=True)


def test_onecycle_lr_stepping_past_the_end_is_refused_and_changes_nothing():
    opt = two_groups()
    scheduler = OneCycleLR(opt, max_lr=1.0, total_steps=3)
    for _ in range(3):
        opt.step()
        scheduler.step()
    before = dict(vars(scheduler)), [dict(group) for group in opt.param_groups]
    with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of total "
                                         "steps is 3"):
        scheduler.step()
    assert (dict(vars(scheduler)), [dict(group) for group in opt.param_groups]) == before


@pytest.mark.parametrize("make, error, message", [
    (lambda opt: OneCycleLR(opt, max_lr=1e-3, total_steps=10, anneal_strategy="CATS"),
     ValueError, r"anneal_strategy must be one of 'cos' or 'linear', instead got CATS"),
    (lambda opt: OneCycleLR(opt, max_lr=1e-3, total_steps=10, pct_start=1.1), ValueError,
     r"Expected float between 0 and 1 pct_start, but got 1\.1"),
    (lambda opt: OneCycleLR(opt, max_lr=1e-3), ValueError,
     r"You must define either total_steps OR \(epochs AND steps_per_epoch\)"),
    (lambda opt: OneCycleLR(opt, max_lr=1e-3, epochs=3), ValueError,
     r"You must define either total_steps"),
    (lambda opt: OneCycleLR(opt, max_lr=1e-3, total_steps=0), ValueError,
     r"Expected positive integer total_steps, but got 0"),
    (lambda opt: OneCycleLR(opt, max_lr=1e-3, epochs=2, steps_per_epoch=-1), ValueError,
     r"Expected positive integer steps_per_epoch, but got -1"),
    (lambda opt: OneCycleLR(opt, max_lr=1e-3, total_steps=2.5), TypeError,
     r"total_steps must be None or an int"),
    (lambda opt: OneCycleLR(opt, max_lr=1e-3, total_steps=10, pct_start=0.1), ValueError,
     r"OneCycleLR: phase 1 of the schedule has no steps \(pct_start=0\.1 and total_steps=10"),
    (lambda opt: OneCycleLR(opt, max_lr=1e-3, total_steps=10, div_factor=0.0), ValueError,
     r"div_factor must not be 0"),
    (lambda opt: OneCycleLR(opt, max_lr=[1e-3], total_steps=10), ValueError,
     r"max_lr must have the same length as optimizer\.param_groups"),
    (lambda opt: OneCycleLR(optim.Adagrad(opt.param_groups[0]["params"]), max_lr=1e-3,
                            total_steps=10), ValueError,
     r"optimizer must support momentum or beta1"),
    (lambda opt: OneCycleLR(opt, max_lr=1e-3, total_steps=10, last_epoch=2), KeyError,
     r"param 'initial_lr' is not specified in param_groups\[0\] when resuming OneCycleLR"),
])
def test_onecycle_lr_refusals(make, error, message):
    opt = two_groups()
    with pytest.raises(error, match=message):
        make(opt)
    untouched(opt)
    assert all(key not in group for group in opt.param_groups
               for key in ("max_lr", "min_lr", "max_momentum"))


def test_onecycle_lr_zero_width_phase_is_pytorchs_failure(torch):
    # PyTorch's divides by zero here; ours names the phase.
    param = torch.nn.Parameter(torch.zeros(1))
    with pytest.raises(ZeroDivisionError):
        torch.optim.lr_scheduler.OneCycleLR(torch.optim.SGD([param], lr=0.1, momentum=0.9),
                                            max_lr=1.0, total_steps=10, pct_start=0.1)


def test_onecycle_lr_resumes_from_the_optimizers_state():
    model = nn.Linear(2, 2)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = OneCycleLR(opt, max_lr=1.0, total_steps=20)
    for _ in range(5):
        opt.step()
        scheduler.step()
    resumed = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    resumed.load_state_dict(opt.state_dict())
    again = OneCycleLR(resumed, max_lr=1.0, total_steps=20, last_epoch=4)
    assert again.get_last_lr() == scheduler.get_last_lr()
    assert resumed.param_groups[0]["momentum"] == opt.param_groups[0]["momentum"]


# -- every class: state_dict through pickle, the initial lr ------------------------------------

FACTORIES = {
    "MultiplicativeLR": functools.partial(MultiplicativeLR, lr_lambda=lambda e: 0.95),
    "PolynomialLR": PolynomialLR,
    "CosineAnnealingWarmRestarts": functools.partial(CosineAnnealingWarmRestarts, T_0=20),
    "ChainedScheduler": lambda opt: ChainedScheduler([ConstantLR(opt), ConstantLR(opt)]),
    "SequentialLR": lambda opt: SequentialLR(opt, [ConstantLR(opt), ConstantLR(opt)], [2]),
    "ReduceLROnPlateau": ReduceLROnPlateau,
    "CyclicLR": functools.partial(CyclicLR, base_lr=0.01, max_lr=0.1),
    "OneCycleLR": functools.partial(OneCycleLR, max_lr=0.01, total_steps=10,
                                    anneal_strategy="linear"),
}


@pytest.mark.parametrize("name", FACTORIES)
def test_lr_scheduler_state_dict_load(name):
    make = FACTORIES[name]
    opt = two_groups()
    state = make(opt).state_dict()
    loaded = pickle.loads(pickle.dumps(state))
    assert loaded == state
    other = make(opt)
    other.load_state_dict(loaded)
    assert other.state_dict() == state
    assert isinstance(other, LRScheduler)


@pytest.mark.parametrize("name", ["MultiplicativeLR", "PolynomialLR",
                                  "CosineAnnealingWarmRestarts"])
def test_constant_initial_lr(name):
    opt = optim.SGD([nn.Parameter(tp.zeros(1))], lr=0.1)
    scheduler = FACTORIES[name](opt)
    for epoch in range(2):
        opt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the deprecated epoch
            scheduler.step(epoch)
        assert opt.param_groups[0]["initial_lr"] == 0.1
        assert scheduler.base_lrs == [0.1]


# -- against PyTorch ---------------------------------------------------------------------------

@pytest.fixture
def torch():
    return import_or_skip("torch")


LRS = [0.05, 0.5, 1.0]


def optimizers(torch, kind):
    """Ours and PyTorch's optimiser of kind over three groups with the lrs of LRS."""
    ours = getattr(optim, kind)([{"params": [nn.Parameter(tp.zeros(2))], "lr": lr}
                                 for lr in LRS], **({"momentum": 0.9} if kind == "SGD" else {}))
    theirs = getattr(torch.optim, kind)(
        [{"params": [torch.nn.Parameter(torch.zeros(2))], "lr": lr} for lr in LRS],
        **({"momentum": 0.9} if kind == "SGD" else {}))
    return ours, theirs


def steps_of(scheduler, index):
    """The arguments of the scheduler's step at index: a metric for ReduceLROnPlateau."""
    if isinstance(scheduler, ReduceLROnPlateau) or type(scheduler).__name__ == "ReduceLROnPlateau":
        return (10.0 / (1 + index // 6) if scheduler.mode == "min" else float(index % 5),)
    return ()


# (name, optimiser, a function of the module making the scheduler for an optimiser)
AGAINST = [
    ("MultiplicativeLR", "SGD", lambda m, o: m.MultiplicativeLR(o, lambda e: 0.95)),
    ("MultiplicativeLR_per_group", "SGD",
     lambda m, o: m.MultiplicativeLR(o, [lambda e: 0.9, lambda e: 1 / (e + 1), lambda e: 1.1])),
    ("PolynomialLR", "SGD", lambda m, o: m.PolynomialLR(o, total_iters=7, power=1.7)),
    ("CosineAnnealingWarmRestarts", "SGD",
     lambda m, o: m.CosineAnnealingWarmRestarts(o, 3, T_mult=2, eta_min=0.001)),
    ("SequentialLR", "SGD",
     lambda m, o: m.SequentialLR(o, [m.ConstantLR(o, factor=0.1, total_iters=2),
                                     m.ExponentialLR(o, 0.9), m.StepLR(o, 3)], [4, 10])),
    ("SequentialLR_closed_form", "SGD",
     lambda m, o: m.SequentialLR(o, [m.LinearLR(o, 0.1, total_iters=5),
                                     m.CosineAnnealingLR(o, 8)], [5])),
    ("ChainedScheduler", "SGD",
     lambda m, o: m.ChainedScheduler([m.ConstantLR(o, factor=0.1, total_iters=2),
                                      m.ExponentialLR(o, 0.9)])),
    ("ReduceLROnPlateau", "SGD",
     lambda m, o: m.ReduceLROnPlateau(o, patience=2, cooldown=1, min_lr=[0.001, 0.01, 0.02])),
    ("ReduceLROnPlateau_max", "SGD",
     lambda m, o: m.ReduceLROnPlateau(o, mode="max", threshold_mode="abs", threshold=0.1,
                                      patience=1)),
    ("CyclicLR", "SGD",
     lambda m, o: m.CyclicLR(o, 0.01, [0.1, 0.2, 0.3], step_size_up=3, step_size_down=5)),
    ("CyclicLR_triangular2", "SGD",
     lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=4, mode="triangular2")),
    ("CyclicLR_exp_range_Adam", "Adam",
     lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=4, mode="exp_range", gamma=0.97)),
    ("CyclicLR_custom", "SGD",
     lambda m, o: m.CyclicLR(o, 0.01, 0.1, step_size_up=3, scale_fn=lambda x: 0.9 ** x,
                             scale_mode="iterations", cycle_momentum=False)),
    ("OneCycleLR", "SGD", lambda m, o: m.OneCycleLR(o, 1.0, total_steps=40)),
    ("OneCycleLR_three_phase_Adam", "Adam",
     lambda m, o: m.OneCycleLR(o, [1.0, 2.0, 3.0], epochs=4, steps_per_epoch=10,
                               three_phase=True, anneal_strategy="linear")),
]


def same_groups(ours, theirs):
    for key in ("lr", "momentum", "betas", "initial_lr", "max_lr", "min_lr", "max_momentum",
                "base_momentum"):
        assert [group.get(key) for group in ours.param_groups] == \
            [group.get(key) for group in theirs.param_groups], key


def same_state(mine, reference):
    ours, theirs = mine.state_dict(), reference.state_dict()
    assert list(ours) == list(theirs)
    assert ours == theirs


@pytest.mark.parametrize("name, kind, make", AGAINST, ids=[case[0] for case in AGAINST])
def test_same_as_pytorch(torch, name, kind, make):
    ours, theirs = optimizers(torch, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mine, reference = make(lr_scheduler, ours), make(torch.optim.lr_scheduler, theirs)
    same_groups(ours, theirs)
    same_state(mine, reference)
    for index in range(40):  # the same floats, to the last bit
        ours.step()
        theirs.step()
        mine.step(*steps_of(mine, index))
        reference.step(*steps_of(reference, index))
        same_groups(ours, theirs)
        assert mine.get_last_lr() == reference.get_last_lr()
    same_state(mine, reference)


# A custom scale_fn that is a function saves as None in both: nothing of it crosses.
CROSSING = [case for case in AGAINST if case[0] != "CyclicLR_custom"]


@pytest.mark.parametrize("name, kind, make", CROSSING, ids=[case[0] for case in CROSSING])
def test_state_dict_loads_across_both(torch, name, kind, make):
    ours, theirs = optimizers(torch, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mine, reference = make(lr_scheduler, ours), make(torch.optim.lr_scheduler, theirs)
        for index in range(7):
            for optimizer, scheduler in ((ours, mine), (theirs, reference)):
                optimizer.step()
                scheduler.step(*steps_of(scheduler, index))
        # Each library's state into a fresh scheduler of the other's, over an optimiser whose
        # groups hold the saved ones' values (as the optimiser's own state_dict() restores).
        fresh_ours, fresh_theirs = optimizers(torch, kind)
        loading_ours = make(lr_scheduler, fresh_ours)
        loading_theirs = make(torch.optim.lr_scheduler, fresh_theirs)
        for fresh, saved in ((fresh_ours, theirs), (fresh_theirs, ours)):
            for group, kept in zip(fresh.param_groups, saved.param_groups):
                group.update({key: value for key, value in kept.items() if key != "params"})
        loading_ours.load_state_dict(reference.state_dict())
        loading_theirs.load_state_dict(mine.state_dict())
        for index in range(7, 17):
            for optimizer, scheduler in ((ours, mine), (theirs, reference),
                                         (fresh_ours, loading_ours),
                                         (fresh_theirs, loading_theirs)):
                optimizer.step()
                scheduler.step(*steps_of(scheduler, index))
    same_groups(fresh_ours, theirs)
    same_groups(ours, fresh_theirs)


@pytest.mark.parametrize("make, kind", [
    (lambda m, o: m.ReduceLROnPlateau(o, factor=1.5), None),
    (lambda m, o: m.ReduceLROnPlateau(o, mode="up"), None),
    (lambda m, o: m.ReduceLROnPlateau(o, threshold_mode="up"), None),
    (lambda m, o: m.ReduceLROnPlateau(o, min_lr=[0.1]), None),
    (lambda m, o: m.CyclicLR(o, 0.1, 1.0, mode="CATS"), None),
    (lambda m, o: m.CyclicLR(o, [0.1], 1.0), None),
    (lambda m, o: m.CyclicLR(o, 0.1, 1.0, cycle_momentum=True), "Adagrad"),
    (lambda m, o: m.OneCycleLR(o, 1.0), None),
    (lambda m, o: m.OneCycleLR(o, 1.0, total_steps=0), None),
    (lambda m, o: m.OneCycleLR(o, 1.0, total_steps=10, pct_start=1.5), None),
    (lambda m, o: m.OneCycleLR(o, 1.0, total_steps=10, anneal_strategy="cubic"), None),
    (lambda m, o: m.SequentialLR(o, [], []), None),
    (lambda m, o: m.SequentialLR(o, [m.StepLR(o, 2)] * 2, [1, 2]), None),
    (lambda m, o: m.ChainedScheduler([]), None),
    (lambda m, o: m.MultiplicativeLR(o, [lambda e: 1.0]), None),
])
def test_errors_are_pytorchs(torch, make, kind):
    mine, reference = optimizers(torch, kind or "SGD")
    same_error(lambda: make(lr_scheduler, mine), lambda: make(torch.optim.lr_scheduler,
                                                              reference))


@pytest.mark.parametrize("case", COMPOUND_PLATEAUS)
def test_compound_reduce_lr_on_plateau_as_pytorch(torch, case):
    kwargs, make, metrics, epochs = COMPOUND_PLATEAUS[case]
    ours, theirs = optimizers(torch, "SGD")
    sides = []
    for module, optimizer in ((lr_scheduler, ours), (torch.optim.lr_scheduler, theirs)):
        for group in optimizer.param_groups:
            group["lr"] = 0.5
        sides.append((optimizer, [module.ReduceLROnPlateau(optimizer, **kwargs),
                                  make(module, optimizer)]))
    for epoch in range(epochs):
        for optimizer, schedulers in sides:
            optimizer.step()
            schedulers[0].step(metrics[epoch])
            schedulers[1].step()
        assert lrs(ours) == lrs(theirs), epoch
