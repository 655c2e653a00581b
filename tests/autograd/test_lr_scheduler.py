"""tensorplay.optim.lr_scheduler (CPU: a scheduler does no device work): the lr sequences, the
closed forms, composed schedulers, the step-order and deprecation warnings, the errors, checks
before any change, state_dict() round trips, the optimiser's wrapped step; against PyTorch
where it is installed.

Ported from PyTorch's test/optim/test_lrscheduler.py (TestLRScheduler), with tensorplay's SGD
and float lrs (tensorplay's optimisers take no tensor lr), for the classes offered:
test_step_lr, test_multi_step_lr, test_constantlr, test_linearlr, test_exp_lr,
test_cos_anneal_lr, test_lambda_lr and their get_last_lr and with_epoch forms; test_closed_form_*
(comparing epoch by epoch, where PyTorch's helper reads an optimiser its setUp replaced);
test_*_is_constant_for_constant_epoch; test_compound_*; test_old_pattern_warning*,
test_new_pattern_no_warning*; test_error_when_getlr_has_epoch,
test_linearlr_start_factor_limits*,
test_raise_error_when_last_epoch_is_greater_than_0_and_initial_lr_is_not_specified;
test_*_state_dict, test_lambda_lr_state_dict_fn and _obj, test_lr_scheduler_state_dict_load
(through pickle), test_cos_anneal_lr_continue, test_lr_scheduler_checkpoint,
test_constant_initial_lr, test_no_cyclic_references and _in_step. The helpers step the
optimiser before the scheduler, as PyTorch's documentation asks (PyTorch's _test does not, and
warns). Where torch is installed every scheduler runs beside PyTorch's, on three groups over 30
epochs, and must set the same floats, save the same state_dict() and load PyTorch's, and raise
PyTorch's errors.
"""
import copy
import functools
import gc
import math
import pickle
import types
import warnings
import weakref

import pytest

import tensorplay as tp
from tensorplay import nn, optim
from tensorplay.optim.lr_scheduler import (ConstantLR, CosineAnnealingLR, ExponentialLR,
                                           LambdaLR, LinearLR, LRScheduler, MultiStepLR,
                                           StepLR)

from tests.autograd.against_pytorch import same_error
from tests.peers import import_or_skip

HOW_TO = r"how-to-adjust-learning-rate"
EPOCH_DEPRECATION = "The epoch parameter in `scheduler.step()` was not necessary"


def two_groups():
    """PyTorch's setUp: SGD over two groups of parameters, lrs 0.05 and 0.5."""
    return optim.SGD([{"params": [nn.Parameter(tp.zeros(1, 1)), nn.Parameter(tp.zeros(1))]},
                      {"params": [nn.Parameter(tp.zeros(1, 1)), nn.Parameter(tp.zeros(1))],
                       "lr": 0.5}], lr=0.05)


def check_lrs(opt, schedulers, targets, epochs):
    """PyTorch's _test: each group's lr at each epoch, then the schedulers step."""
    for epoch in range(epochs):
        for group, target in zip(opt.param_groups, targets):
            assert group["lr"] == pytest.approx(target[epoch], abs=1e-5, rel=0), epoch
        opt.step()
        for scheduler in schedulers:
            scheduler.step()


def check_last_lrs(opt, scheduler, targets, epochs):
    """PyTorch's _test_get_last_lr."""
    for epoch in range(epochs):
        result = scheduler.get_last_lr()
        opt.step()
        scheduler.step()
        assert result == pytest.approx([target[epoch] for target in targets], abs=1e-5, rel=0)


def check_with_epoch(opt, scheduler, targets, epochs):
    """PyTorch's _test_with_epoch: step(epoch) warns once, and sets the closed form's lrs."""
    for epoch in range(epochs):
        opt.step()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scheduler.step(epoch)
        assert [str(w.message) for w in caught] == [str(caught[0].message)]
        assert str(caught[0].message).startswith(EPOCH_DEPRECATION)
        for group, target in zip(opt.param_groups, targets):
            assert group["lr"] == pytest.approx(target[epoch], abs=1e-5, rel=0), epoch


def scaled(single, epochs=10):
    """The second group's targets: 10 times the first's (its lr is 0.5, the first's 0.05)."""
    return [single, [x * epochs for x in single]]


def linear_targets(start_factor, end_factor, iters, epochs):
    interpolation = [start_factor + i * (end_factor - start_factor) / iters
                     for i in range(iters)]
    return ([x * 0.05 for x in interpolation]
            + [0.05 * end_factor] * (epochs - iters))


def cosine(epochs, eta_min=1e-10):
    return [eta_min + (0.05 - eta_min) * (1 + math.cos(math.pi * x / epochs)) / 2
            for x in range(epochs)]


# -- lr sequences (test_step_lr, test_multi_step_lr, ...) --------------------------------------

SEQUENCES = {
    "step": (lambda opt: StepLR(opt, gamma=0.1, step_size=3),
             [0.05] * 3 + [0.005] * 3 + [0.0005] * 3 + [0.00005] * 3),
    "multi_step": (lambda opt: MultiStepLR(opt, gamma=0.1, milestones=[2, 5, 9]),
                   [0.05] * 2 + [0.005] * 3 + [0.0005] * 4 + [0.00005] * 3),
    "constant": (lambda opt: ConstantLR(opt, factor=1.0 / 2, total_iters=5),
                 [0.025] * 5 + [0.05] * 5),
    "linear": (lambda opt: LinearLR(opt, start_factor=1.0 / 2, total_iters=4),
               linear_targets(0.5, 1.0, 4, 10)),
    "linear_to_end_factor": (lambda opt: LinearLR(opt, start_factor=1.0 / 4,
                                                  end_factor=3.0 / 5, total_iters=4),
                             linear_targets(0.25, 0.6, 4, 10)),
    "exponential": (lambda opt: ExponentialLR(opt, gamma=0.9), [0.05 * 0.9 ** x
                                                                for x in range(10)]),
    "cosine": (lambda opt: CosineAnnealingLR(opt, T_max=10, eta_min=1e-10), cosine(10)),
}


@pytest.mark.parametrize("name", SEQUENCES)
def test_lr_sequence(name):
    make, single = SEQUENCES[name]
    opt = two_groups()
    check_lrs(opt, [make(opt)], scaled(single), 10)


@pytest.mark.parametrize("name", ["step", "multi_step", "constant", "linear_to_end_factor"])
def test_get_last_lr(name):
    make, single = SEQUENCES[name]
    opt = two_groups()
    check_last_lrs(opt, make(opt), scaled(single), 10)


@pytest.mark.parametrize("name", ["multi_step", "constant", "linear"])
def test_lr_sequence_with_epoch(name):
    make, single = SEQUENCES[name]
    opt = two_groups()
    check_with_epoch(opt, make(opt), scaled(single), 10)


def test_lambda_lr():
    opt = two_groups()
    opt.param_groups[1]["lr"] = 0.4
    scheduler = LambdaLR(opt, lr_lambda=[lambda x1: 0.9 ** x1, lambda x2: 0.8 ** x2])
    check_lrs(opt, [scheduler], [[0.05 * 0.9 ** x for x in range(10)],
                                 [0.4 * 0.8 ** x for x in range(10)]], 10)


CLOSED_FORMS = {
    "step": lambda opt: StepLR(opt, gamma=0.1, step_size=3),
    "linear": lambda opt: LinearLR(opt, start_factor=1.0 / 3, end_factor=0.7, total_iters=4),
    "constant": lambda opt: ConstantLR(opt, factor=1.0 / 3, total_iters=4),
    "multi_step": lambda opt: MultiStepLR(opt, gamma=0.1, milestones=[2, 5, 9]),
    "exponential": lambda opt: ExponentialLR(opt, gamma=0.9),
    "cosine": lambda opt: CosineAnnealingLR(opt, T_max=5, eta_min=1e-10),
}


@pytest.mark.parametrize("name", CLOSED_FORMS)
def test_closed_form_matches_the_chainable_form(name):
    chained_opt, closed_opt = two_groups(), two_groups()
    chained, closed = CLOSED_FORMS[name](chained_opt), CLOSED_FORMS[name](closed_opt)
    for epoch in range(1, 20):
        chained_opt.step()
        chained.step()
        closed_opt.step()
        with pytest.warns(UserWarning, match=r"The epoch parameter"):
            closed.step(epoch)
        assert closed.last_epoch == chained.last_epoch == epoch
        assert closed.get_last_lr() == pytest.approx(chained.get_last_lr(), abs=1e-5, rel=0)


@pytest.mark.parametrize("name", ["step", "exponential", "constant", "linear"])
def test_lr_is_constant_for_constant_epoch(name):
    opt = two_groups()
    scheduler = CLOSED_FORMS[name](opt)
    lrs = []
    for _ in range(10):
        opt.step()
        with pytest.warns(UserWarning, match=r"The epoch parameter"):
            scheduler.step(2)
        lrs.append(opt.param_groups[0]["lr"])
    assert min(lrs) == max(lrs)


# -- composed schedulers (test_compound_*) -----------------------------------------------------

def times(single, factors):
    return [x * y for x, y in zip(single, factors)]


def linear_factors(start_factor, end_factor, iters, epochs):
    return [start_factor + i / iters * (end_factor - start_factor) if i < iters else end_factor
            for i in range(epochs)]


COMPOUNDS = {
    "step_and_multistep": (
        lambda opt: [StepLR(opt, gamma=0.1, step_size=3),
                     MultiStepLR(opt, gamma=0.1, milestones=[2, 5, 9])],
        [0.05] * 2 + [0.005] + [5e-4] * 2 + [5e-5] + [5e-6] * 3 + [5e-8]),
    "step_and_exp": (
        lambda opt: [StepLR(opt, gamma=0.1, step_size=3), ExponentialLR(opt, gamma=0.9)],
        [0.05 * 0.1 ** (x // 3) * 0.9 ** x for x in range(10)]),
    "exp_and_multistep": (
        lambda opt: [MultiStepLR(opt, gamma=0.1, milestones=[2, 5, 9]),
                     ExponentialLR(opt, gamma=0.9)],
        times([0.05] * 2 + [0.005] * 3 + [0.0005] * 4 + [0.00005], [0.9 ** x
                                                                    for x in range(10)])),
    "exp_and_linear": (
        lambda opt: [LinearLR(opt, start_factor=0.4, end_factor=0.9, total_iters=4),
                     ExponentialLR(opt, gamma=0.9)],
        times([0.05 * 0.9 ** x for x in range(10)], linear_factors(0.4, 0.9, 4, 10))),
    "step_and_constant": (
        lambda opt: [StepLR(opt, gamma=0.1, step_size=3),
                     ConstantLR(opt, factor=0.4, total_iters=4)],
        [0.05 * 0.4] * 3 + [0.005 * 0.4] + [0.005] * 2 + [0.0005] * 3 + [0.00005]),
    "linear_and_multistep": (
        lambda opt: [MultiStepLR(opt, gamma=0.1, milestones=[2, 5, 9]),
                     LinearLR(opt, start_factor=0.4, total_iters=4)],
        times([0.05] * 2 + [0.005] * 3 + [0.0005] * 4 + [0.00005],
              linear_factors(0.4, 1.0, 4, 10))),
    "cosanneal_and_step": (
        lambda opt: [CosineAnnealingLR(opt, T_max=10, eta_min=1e-10),
                     StepLR(opt, gamma=0.1, step_size=3)],
        [x * 0.1 ** (i // 3) for i, x in enumerate(cosine(10))]),
    "cosanneal_and_multistep": (
        lambda opt: [CosineAnnealingLR(opt, T_max=10, eta_min=1e-10),
                     MultiStepLR(opt, gamma=0.1, milestones=[2, 5, 9])],
        times(cosine(10), [1] * 2 + [0.1] * 3 + [0.01] * 4 + [0.001])),
    "cosanneal_and_linear": (
        lambda opt: [LinearLR(opt, start_factor=0.4, total_iters=4),
                     CosineAnnealingLR(opt, T_max=10, eta_min=1e-10)],
        times(cosine(10), linear_factors(0.4, 1.0, 4, 10))),
    "cosanneal_and_exp": (
        lambda opt: [CosineAnnealingLR(opt, T_max=10, eta_min=1e-10),
                     ExponentialLR(opt, gamma=0.1)],
        times(cosine(10), [0.1 ** i for i in range(10)])),
}


@pytest.mark.parametrize("name", COMPOUNDS)
def test_compound_schedulers(name):
    make, single = COMPOUNDS[name]
    opt = two_groups()
    check_lrs(opt, make(opt), scaled(single), 10)


# -- the step-order warnings (test_old_pattern_warning*, test_new_pattern_no_warning*) --------

def made_quietly(make):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scheduler = make()
    assert caught == [], "No warning should be raised"
    return scheduler


def resumable(opt):
    for group in opt.param_groups:
        group["initial_lr"] = 0.01
    return opt


@pytest.mark.parametrize("last_epoch", [-1, 10])
def test_old_pattern_warns(last_epoch):
    opt = resumable(two_groups())
    scheduler = made_quietly(lambda: StepLR(opt, gamma=0.1, step_size=3,
                                            last_epoch=last_epoch))
    with pytest.warns(UserWarning, match=HOW_TO) as caught:
        for _ in range(35):
            scheduler.step()
            opt.step()
    assert len(caught) == 1
    assert str(caught[0].message).startswith(
        "Detected call of `lr_scheduler.step()` before `optimizer.step()`.")
    assert caught[0].filename == __file__  # the warning points at the caller's line


def overridden(opt):
    """PyTorch's emulation of an optimiser whose step was replaced after the scheduler."""
    old_step = opt.step

    def new_step(o, *args, **kwargs):
        return old_step(*args, **kwargs)
    opt.step = types.MethodType(new_step, opt)


def test_old_pattern_with_overridden_optimizer_step_warns():
    opt = resumable(two_groups())
    scheduler = made_quietly(lambda: StepLR(opt, gamma=0.1, step_size=3, last_epoch=10))
    overridden(opt)
    with pytest.warns(UserWarning, match=HOW_TO):
        for _ in range(35):
            scheduler.step()
            opt.step()


def test_new_pattern_does_not_warn():
    opt = two_groups()
    scheduler = made_quietly(lambda: StepLR(opt, gamma=0.1, step_size=3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(35):
            opt.step()
            scheduler.step()
    assert caught == [], "No warning should be raised"


def test_new_pattern_with_overridden_optimizer_step_warns():
    opt = two_groups()
    scheduler = made_quietly(lambda: StepLR(opt, gamma=0.1, step_size=3))
    overridden(opt)
    with pytest.warns(UserWarning, match=r"`optimizer.step\(\)` has been overridden"):
        for _ in range(35):
            opt.step()
            scheduler.step()


def test_two_schedulers_share_one_wrapper_and_copies_of_the_optimizer_drop_it():
    opt = two_groups()
    StepLR(opt, step_size=3)
    wrapper = opt.step
    ExponentialLR(opt, gamma=0.5)
    assert opt.step is wrapper and wrapper._wrapped_by_lr_sched
    # A copied wrapper would step the original (it holds the optimiser): copies and pickles
    # of the optimiser take the class's step, as PyTorch's Optimizer.__getstate__.
    opt.step()
    assert opt._opt_called
    for other in (copy.deepcopy(opt), pickle.loads(pickle.dumps(opt))):
        assert "step" not in vars(other) and "_opt_called" not in vars(other)
        copied = other.param_groups[0]["params"][0]
        copied.grad = tp.ones(1, 1)
        other.step()
        assert copied.tolist() == [[pytest.approx(-0.05)]]
        assert opt.param_groups[0]["params"][0].tolist() == [[0.0]]


def test_get_lr_outside_step_warns():
    opt = two_groups()
    scheduler = StepLR(opt, step_size=3)
    with pytest.warns(UserWarning, match=r"please use `get_last_lr\(\)`"):
        assert scheduler.get_lr() == [0.05, 0.5]


# -- errors, checked before anything changes ---------------------------------------------------

def untouched(opt, lrs=(0.05, 0.5)):
    """No scheduler has set anything on opt: no initial_lr, no wrapped step, the lrs."""
    assert all("initial_lr" not in group for group in opt.param_groups)
    assert "step" not in vars(opt)
    assert [group["lr"] for group in opt.param_groups] == list(lrs)


def test_error_when_get_lr_has_an_argument():
    class Scheduler(LRScheduler):
        def get_lr(self, step):
            return [0.1]

    with pytest.raises(TypeError):
        Scheduler(optim.SGD([nn.Parameter(tp.ones(1))], lr=1.0))


@pytest.mark.parametrize("make, message", [
    (lambda opt: LinearLR(opt, start_factor=0.0, total_iters=4),
     r"Starting multiplicative factor expected to be greater than 0 and less or equal to 1\. "
     r"Got start_factor=0\.0\."),
    (lambda opt: LinearLR(opt, start_factor=1.1, total_iters=4), r"Got start_factor=1\.1"),
    (lambda opt: LinearLR(opt, end_factor=-0.1), r"Ending multiplicative factor expected to be "
                                                 r"between 0 and 1\. Got end_factor=-0\.1\."),
    (lambda opt: LinearLR(opt, start_factor=math.nan), r"Got start_factor=nan"),
    (lambda opt: ConstantLR(opt, factor=1.5), r"Constant multiplicative factor expected to be "
                                              r"between 0 and 1\. Got factor=1\.5\."),
    (lambda opt: LambdaLR(opt, [lambda e: 1.0]), r"Expected 2 lr_lambdas, but got 1"),
    (lambda opt: StepLR(opt, step_size=0), r"step_size must be from 1"),
    (lambda opt: CosineAnnealingLR(opt, T_max=0), r"T_max must be from 1"),
    (lambda opt: ExponentialLR(opt, gamma=0.9, last_epoch=-2), r"last_epoch must be from -1"),
])
def test_value_errors(make, message):
    opt = two_groups()
    with pytest.raises(ValueError, match=message):
        make(opt)
    untouched(opt)


class Unready(optim.SGD):
    """An optimiser subclass whose __init__() does not call SGD's."""

    def __init__(self):
        pass


@pytest.mark.parametrize("make, message", [
    (lambda opt: StepLR(object(), step_size=3), r"object is not an Optimizer \(optimizer must "
                                                r"be one of tensorplay.optim's optimisers"),
    (lambda opt: LambdaLR(opt, 0.95), r"lr_lambda must be a function of the epoch or a list"),
    (lambda opt: LambdaLR(opt, [lambda e: 1.0, 0.95]),
     r"lr_lambda\[1\] must be a function of the epoch, got float"),
    (lambda opt: LambdaLR(opt, [0.95]), r"lr_lambda\[0\] must be a function"),  # before count
    (lambda opt: StepLR(Unready(), 3), r"optimizer has no param_groups: the __init__\(\) of "
                                       r"Unready did not run"),
    (lambda opt: MultiStepLR(opt, milestones=3), r"milestones must be an iterable of ints"),
    (lambda opt: MultiStepLR(opt, milestones=[2, 4.5]),
     r"milestones must hold ints \(epoch indices\), got float"),
    (lambda opt: StepLR(opt, step_size=2.5), r"step_size must be an int, got float"),
    (lambda opt: ExponentialLR(opt, gamma="0.9"), r"gamma must be a float \(or an int\)"),
])
def test_type_errors(make, message):
    opt = two_groups()
    with pytest.raises(TypeError, match=message):
        make(opt)
    untouched(opt)


def test_resuming_needs_initial_lr():
    opt = optim.SGD([nn.Parameter(tp.ones(2, 2))], lr=0.1)
    with pytest.raises(KeyError, match=r"param 'initial_lr' is not specified in "
                                       r"param_groups\[0\] when resuming scheduler with "
                                       r"last_epoch >= 0"):
        StepLR(opt, step_size=3, gamma=0.1, last_epoch=1)
    untouched(opt, [0.1])


def test_a_refused_step_changes_nothing():
    opt = two_groups()
    scheduler = StepLR(opt, step_size=1, gamma=0.5)
    opt.step()
    with pytest.raises(TypeError, match=r"epoch must be None or an int, got str"):
        scheduler.step("3")
    with pytest.raises(ValueError, match=r"epoch must be from 0 to 2\*\*63 - 1, got -1"):
        scheduler.step(-1)
    assert (scheduler.last_epoch, scheduler._step_count) == (0, 1)

    class Failing(LRScheduler):
        def get_lr(self):
            if self.last_epoch == 2:
                raise RuntimeError("no lr for epoch 2")
            return [group["lr"] for group in self.optimizer.param_groups]

    failing = Failing(opt)
    failing.step()
    with pytest.raises(RuntimeError, match="no lr for epoch 2"):
        failing.step()
    assert (failing.last_epoch, failing._step_count) == (1, 2)
    assert not failing._get_lr_called_within_step
    # A group added since has no base lr: LambdaLR computes one lr too few.
    lambdas = LambdaLR(opt, lambda epoch: 0.5)
    opt.add_param_group({"params": [nn.Parameter(tp.zeros(1))], "lr": 1.0})
    with pytest.raises(ValueError, match=r"computed 2 learning rates for the optimizer's 3 "
                                         r"parameter groups"):
        lambdas.step()
    assert lambdas.last_epoch == 0
    assert [group["lr"] for group in opt.param_groups] == [0.025, 0.25, 1.0]


def test_the_next_eager_step_uses_the_scheduled_lr():
    param = nn.Parameter(tp.zeros(1))
    opt = optim.SGD([param], lr=1.0)
    scheduler = StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        param.grad = tp.ones(1)
        opt.step()
        scheduler.step()
    assert param.tolist() == [-(1.0 + 0.5 + 0.25)]


# -- state_dict() (test_*_state_dict, test_lambda_lr_state_dict_*, ...) -----------------------

STATE_PAIRS = {
    "step": (lambda opt: StepLR(opt, gamma=0.1, step_size=3),
             lambda opt: StepLR(opt, gamma=0.01 / 2, step_size=1)),
    "multi_step": (lambda opt: MultiStepLR(opt, gamma=0.1, milestones=[2, 5, 9]),
                   lambda opt: MultiStepLR(opt, gamma=0.01, milestones=[1, 4, 6])),
    "exponential": (lambda opt: ExponentialLR(opt, gamma=0.1),
                    lambda opt: ExponentialLR(opt, gamma=0.01)),
    "cosine": (lambda opt: CosineAnnealingLR(opt, T_max=10, eta_min=1e-10),
               lambda opt: CosineAnnealingLR(opt, T_max=5, eta_min=1e-10 / 2)),
    "constant": (lambda opt: ConstantLR(opt, factor=0.2, total_iters=3),
                 lambda opt: ConstantLR(opt, factor=0.9, total_iters=7)),
    "linear": (lambda opt: LinearLR(opt, start_factor=0.2, end_factor=0.8, total_iters=4),
               lambda opt: LinearLR(opt)),
}


@pytest.mark.parametrize("name", STATE_PAIRS)
def test_state_dict_round_trip(name):
    make, make_other = STATE_PAIRS[name]
    opt = two_groups()
    scheduler = make(opt)
    for _ in range(10):
        opt.step()
        scheduler.step()
    other = make_other(two_groups())
    other.load_state_dict(scheduler.state_dict())
    for key, value in vars(scheduler).items():
        if key != "optimizer":
            assert vars(other)[key] == value, key
    assert other.get_last_lr() == scheduler.get_last_lr()


class LambdaObject:
    """PyTorch's LambdaLRTestObject: a callable object, whose attributes state_dict() saves."""

    def __init__(self, value):
        self.value = value

    def __call__(self, epoch):
        return self.value * epoch

    def __eq__(self, other):
        return isinstance(other, type(self)) and vars(self) == vars(other)


def test_lambda_lr_state_dict_of_a_function():
    opt = two_groups()
    scheduler = LambdaLR(opt, lr_lambda=lambda x: x)
    state = scheduler.state_dict()
    assert state["lr_lambdas"] == [None, None]
    other = LambdaLR(opt, lr_lambda=lambda x: x)
    other.load_state_dict(state)
    assert "lr_lambdas" in state  # the argument is left as it was
    for key, value in vars(scheduler).items():
        if key not in ("optimizer", "lr_lambdas"):
            assert vars(other)[key] == value, key


def test_lambda_lr_state_dict_of_a_callable_object():
    opt = two_groups()
    scheduler = LambdaLR(opt, lr_lambda=LambdaObject(10))
    state = scheduler.state_dict()
    assert state["lr_lambdas"] == [{"value": 10}, {"value": 10}]
    other = LambdaLR(opt, lr_lambda=LambdaObject(-1))
    other.load_state_dict(state)
    for key, value in vars(scheduler).items():
        if key != "optimizer":
            assert vars(other)[key] == value, key
    assert LambdaLR(opt, abs).state_dict()["lr_lambdas"] == [None, None]  # no attributes
    with pytest.raises(ValueError, match=r"state_dict\['lr_lambdas'\] must be a list of one "
                                         r"entry per lr_lambda \(2\)"):
        other.load_state_dict({**state, "last_epoch": 7, "lr_lambdas": [None]})
    assert other.last_epoch == 0  # nothing was loaded


FACTORIES = [
    functools.partial(LambdaLR, lr_lambda=lambda e: e // 10),
    functools.partial(StepLR, step_size=30),
    functools.partial(MultiStepLR, milestones=[30, 80]),
    ConstantLR,
    LinearLR,
    functools.partial(ExponentialLR, gamma=0.9),
    functools.partial(CosineAnnealingLR, T_max=10),
]
FACTORY_IDS = ["LambdaLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR",
               "CosineAnnealingLR"]


@pytest.mark.parametrize("make", FACTORIES, ids=FACTORY_IDS)
def test_state_dict_saves_and_loads(make):
    opt = two_groups()
    state = make(opt).state_dict()
    loaded = pickle.loads(pickle.dumps(state))
    assert loaded == state
    other = make(opt)
    other.load_state_dict(loaded)
    assert other.state_dict() == state
    with pytest.raises(TypeError, match="state_dict must be a dict"):
        other.load_state_dict([("last_epoch", 3)])


@pytest.mark.parametrize("make", FACTORIES, ids=FACTORY_IDS)
def test_constant_initial_lr(make):
    opt = optim.SGD([nn.Parameter(tp.zeros(1))], lr=0.1)
    scheduler = make(opt)
    for epoch in range(2):
        opt.step()
        with pytest.warns(UserWarning, match="The epoch parameter"):
            scheduler.step(epoch)
        assert opt.param_groups[0]["initial_lr"] == 0.1
        assert scheduler.base_lrs == [0.1]


@pytest.mark.parametrize("make", FACTORIES, ids=FACTORY_IDS)
def test_resume_from_a_checkpoint(make):
    model = nn.Linear(3, 3)
    opt = optim.AdamW(model.parameters())
    scheduler = make(opt)
    opt.step()
    scheduler.step()
    resumed = optim.AdamW(model.parameters())
    resumed.load_state_dict(opt.state_dict())  # the groups carry "initial_lr"
    again = make(resumed, last_epoch=0)
    assert again.get_last_lr()[0] == pytest.approx(opt.param_groups[0]["lr"])
    assert again.base_lrs == scheduler.base_lrs


def test_cos_anneal_lr_continues():
    opt = two_groups()
    scheduler = CosineAnnealingLR(opt, T_max=5, eta_min=0.1)
    opt.step()
    scheduler.step()
    resumed = CosineAnnealingLR(opt, T_max=5, eta_min=0.1, last_epoch=0)
    assert resumed.get_last_lr() == pytest.approx(scheduler.get_last_lr(), rel=1e-4, abs=1e-5)


def test_no_cyclic_references():
    param = nn.Parameter(tp.zeros(10))
    opt = optim.SGD([param], lr=0.5)
    scheduler = LambdaLR(opt, lambda epoch: 1.0)
    del scheduler
    assert len(gc.get_referrers(opt)) == 0, "Optimizer should contain no cyclic references"
    gc.collect()
    del opt
    assert gc.collect() == 0, "Optimizer should be garbage-collected on __del__"


def test_no_cyclic_references_in_step():
    def run():
        param = nn.Parameter(tp.zeros(10))
        opt = optim.SGD([param], lr=0.5)
        scheduler = LambdaLR(opt, lambda epoch: 1.0)
        param.sum().backward()
        opt.step()
        scheduler.step()
        return weakref.ref(scheduler)

    gc.disable()  # so that only reference counting can free the scheduler
    try:
        assert run()() is None
    finally:
        gc.enable()


# -- against PyTorch ---------------------------------------------------------------------------

@pytest.fixture
def torch():
    return import_or_skip("torch")


LRS = [0.05, 0.5, 1.0]
# (name, arguments, keywords) of both libraries' classes; the lambdas are LambdaLR's, per group.
SCHEDULERS = [
    ("StepLR", (4,), {"gamma": 0.7}),
    ("MultiStepLR", ([3, 8, 8, 20, 5],), {"gamma": 0.3}),
    ("ConstantLR", (), {"factor": 0.25, "total_iters": 7}),
    ("ConstantLR", (), {}),
    ("LinearLR", (), {"start_factor": 0.1, "end_factor": 0.9, "total_iters": 11}),
    ("LinearLR", (), {}),
    ("ExponentialLR", (0.93,), {}),
    ("CosineAnnealingLR", (7,), {"eta_min": 0.001}),
    ("CosineAnnealingLR", (30,), {}),
    ("LambdaLR", ([lambda e: 0.97 ** e, lambda e: 1 / (e + 1), lambda e: e % 4],), {}),
]
SCHEDULER_IDS = [f"{name}{index}" for index, (name, _, _) in enumerate(SCHEDULERS)]


def pair_of_optimizers(torch):
    """Ours and PyTorch's SGD over three groups with the lrs of LRS."""
    ours = optim.SGD([{"params": [nn.Parameter(tp.zeros(2))], "lr": lr} for lr in LRS])
    theirs = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.zeros(2))], "lr": lr}
                              for lr in LRS])
    return ours, theirs


def pair_of_schedulers(torch, name, args, kwargs, **extra):
    ours, theirs = pair_of_optimizers(torch)
    from tensorplay.optim import lr_scheduler
    return (getattr(lr_scheduler, name)(ours, *args, **kwargs, **extra),
            getattr(torch.optim.lr_scheduler, name)(theirs, *args, **kwargs, **extra))


def step_both(mine, reference, epoch=None):
    for scheduler in (mine, reference):
        scheduler.optimizer.step()
        if epoch is None:
            scheduler.step()
        else:
            with pytest.warns(UserWarning, match="The epoch parameter"):
                scheduler.step(epoch)
    assert [group["lr"] for group in mine.optimizer.param_groups] == \
        [group["lr"] for group in reference.optimizer.param_groups]
    assert mine.get_last_lr() == reference.get_last_lr()
    assert mine.last_epoch == reference.last_epoch


def same_state(mine, reference):
    assert mine.state_dict() == reference.state_dict()
    assert list(mine.state_dict()) == list(reference.state_dict())


@pytest.mark.parametrize("name, args, kwargs", SCHEDULERS, ids=SCHEDULER_IDS)
def test_same_lrs_and_state_as_pytorch(torch, name, args, kwargs):
    mine, reference = pair_of_schedulers(torch, name, args, kwargs)
    same_state(mine, reference)
    assert mine.base_lrs == reference.base_lrs == LRS
    for _ in range(30):
        step_both(mine, reference)  # the same floats, to the last bit
    same_state(mine, reference)
    for epoch in (3, 12, 0, 29, 45):  # the closed forms (LambdaLR's get_lr)
        step_both(mine, reference, epoch)
    same_state(mine, reference)


@pytest.mark.parametrize("name, args, kwargs", SCHEDULERS, ids=SCHEDULER_IDS)
def test_resumes_as_pytorch(torch, name, args, kwargs):
    ours, theirs = pair_of_optimizers(torch)
    for groups in (ours.param_groups, theirs.param_groups):
        for group, lr in zip(groups, LRS):
            group["initial_lr"] = lr * 2
    from tensorplay.optim import lr_scheduler
    mine = getattr(lr_scheduler, name)(ours, *args, **kwargs, last_epoch=9)
    reference = getattr(torch.optim.lr_scheduler, name)(theirs, *args, **kwargs, last_epoch=9)
    same_state(mine, reference)
    for _ in range(20):
        step_both(mine, reference)


@pytest.mark.parametrize("name, args, kwargs", SCHEDULERS, ids=SCHEDULER_IDS)
def test_state_dict_loads_across_both(torch, name, args, kwargs):
    mine, reference = pair_of_schedulers(torch, name, args, kwargs)
    for _ in range(7):
        step_both(mine, reference)
    # PyTorch's state into a fresh scheduler of ours and the other way round, each over an
    # optimiser at the saved lrs (as the optimiser's own state_dict() restores them).
    ours, theirs = pair_of_schedulers(torch, name, args, kwargs)
    for loading, saved in ((ours, reference), (theirs, mine)):
        loading.load_state_dict(saved.state_dict())
        for group, lr in zip(loading.optimizer.param_groups, saved.get_last_lr()):
            group["lr"] = lr
    for _ in range(10):
        step_both(ours, reference)
        step_both(mine, theirs)


def test_composed_schedulers_as_pytorch(torch):
    ours, theirs = pair_of_optimizers(torch)
    from tensorplay.optim import lr_scheduler
    mine = [lr_scheduler.LinearLR(ours, start_factor=0.01, total_iters=5),
            lr_scheduler.CosineAnnealingLR(ours, T_max=12, eta_min=1e-4),
            lr_scheduler.MultiStepLR(ours, [10, 20], gamma=0.5)]
    reference = [torch.optim.lr_scheduler.LinearLR(theirs, start_factor=0.01, total_iters=5),
                 torch.optim.lr_scheduler.CosineAnnealingLR(theirs, T_max=12, eta_min=1e-4),
                 torch.optim.lr_scheduler.MultiStepLR(theirs, [10, 20], gamma=0.5)]
    for _ in range(30):
        ours.step()
        theirs.step()
        for scheduler in mine + reference:
            scheduler.step()
        assert [group["lr"] for group in ours.param_groups] == \
            [group["lr"] for group in theirs.param_groups]


@pytest.mark.parametrize("name, kwargs", [
    ("LinearLR", {"start_factor": 0.0}), ("LinearLR", {"start_factor": 1.5}),
    ("LinearLR", {"end_factor": 2.0}), ("ConstantLR", {"factor": -0.5}),
    ("LambdaLR", {"lr_lambda": [lambda e: 1.0] * 2}),
])
def test_errors_are_pytorchs(torch, name, kwargs):
    ours, theirs = pair_of_optimizers(torch)
    from tensorplay.optim import lr_scheduler
    same_error(lambda: getattr(lr_scheduler, name)(ours, **kwargs),
               lambda: getattr(torch.optim.lr_scheduler, name)(theirs, **kwargs))
    same_error(lambda: lr_scheduler.StepLR(object(), 3),
               lambda: torch.optim.lr_scheduler.StepLR(object(), 3))
    # PyTorch's KeyError goes on with advice of its own after this sentence.
    sentence = "\"param 'initial_lr' is not specified in param_groups[0] when resuming " \
               "scheduler with last_epoch >= 0"
    same_error(lambda: lr_scheduler.StepLR(ours, 3, last_epoch=2),
               lambda: torch.optim.lr_scheduler.StepLR(theirs, 3, last_epoch=2), len(sentence))


def test_warnings_are_pytorchs(torch):
    mine, reference = pair_of_schedulers(torch, "StepLR", (3,), {})
    messages = []
    for scheduler in (mine, reference):
        with pytest.warns(UserWarning) as caught:
            scheduler.step()  # before any optimizer.step()
            scheduler.optimizer.step()
            scheduler.step(4)
            scheduler.get_lr()
        messages.append([str(warning.message) for warning in caught])
    (order, epoch, get_lr), (their_order, their_epoch, their_get_lr) = messages
    sentence = "Detected call of `lr_scheduler.step()` before `optimizer.step()`."
    assert order.startswith(sentence) and their_order.startswith(sentence)
    assert their_epoch.startswith(epoch)  # PyTorch's goes on to ask for issues on its tracker
    assert get_lr == their_get_lr
