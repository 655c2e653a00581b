# cython: language_level=3
"""tensorplay.optim.lr_scheduler: learning-rate schedulers, as torch.optim.lr_scheduler.

See docs/design.md, "tensorplay.optim".

Note [Scheduler state]
A scheduler keeps PyTorch's attributes under PyTorch's names, set in PyTorch's order (the
class's own settings, then optimizer, base_lrs, last_epoch, _step_count, _is_initial,
_get_lr_called_within_step, _last_lr), all in the instance's __dict__. state_dict() is that
__dict__ without the optimizer, as PyTorch's, so a state saved by either library loads into
the other's. The lrs are the Python numbers of param_groups (tensorplay's optimisers take a
float lr, never a tensor), so none of PyTorch's cloning of tensor lrs is needed. A scheduler
only writes group["lr"]: the optimisers read it at every eager step, and a step captured into
a CUDA graph keeps the lr it was captured with (optim.pyx, Note [Capturable step]).

Note [Chainable and closed forms]
step() moves to the next epoch and asks get_lr() for each group's lr, computed from the
group's current lr (PyTorch's chainable form), so that several schedulers on one optimiser
compose: each scales what the others left. step(epoch), deprecated in PyTorch and here, jumps
to epoch and computes each lr from base_lrs with the class's _get_closed_form_lr() where it has
one. Both are PyTorch's arithmetic, operation for operation, so the lrs are the same floats.
A step that raises (a get_lr() of a subclass, a group added to the optimiser since) leaves
last_epoch, the step count and every lr as they were; PyTorch's advances its counters first.

Note [Counted optimiser steps]
PyTorch warns when the first scheduler.step() comes before any optimizer.step(): the scheduler
replaces the optimiser's step with a wrapper, an attribute of the optimiser instance, that
records each call (optimizer._opt_called) and calls the class's step(). tensorplay's optimisers
are Python classes whose instances take attributes, so the wrapping is PyTorch's: the wrapper
holds the optimiser weakly (the optimiser, which the scheduler holds, holds no cycle), and a
second scheduler on the optimiser finds it wrapped. When step is replaced after the scheduler
was made, the first scheduler.step() warns that it was overridden. A step captured into a
CUDA graph runs the wrapper once, at capture; replays run no Python and count nothing, so a
scheduler made after the capture warns at its first step however often the graph replayed.
OptimizerCore.__getstate__ (optim.pyx) leaves the wrapper out of copies and pickles, as
PyTorch's Optimizer.__getstate__ does: a copied wrapper would step the original optimiser.
"""
import bisect
import collections
import functools
import math
import numbers
import types
import warnings
import weakref

from tensorplay._runtime.base cimport errors
from tensorplay._runtime.autograd.optim import OptimizerCore

HOW_TO = "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate"
LAST_EPOCH = 2 ** 63 - 1  # the largest epoch, as the constructors' last_epoch (api.yaml)
# PyTorch's warnings, in its words where code or tests match them.
EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
    "possible. Please use `scheduler.step()` to step the scheduler. During the deprecation, if "
    "epoch is different from None, the closed form is used instead of the new chainable form, "
    "where available.")
STEP_ORDER_WARNING = (
    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. Call them in the "
    "opposite order, `optimizer.step()` before `lr_scheduler.step()` (PyTorch's order since "
    f"1.1.0); otherwise the first value of the learning rate schedule is skipped. See {HOW_TO}")
OVERRIDDEN_WARNING = (
    "Seems like `optimizer.step()` has been overridden after learning rate scheduler "
    "initialization, so its calls are not counted. Please make sure to call "
    f"`optimizer.step()` before `lr_scheduler.step()`. See {HOW_TO}")
GET_LR_WARNING = ("To get the last learning rate computed by the scheduler, please use "
                  "`get_last_lr()`.")


cdef int _check_optimizer(object optimizer) except -1:
    if not isinstance(optimizer, OptimizerCore):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer (optimizer must be "
                        "one of tensorplay.optim's optimisers, SGD, Adam, AdamW, RMSprop, "
                        "Adagrad, Adadelta, Rprop, ASGD, Adamax, NAdam or RAdam, or a subclass "
                        "of one)")
    if not isinstance(getattr(optimizer, "param_groups", None), list):
        # A subclass whose __init__() did not call its optimiser's.
        raise TypeError(f"optimizer has no param_groups: the __init__() of "
                        f"{type(optimizer).__name__} did not run")
    return 0


cdef int _check_factor(object value, str what, str argument, bint zero_allowed) except -1:
    """PyTorch's bounds of a multiplicative factor, (0, 1] or [0, 1], in its message; NaN is
    refused too (PyTorch's comparisons let it through)."""
    if not (0 <= value <= 1) or (value == 0 and not zero_allowed):
        raise ValueError(f"{what}. Got {argument}={errors.shown(value)}.")
    return 0


cdef list _lrs(object optimizer):
    return [group["lr"] for group in optimizer.param_groups]


cdef int _check_count(object scheduler, list values) except -1:
    count = len(scheduler.optimizer.param_groups)
    if len(values) != count:
        raise ValueError(f"the scheduler computed {len(values)} learning rates for the "
                         f"optimizer's {count} parameter groups (a group added after the "
                         "scheduler was made has no base lr)")
    return 0


cdef int _warn_outside_step(object scheduler) except -1:
    """PyTorch's warning for a built-in get_lr() called by anything but step()."""
    if not scheduler._get_lr_called_within_step:
        warnings.warn(GET_LR_WARNING, UserWarning)
    return 0


def _count_steps(optimizer):
    """Wrap optimizer.step so that each call sets optimizer._opt_called (Note [Counted
    optimiser steps]); a step wrapped already (by another scheduler) is kept."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    function = optimizer.step.__func__
    owner = weakref.ref(optimizer)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        stepped = owner()
        stepped._opt_called = True
        return function(stepped, *args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    optimizer.step = wrapper


class LRSchedulerCore:
    """torch.optim.lr_scheduler.LRScheduler: base_lrs, last_epoch, step(), state_dict(). A
    built-in subclass defines c_get_lr() (and _get_closed_form_lr() where PyTorch's has one);
    a user's subclass of the public class defines get_lr()."""

    # What the instance reads before its first step sets its own (Note [Scheduler state]).
    _get_lr_called_within_step = False
    _is_initial = False

    def init(self, optimizer, last_epoch):
        _check_optimizer(optimizer)
        self._start(optimizer, last_epoch)

    def _start(self, optimizer, last_epoch):
        """PyTorch's LRScheduler.__init__, after the subclass's settings: the initial lrs,
        the step counting, and the first step (to epoch last_epoch + 1)."""
        groups = optimizer.param_groups
        if last_epoch == -1:
            for group in groups:
                group.setdefault("initial_lr", group["lr"])  # kept from an earlier scheduler
        else:
            for number, group in enumerate(groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{number}] when "
                        f"resuming scheduler with last_epoch >= 0 (last_epoch={last_epoch}). "
                        "A scheduler made before sets it: load the optimizer's state_dict() "
                        "saved with its scheduler, or start with last_epoch=-1.")
        self.optimizer = optimizer
        self.base_lrs = [group["initial_lr"] for group in groups]
        self.last_epoch = last_epoch
        _count_steps(optimizer)
        self._initial_step()

    def _initial_step(self):
        """PyTorch's _initial_step: the step count from 0, and a step to the first epoch (which
        SequentialLR repeats on the scheduler it hands over to)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def c_step(self, epoch):
        if epoch is not None:
            if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral):
                raise TypeError(f"epoch must be None or an int, got {type(epoch).__name__} "
                                f"({errors.shown(epoch)})")
            if not 0 <= epoch <= LAST_EPOCH:
                raise ValueError(f"epoch must be from 0 to 2**63 - 1, got {errors.shown(epoch)}")
        # The warnings come before any change, so that one turned into an error changes nothing.
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(OVERRIDDEN_WARNING, UserWarning)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(STEP_ORDER_WARNING, UserWarning)
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning)
        count = self._step_count
        self._step_count += 1  # get_lr() reads it (CosineAnnealingLR's resumed first step)
        try:
            self._update_lr(epoch)
        except BaseException:
            self._step_count = count
            raise

    def _update_lr(self, epoch):
        """PyTorch's _update_lr: to the next epoch, or to epoch, and set each group's lr (what
        step() does after its warnings and count; SequentialLR calls it at a milestone). One
        that raises leaves last_epoch as it was."""
        last_epoch = self.last_epoch
        try:
            values = self._next_lrs(epoch)
        except BaseException:
            self.last_epoch = last_epoch
            raise
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = _lrs(self.optimizer)

    def _next_lrs(self, epoch):
        """The lrs of the next epoch (Note [Chainable and closed forms]), one per group."""
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed_form = getattr(self, "_get_closed_form_lr", None)
                values = self.get_lr() if closed_form is None else closed_form()
        finally:
            self._get_lr_called_within_step = False
        values = list(values)
        _check_count(self, values)
        return values

    def c_get_last_lr(self):
        return self._last_lr

    def c_get_lr(self):
        raise NotImplementedError(f"{type(self).__name__} defines no get_lr(): a subclass of "
                                  "LRScheduler returns the lr of each parameter group at "
                                  "last_epoch")

    def c_state_dict(self):
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def c_load_state_dict(self, state_dict):
        _check_state(state_dict)
        self.__dict__.update(state_dict)


cdef int _check_state(object state_dict) except -1:
    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict, as state_dict() returns, got "
                        f"{type(state_dict).__name__}")
    return 0


cdef list _functions_of_epoch(object optimizer, object lr_lambda):
    """LambdaLR's and MultiplicativeLR's lr_lambda, checked: one function per group."""
    count = len(optimizer.param_groups)
    if isinstance(lr_lambda, (list, tuple)):
        for index, function in enumerate(lr_lambda):
            if not callable(function):
                raise TypeError(f"lr_lambda[{index}] must be a function of the epoch, got "
                                f"{type(function).__name__} ({errors.shown(function)})")
        if len(lr_lambda) != count:
            raise ValueError(f"Expected {count} lr_lambdas, but got {len(lr_lambda)}")
        return list(lr_lambda)
    if callable(lr_lambda):
        return [lr_lambda] * count
    raise TypeError(f"lr_lambda must be a function of the epoch or a list of them, one per "
                    f"parameter group, got {type(lr_lambda).__name__} "
                    f"({errors.shown(lr_lambda)})")


class FunctionsOfEpochCore(LRSchedulerCore):
    """What LambdaLR and MultiplicativeLR share: a function of the epoch per group, and
    PyTorch's state_dict() of them."""

    def init(self, optimizer, lr_lambda, last_epoch):
        _check_optimizer(optimizer)
        self.lr_lambdas = _functions_of_epoch(optimizer, lr_lambda)
        self._start(optimizer, last_epoch)

    def c_state_dict(self):
        # PyTorch saves a callable object's attributes, and None for a function (its code
        # cannot be saved); a callable without attributes (a builtin) is saved as None too.
        state = {key: value for key, value in self.__dict__.items()
                 if key not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [
            None if isinstance(function, types.FunctionType) or not hasattr(function, "__dict__")
            else function.__dict__.copy() for function in self.lr_lambdas]
        return state

    def c_load_state_dict(self, state_dict):
        _check_state(state_dict)
        if "lr_lambdas" not in state_dict:
            raise KeyError(f"state_dict has no 'lr_lambdas'; a {type(self).__name__}'s "
                           "state_dict() holds them")
        saved = state_dict["lr_lambdas"]
        if not isinstance(saved, (list, tuple)) or len(saved) != len(self.lr_lambdas):
            raise ValueError(f"state_dict['lr_lambdas'] must be a list of one entry per "
                             f"lr_lambda ({len(self.lr_lambdas)}), got {errors.shown(saved)}")
        self.__dict__.update({key: value for key, value in state_dict.items()
                              if key != "lr_lambdas"})
        for function, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                function.__dict__.update(attributes)


class LambdaLRCore(FunctionsOfEpochCore):
    """LambdaLR: each group's base lr times its function of the epoch."""

    def c_get_lr(self):
        _warn_outside_step(self)
        return [base_lr * function(self.last_epoch)
                for function, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLRCore(FunctionsOfEpochCore):
    """MultiplicativeLR: each group's lr times its function of the epoch, at every step but
    the first."""

    def c_get_lr(self):
        _warn_outside_step(self)
        if self._is_initial:
            return _lrs(self.optimizer)
        return [group["lr"] * function(self.last_epoch)
                for function, group in zip(self.lr_lambdas, self.optimizer.param_groups)]


class StepLRCore(LRSchedulerCore):
    """StepLR: the lr times gamma every step_size epochs."""

    def init(self, optimizer, step_size, gamma, last_epoch):
        _check_optimizer(optimizer)
        self.step_size = step_size
        self.gamma = gamma
        self._start(optimizer, last_epoch)

    def c_get_lr(self):
        _warn_outside_step(self)
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _lrs(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]


cdef object _milestones(object milestones):
    """milestones as PyTorch keeps them: a Counter of epoch indices (a repeated one decays
    once per repetition)."""
    try:
        values = list(milestones)
    except TypeError:
        raise TypeError(f"milestones must be an iterable of ints (epoch indices), got "
                        f"{errors.shown(milestones)}") from None
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"milestones must hold ints (epoch indices), got "
                            f"{type(value).__name__} ({errors.shown(value)})")
    return collections.Counter(values)


class MultiStepLRCore(LRSchedulerCore):
    """MultiStepLR: the lr times gamma at each milestone."""

    def init(self, optimizer, milestones, gamma, last_epoch):
        _check_optimizer(optimizer)
        self.milestones = _milestones(milestones)
        self.gamma = gamma
        self._start(optimizer, last_epoch)

    def c_get_lr(self):
        _warn_outside_step(self)
        if self.last_epoch not in self.milestones:
            return _lrs(self.optimizer)
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch]
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        passed = bisect.bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [base_lr * self.gamma ** passed for base_lr in self.base_lrs]


class ConstantLRCore(LRSchedulerCore):
    """ConstantLR: the lr times factor until epoch total_iters."""

    def init(self, optimizer, factor, total_iters, last_epoch):
        _check_optimizer(optimizer)
        _check_factor(factor, "Constant multiplicative factor expected to be between 0 and 1",
                      "factor", True)
        self.factor = factor
        self.total_iters = total_iters
        self._start(optimizer, last_epoch)

    def c_get_lr(self):
        _warn_outside_step(self)
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _lrs(self.optimizer)
        # PyTorch's: a factor of 0 divides by zero here.
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.factor + (self.last_epoch >= self.total_iters)
                           * (1 - self.factor)) for base_lr in self.base_lrs]


class LinearLRCore(LRSchedulerCore):
    """LinearLR: the lr times a factor moving linearly from start_factor to end_factor over
    total_iters epochs."""

    def init(self, optimizer, start_factor, end_factor, total_iters, last_epoch):
        _check_optimizer(optimizer)
        _check_factor(start_factor, "Starting multiplicative factor expected to be greater "
                      "than 0 and less or equal to 1", "start_factor", False)
        _check_factor(end_factor, "Ending multiplicative factor expected to be between 0 and 1",
                      "end_factor", True)
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        self._start(optimizer, last_epoch)

    def c_get_lr(self):
        _warn_outside_step(self)
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _lrs(self.optimizer)
        # The ratio of this epoch's factor to the last one's.
        change = self.end_factor - self.start_factor
        return [group["lr"] * (1.0 + change / (self.total_iters * self.start_factor
                                               + (self.last_epoch - 1) * change))
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        reached = min(self.total_iters, self.last_epoch)
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor) * reached
                           / self.total_iters) for base_lr in self.base_lrs]


class ExponentialLRCore(LRSchedulerCore):
    """ExponentialLR: the lr times gamma every epoch."""

    def init(self, optimizer, gamma, last_epoch):
        _check_optimizer(optimizer)
        self.gamma = gamma
        self._start(optimizer, last_epoch)

    def c_get_lr(self):
        _warn_outside_step(self)
        if self._is_initial:  # a resumed scheduler's first step keeps the lr it resumes with
            return _lrs(self.optimizer)
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class CosineAnnealingLRCore(LRSchedulerCore):
    """CosineAnnealingLR: the lr on a cosine from base_lr down to eta_min over T_max epochs
    (and back up over the next T_max, and so on)."""

    def init(self, optimizer, T_max, eta_min, last_epoch):
        _check_optimizer(optimizer)
        self.T_max = T_max
        self.eta_min = eta_min
        self._start(optimizer, last_epoch)

    def c_get_lr(self):
        _warn_outside_step(self)
        groups = self.optimizer.param_groups
        if self._is_initial:
            return _lrs(self.optimizer)
        if self._step_count == 1 and self.last_epoch > 0:
            # The first step of a scheduler resumed by last_epoch: PyTorch's closed form, with
            # its order of operations (epoch * pi, where the others take pi * epoch).
            return [self.eta_min + (base_lr - self.eta_min)
                    * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                    for base_lr in self.base_lrs]
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            # The last epoch was the bottom (eta_min): the ratio below would divide by
            # 1 + cos(pi) = 0.
            return [group["lr"] + (base_lr - self.eta_min)
                    * (1 - math.cos(math.pi / self.T_max)) / 2
                    for base_lr, group in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / self.T_max))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
                * (group["lr"] - self.eta_min) + self.eta_min for group in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class PolynomialLRCore(LRSchedulerCore):
    """PolynomialLR: the lr times (1 - epoch / total_iters) ** power, down to 0 at
    total_iters."""

    def init(self, optimizer, total_iters, power, last_epoch):
        _check_optimizer(optimizer)
        self.total_iters = total_iters
        self.power = power
        self._start(optimizer, last_epoch)

    def c_get_lr(self):
        _warn_outside_step(self)
        if self._is_initial or self.last_epoch > self.total_iters:
            return _lrs(self.optimizer)
        # The ratio of this epoch's factor to the last one's, in PyTorch's operations.
        decay = ((1.0 - self.last_epoch / self.total_iters)
                 / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [group["lr"] * decay for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base_lr in self.base_lrs]


class CosineAnnealingWarmRestartsCore(LRSchedulerCore):
    """CosineAnnealingWarmRestarts: the cosine of CosineAnnealingLR over T_cur epochs of a
    period T_i, restarting at base_lr when T_cur reaches T_i (T_i times T_mult each restart).

    Its step() is PyTorch's own: it takes fractional epochs (step(epoch + batch / batches)
    within an epoch), neither warns nor counts steps, and computes every lr from base_lrs."""

    def init(self, optimizer, T_0, T_mult, eta_min, last_epoch):
        _check_optimizer(optimizer)
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        self._start(optimizer, last_epoch)

    def c_step(self, epoch):
        if epoch is not None:
            if isinstance(epoch, bool) or not isinstance(epoch, (numbers.Integral, float)):
                raise TypeError(f"epoch must be None or a number (an int or a float, a fraction "
                                f"of an epoch), got {type(epoch).__name__} "
                                f"({errors.shown(epoch)})")
            if not 0 <= epoch <= LAST_EPOCH:  # NaN too
                raise ValueError(f"Expected non-negative epoch, but got {errors.shown(epoch)} "
                                 "(epoch must be from 0 to 2**63 - 1)")
        before = (self.T_cur, self.T_i, self.last_epoch)
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:  # PyTorch's: one period ends at most per step
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                # The number of restarts before epoch: periods T_0, T_0 * T_mult, ...
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult ** n
        else:
            self.T_i = self.T_0
            self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._get_lr_called_within_step = True
        try:
            values = list(self.get_lr())
            _check_count(self, values)
        except BaseException:
            self.T_cur, self.T_i, self.last_epoch = before
            raise
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = _lrs(self.optimizer)

    def c_get_lr(self):
        _warn_outside_step(self)
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for base_lr in self.base_lrs]


# -- Schedulers of schedulers ------------------------------------------------------------------

cdef list _scheduler_types(object schedulers, str owner):
    """SequentialLR's and ChainedScheduler's schedulers, their types: a list or tuple of this
    module's schedulers."""
    if not isinstance(schedulers, (list, tuple)):
        raise TypeError(f"schedulers must be a list of schedulers (of "
                        f"tensorplay.optim.lr_scheduler), got {type(schedulers).__name__} "
                        f"({errors.shown(schedulers)})")
    for index, scheduler in enumerate(schedulers):
        if not isinstance(scheduler, LRSchedulerCore):
            raise TypeError(f"{owner} at index {index} should be a scheduler: schedulers[{index}] "
                            f"must be one of tensorplay.optim.lr_scheduler's, got "
                            f"{type(scheduler).__name__}")
        if not hasattr(scheduler, "optimizer"):  # PyTorch's words: its __init__() did not run
            raise TypeError(f"{owner} at index {index} should have `optimizer` as its "
                            "attribute.")
    return list(schedulers)


cdef int _scheduler_values(list schedulers, object optimizer, str owner) except -1:
    """Their values, in PyTorch's words: at least one, none a ReduceLROnPlateau (which needs a
    metric at each step), all of optimizer."""
    if not schedulers:
        chained = " to be chained" if owner == "ChainedScheduler" else ""
        raise ValueError(f"{owner} expects at least one scheduler{chained}, but got no "
                         "scheduler.")
    for index, scheduler in enumerate(schedulers):
        if isinstance(scheduler, ReduceLROnPlateauCore):
            raise ValueError(f"{owner} does not support `ReduceLROnPlateau` scheduler as it "
                             "requires additional kwargs to be specified when calling `step`, "
                             f"but got one at index {index} in the given schedulers sequence.")
        if getattr(scheduler, "optimizer", None) is not optimizer:
            raise ValueError(f"{owner} expects all schedulers to belong to the same optimizer, "
                             f"but got scheduler {type(scheduler).__name__} at index {index} "
                             "with another optimizer")
    return 0


cdef dict _state_with_schedulers(object scheduler):
    """The state_dict() of SequentialLR and ChainedScheduler: their own attributes, and each
    scheduler's state_dict() in "_schedulers", as PyTorch's."""
    state = {key: value for key, value in scheduler.__dict__.items()
             if key not in ("optimizer", "_schedulers")}
    state["_schedulers"] = [inner.state_dict() for inner in scheduler._schedulers]
    return state


cdef int _load_with_schedulers(object scheduler, object state_dict) except -1:
    _check_state(state_dict)
    saved = state_dict.get("_schedulers")
    if not isinstance(saved, (list, tuple)) or len(saved) != len(scheduler._schedulers):
        raise ValueError(f"state_dict['_schedulers'] must be a list of one state_dict() per "
                         f"scheduler ({len(scheduler._schedulers)}), got {errors.shown(saved)}")
    for index, inner in enumerate(saved):
        if not isinstance(inner, dict):
            raise TypeError(f"state_dict['_schedulers'][{index}] must be a dict, as "
                            f"state_dict() returns, got {type(inner).__name__}")
    scheduler.__dict__.update({key: value for key, value in state_dict.items()
                               if key != "_schedulers"})
    for inner, state in zip(scheduler._schedulers, saved):
        inner.load_state_dict(state)
    return 0


cdef int _undo_last_epoch(object scheduler) except -1:
    """PyTorch's recursive_undo: one epoch back for scheduler and, through SequentialLR and
    ChainedScheduler, every scheduler inside it, undoing the step each made when it was made."""
    inner = scheduler.__dict__.get("_schedulers")
    if inner is not None:
        for each in inner:
            _undo_last_epoch(each)
    elif hasattr(scheduler, "last_epoch"):
        scheduler.last_epoch -= 1
    return 0


class SequentialLRCore(LRSchedulerCore):
    """SequentialLR: schedulers in turn, each from its milestone on. Its attributes and
    state are PyTorch's: it has no base_lrs and no step count of its own."""

    def init(self, optimizer, schedulers, milestones, last_epoch):
        owner = "SequentialLR"
        _check_optimizer(optimizer)  # the types, then the values
        schedulers = _scheduler_types(schedulers, owner)
        if isinstance(milestones, (str, bytes)) or not isinstance(milestones, (list, tuple)):
            raise TypeError(f"milestones must be a list of ints (the epochs at which the next "
                            f"scheduler takes over), got {errors.shown(milestones)}")
        for value in milestones:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"milestones must hold ints (epoch indices), got "
                                f"{type(value).__name__} ({errors.shown(value)})")
        for value in milestones:
            if not 0 <= value <= LAST_EPOCH:
                raise ValueError(f"milestones must hold epochs from 0 to 2**63 - 1, got "
                                 f"{errors.shown(value)}")
        if list(milestones) != sorted(milestones):
            raise ValueError(f"milestones must not decrease (each is the epoch at which the "
                             f"next scheduler takes over), got {errors.shown(milestones)}")
        _scheduler_values(schedulers, optimizer, owner)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be "
                             "one more than the number of milestone points, but got number of "
                             f"schedulers {len(schedulers)} and the number of milestones to be "
                             f"equal to {len(milestones)}")
        for number, group in enumerate(optimizer.param_groups):
            if "initial_lr" not in group:
                raise KeyError(f"param 'initial_lr' is not specified in param_groups[{number}]: "
                               "the schedulers SequentialLR runs set it when they are made, "
                               "so make them for this optimizer first")
        # PyTorch's: every scheduler back to the start, then the first one's first step again.
        self._schedulers = schedulers
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        _undo_last_epoch(self)
        first = self._schedulers[bisect.bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def c_step(self):
        # The scheduler of the next epoch steps; at its milestone it starts from its epoch 0,
        # PyTorch's _update_lr(0): no warning and no step count.
        index = bisect.bisect_right(self._milestones, self.last_epoch + 1)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch + 1:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self.last_epoch += 1
        self._last_lr = scheduler.get_last_lr()

    def c_state_dict(self):
        return _state_with_schedulers(self)

    def c_load_state_dict(self, state_dict):
        _load_with_schedulers(self, state_dict)


class ChainedSchedulerCore(LRSchedulerCore):
    """ChainedScheduler: every scheduler steps at each step, in order, each scaling what the
    ones before it left (PyTorch's chainable forms)."""

    def init(self, schedulers, optimizer):
        owner = "ChainedScheduler"
        schedulers = _scheduler_types(schedulers, owner)  # the types, then the values
        if optimizer is not None:
            _check_optimizer(optimizer)
        elif schedulers:
            optimizer = schedulers[0].optimizer
        _scheduler_values(schedulers, optimizer, owner)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = _lrs(optimizer)

    def c_step(self):
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _lrs(self.optimizer)

    def c_state_dict(self):
        return _state_with_schedulers(self)

    def c_load_state_dict(self, state_dict):
        _load_with_schedulers(self, state_dict)


# -- Schedulers of a metric, and of cycles -----------------------------------------------------

cdef int _check_numbers(object value, str name) except -1:
    """The type of a per-group setting: one real number, or a list or tuple of them."""
    listed = isinstance(value, (list, tuple))
    for index, each in enumerate(value if listed else [value]):
        if isinstance(each, bool) or not isinstance(each, numbers.Real):
            where = f"{name}[{index}]" if listed else name
            raise TypeError(f"{where} must be a float (or an int), got {type(each).__name__} "
                            f"({errors.shown(each)}); {name} is one number for every parameter "
                            "group, or a list of one per group")
    return 0


cdef list _per_group(object value, str name, object optimizer):
    """The values of a per-group setting (its type checked), as PyTorch's _format_param: one
    per group, each within a float's range; the numbers as given."""
    count = len(optimizer.param_groups)
    values = list(value) if isinstance(value, (list, tuple)) else [value] * count
    if len(values) != count:
        raise ValueError(f"{name} must have the same length as optimizer.param_groups. {name} "
                         f"has {len(values)} values, param_groups has {count}.")
    for each in values:
        try:
            float(each)
        except OverflowError:
            raise ValueError(f"{name} {errors.shown(each)} is too large for a float") from None
    return values


cdef int _check_optional_count(object value, str name) except -1:
    """The type of a count that may be None."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
        raise TypeError(f"{name} must be None or an int, got {type(value).__name__} "
                        f"({errors.shown(value)})")
    return 0


cdef str _said(object text):
    """A str argument as PyTorch's messages show it (bare), cut short where it is long."""
    return text if len(text) <= 200 else errors.shown(text)


cdef bint _uses_beta1(object optimizer, str owner) except -1:
    """Whether the momentum a cycling scheduler sets is betas[0] (Adam's, AdamW's) rather
    than "momentum" (SGD's, RMSprop's); PyTorch's refusal for an optimiser with neither."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` "
                         f"option enabled ({owner}: {type(optimizer).__name__} has neither "
                         "'momentum' nor 'betas'; pass cycle_momentum=False)")
    return "betas" in optimizer.defaults


cdef int _set_momentum(object group, object momentum, bint beta1) except -1:
    if beta1:
        group["betas"] = (momentum, *group["betas"][1:])
    else:
        group["momentum"] = momentum
    return 0


cdef int _start_momentums(object optimizer, list max_momentums, list base_momentums,
                          bint beta1) except -1:
    """A cycling scheduler's momentum at epoch 0: each group's max_momentum, with both bounds
    kept in the group, as PyTorch's."""
    for top, bottom, group in zip(max_momentums, base_momentums, optimizer.param_groups):
        _set_momentum(group, top, beta1)
        group["max_momentum"] = top
        group["base_momentum"] = bottom
    return 0


cdef int _check_resumable(object optimizer, tuple keys, str owner) except -1:
    """A scheduler resumed (last_epoch >= 0) reads these keys of each group, which it stored
    when it was first made (the optimiser's state_dict() keeps them)."""
    for number, group in enumerate(optimizer.param_groups):
        for key in keys:
            if key not in group:
                raise KeyError(f"param '{key}' is not specified in param_groups[{number}] when "
                               f"resuming {owner} with last_epoch >= 0: the {owner} first made "
                               "for this optimizer sets it; load the optimizer's state_dict() "
                               "saved with it, or start with last_epoch=-1")
    return 0


class ReduceLROnPlateauCore(LRSchedulerCore):
    """ReduceLROnPlateau: each group's lr times factor once the metric given to step() has
    not improved for more than patience epochs. As PyTorch's, it is made without a first step
    and without base_lrs, and does not wrap the optimiser's step."""

    def init(self, optimizer, mode, factor, patience, threshold, threshold_mode, cooldown,
             min_lr, eps):
        _check_optimizer(optimizer)  # the types, then the values
        _check_numbers(min_lr, "min_lr")
        if factor >= 1.0:
            raise ValueError(f"Factor should be < 1.0. Got factor={errors.shown(factor)}.")
        if not factor >= 0:  # NaN too
            raise ValueError(f"factor must be from 0 to below 1 (each reduction multiplies the "
                             f"lr by it), got {errors.shown(factor)}")
        _check_modes(mode, threshold_mode)
        per_group = isinstance(min_lr, (list, tuple))
        count = len(optimizer.param_groups)
        if per_group and len(min_lr) != count:  # PyTorch's words for this one
            raise ValueError(f"expected {count} min_lrs, got {len(min_lr)}")
        min_lrs = _per_group(min_lr, "min_lr", optimizer)
        # A single min_lr also serves groups added later, as PyTorch's.
        default_min_lr = None if per_group else min_lr
        # PyTorch's attributes, in its order (Note [Scheduler state]).
        self.factor = factor
        self.optimizer = optimizer
        self.default_min_lr = default_min_lr
        self.min_lrs = min_lrs
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _lrs(optimizer)
        self._init_is_better(mode, threshold, threshold_mode)
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def _init_is_better(self, mode, threshold, threshold_mode):
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def _is_better(self, a, best):
        # PyTorch's comparisons, operation for operation.
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def c_in_cooldown(self):
        return self.cooldown_counter > 0

    def c_step(self, metrics, epoch):
        try:
            current = float(metrics)
        except (TypeError, ValueError) as error:
            raise TypeError(f"metrics must be a number (or a one-element tensor), the value "
                            f"whose plateau lowers the lr, got {type(metrics).__name__} "
                            f"({errors.shown(metrics)})") from error
        if epoch is not None:
            if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral):
                raise TypeError(f"epoch must be None or an int, got {type(epoch).__name__} "
                                f"({errors.shown(epoch)})")
            if not 0 <= epoch <= LAST_EPOCH:
                raise ValueError(f"epoch must be from 0 to 2**63 - 1, got {errors.shown(epoch)}")
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning)
        # PyTorch's step, computed before anything changes, so that a refused reduction
        # (a group added without a min_lr) leaves the scheduler as it was.
        best, bad, cooling = self.best, self.num_bad_epochs, self.cooldown_counter
        if self._is_better(current, best):
            best, bad = current, 0
        else:
            bad += 1
        if cooling > 0:
            cooling -= 1
            bad = 0
        reduced = None
        if bad > self.patience:
            reduced = self._reduced_lrs()
            cooling, bad = self.cooldown, 0
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        self.best, self.num_bad_epochs, self.cooldown_counter = best, bad, cooling
        if reduced is not None:
            min_lrs, lrs = reduced
            self.min_lrs = min_lrs
            for group, lr in zip(self.optimizer.param_groups, lrs):
                if lr is not None:
                    group["lr"] = lr
        self._last_lr = _lrs(self.optimizer)

    def _reduced_lrs(self):
        """(min_lrs, each group's reduced lr or None where the change would be below eps)."""
        groups = self.optimizer.param_groups
        min_lrs = self.min_lrs
        if len(groups) != len(min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` ({len(groups)}) differs "
                    f"from when `ReduceLROnPlateau` was initialized ({len(min_lrs)}), usually "
                    "due to a new param group being added to the optimizer. Please modify the "
                    "`min_lrs` field to match the length of the `optimizer` param groups.")
            min_lrs = [self.default_min_lr] * len(groups)
        lrs = []
        for group, lowest in zip(groups, min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, lowest)
            lrs.append(new_lr if old_lr - new_lr > self.eps else None)
        return min_lrs, lrs

    def c_load_state_dict(self, state_dict):
        _check_state(state_dict)
        _check_modes(state_dict.get("mode", self.mode),
                     state_dict.get("threshold_mode", self.threshold_mode))
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


cdef int _check_modes(object mode, object threshold_mode) except -1:
    if mode not in ("min", "max"):
        raise ValueError(f"mode {_said(str(mode))} is unknown! (mode must be 'min', for a "
                         "metric that should fall, or 'max')")
    if threshold_mode not in ("rel", "abs"):
        raise ValueError(f"threshold mode {_said(str(threshold_mode))} is unknown! "
                         "(threshold_mode must be 'rel' or 'abs')")
    return 0


CYCLIC_MODES = ("triangular", "triangular2", "exp_range")


class CyclicLRCore(LRSchedulerCore):
    """CyclicLR: each group's lr between base_lr and max_lr along triangles of
    step_size_up + step_size_down iterations (Smith, 2017), the momentum the other way."""

    def init(self, optimizer, base_lr, max_lr, step_size_up, step_size_down, mode, gamma,
             scale_fn, scale_mode, cycle_momentum, base_momentum, max_momentum, last_epoch):
        _check_optimizer(optimizer)  # the types, then the values
        _check_numbers(base_lr, "base_lr")
        _check_numbers(max_lr, "max_lr")
        _check_optional_count(step_size_down, "step_size_down")
        if scale_fn is not None and not callable(scale_fn):
            raise TypeError(f"scale_fn must be None or a function of the cycle or iteration, "
                            f"got {type(scale_fn).__name__} ({errors.shown(scale_fn)})")
        _check_numbers(base_momentum, "base_momentum")
        _check_numbers(max_momentum, "max_momentum")
        base_lrs = _per_group(base_lr, "base_lr", optimizer)
        max_lrs = _per_group(max_lr, "max_lr", optimizer)
        if step_size_down is not None and not 0 <= step_size_down <= LAST_EPOCH:
            raise ValueError(f"step_size_down must be from 0 to 2**63 - 1, got "
                             f"{errors.shown(step_size_down)}")
        if scale_fn is None and mode not in CYCLIC_MODES:
            raise ValueError(f"mode is invalid and scale_fn is None (mode must be one of "
                             f"{', '.join(map(repr, CYCLIC_MODES))}, got {_said(repr(mode))})")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"scale_mode must be 'cycle' or 'iterations', got "
                             f"{_said(repr(scale_mode))}")
        beta1 = False
        if cycle_momentum:
            base_momentums = _per_group(base_momentum, "base_momentum", optimizer)
            max_momentums = _per_group(max_momentum, "max_momentum", optimizer)
            beta1 = _uses_beta1(optimizer, "CyclicLR")
        if last_epoch != -1:
            _check_resumable(optimizer, ("initial_lr",), "CyclicLR")
        # Checked: PyTorch's changes and attributes, in its order (Note [Scheduler state]).
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        up = float(step_size_up)
        down = up if step_size_down is None else float(step_size_down)
        self.optimizer = optimizer
        self.max_lrs = max_lrs
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_mode()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = beta1
            self.base_momentums = base_momentums
            self.max_momentums = max_momentums
            if last_epoch == -1:
                _start_momentums(optimizer, max_momentums, base_momentums, beta1)
        self._start(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_mode(self):
        # PyTorch's _init_scale_fn: a built-in mode fixes what its function is of.
        if self._scale_fn_custom is None:
            self.scale_mode = "iterations" if self.mode == "exp_range" else "cycle"

    def c_scale_fn(self, x):
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def c_get_lr(self):
        _warn_outside_step(self)
        # PyTorch's arithmetic: the cycle (from 1), the place x in it, and the height there.
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [base_lr + (max_lr - base_lr) * scale_factor * self.scale_fn(at)
               for base_lr, max_lr in zip(self.base_lrs, self.max_lrs)]
        _check_count(self, lrs)
        if self.cycle_momentum:
            momentums = [max_momentum - (max_momentum - base_momentum) * scale_factor
                         * self.scale_fn(at)
                         for base_momentum, max_momentum in zip(self.base_momentums,
                                                                self.max_momentums)]
            for group, momentum in zip(self.optimizer.param_groups, momentums):
                _set_momentum(group, momentum, self.use_beta1)
        return lrs

    def c_state_dict(self):
        # PyTorch's: the custom function last, as a copy of its attributes (None for a
        # function, whose code cannot be saved).
        state = {key: value for key, value in self.__dict__.items()
                 if key not in ("optimizer", "_scale_fn_custom")}
        function = self._scale_fn_custom
        state["_scale_fn_custom"] = (
            None if function is None or isinstance(function, types.FunctionType)
            or not hasattr(function, "__dict__") else function.__dict__.copy())
        return state

    def c_load_state_dict(self, state_dict):
        _check_state(state_dict)
        saved = state_dict.get("_scale_fn_custom")
        if saved is not None and not isinstance(saved, dict):
            raise TypeError(f"state_dict['_scale_fn_custom'] must be None or a dict of the "
                            f"function's attributes, got {type(saved).__name__}")
        if saved is not None and self._scale_fn_custom is None:
            raise ValueError("state_dict holds the attributes of a custom scale_fn, and this "
                             "CyclicLR has none to load them into")
        self.__dict__.update({key: value for key, value in state_dict.items()
                              if key != "_scale_fn_custom"})
        if saved is not None:
            self._scale_fn_custom.__dict__.update(saved)
        self._init_scale_mode()


class OneCycleLRCore(LRSchedulerCore):
    """OneCycleLR: the 1cycle policy (Smith and Topin, 2017) over total_steps steps: the lr
    from max_lr / div_factor up to max_lr, then down to far below the start, the momentum the
    other way; with three_phase, back down to the start before the final descent."""

    def init(self, optimizer, max_lr, total_steps, epochs, steps_per_epoch, pct_start,
             anneal_strategy, cycle_momentum, base_momentum, max_momentum, div_factor,
             final_div_factor, three_phase, last_epoch):
        _check_optimizer(optimizer)  # the types, then each argument's value, then together
        _check_numbers(max_lr, "max_lr")
        counts = (("total_steps", total_steps), ("epochs", epochs),
                  ("steps_per_epoch", steps_per_epoch))
        for name, value in counts:
            _check_optional_count(value, name)
        _check_numbers(base_momentum, "base_momentum")
        _check_numbers(max_momentum, "max_momentum")
        max_lrs = _per_group(max_lr, "max_lr", optimizer)
        for name, value in counts:
            if value is not None and value <= 0:  # PyTorch's words
                raise ValueError(f"Expected positive integer {name}, but got {value}")
            if value is not None and value > LAST_EPOCH:
                raise ValueError(f"{name} must be at most 2**63 - 1, got {errors.shown(value)}")
        if not 0 <= pct_start <= 1:  # NaN too
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got "
                             f"{errors.shown(pct_start)}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{_said(anneal_strategy)}")
        if cycle_momentum:
            max_momentums = _per_group(max_momentum, "max_momentum", optimizer)
            base_momentums = _per_group(base_momentum, "base_momentum", optimizer)
        for name, value in (("div_factor", div_factor), ("final_div_factor", final_div_factor)):
            if value == 0:
                raise ValueError(f"{name} must not be 0: the schedule divides max_lr by it")
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("You must define either total_steps OR (epochs AND "
                                 "steps_per_epoch)")
            total_steps = epochs * steps_per_epoch
            if total_steps > LAST_EPOCH:
                raise ValueError(f"epochs * steps_per_epoch must be at most 2**63 - 1, got "
                                 f"{total_steps}")
        beta1 = _uses_beta1(optimizer, "OneCycleLR") if cycle_momentum else False
        if last_epoch != -1:
            _check_resumable(optimizer, ("initial_lr", "max_lr", "min_lr")
                             + (("max_momentum", "base_momentum") if cycle_momentum else ()),
                             "OneCycleLR")
        phases = _one_cycle_phases(pct_start, total_steps, three_phase)
        _phase_at(phases, last_epoch + 1, pct_start, total_steps)  # refused before any change
        # Checked: PyTorch's changes and attributes, in its order (Note [Scheduler state]).
        self.optimizer = optimizer
        self.total_steps = total_steps
        self._schedule_phases = phases
        self._anneal_func_type = anneal_strategy
        if last_epoch == -1:
            for top, group in zip(max_lrs, optimizer.param_groups):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = beta1
            if last_epoch == -1:
                _start_momentums(optimizer, max_momentums, base_momentums, beta1)
        self._start(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        # PyTorch's _annealing_cos and _annealing_linear, operation for operation.
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def c_get_lr(self):
        _warn_outside_step(self)
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps "
                             f"is {self.total_steps}")
        phase, pct = _phase_at(self._schedule_phases, step, None, self.total_steps)
        groups = self.optimizer.param_groups
        lrs = [self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
               for group in groups]
        if self.cycle_momentum:
            momentums = [self._anneal(group[phase["start_momentum"]],
                                      group[phase["end_momentum"]], pct) for group in groups]
            for group, momentum in zip(groups, momentums):
                _set_momentum(group, momentum, self.use_beta1)
        return lrs


cdef list _one_cycle_phases(double pct_start, object total_steps, bint three_phase):
    """PyTorch's phases of OneCycleLR: where each ends (a step, as a float) and the group keys
    its lr and momentum go between."""
    warm_up = {"end_step": float(pct_start * total_steps) - 1, "start_lr": "initial_lr",
               "end_lr": "max_lr", "start_momentum": "max_momentum",
               "end_momentum": "base_momentum"}
    if not three_phase:
        return [warm_up, {"end_step": total_steps - 1, "start_lr": "max_lr",
                          "end_lr": "min_lr", "start_momentum": "base_momentum",
                          "end_momentum": "max_momentum"}]
    return [warm_up,
            {"end_step": float(2 * pct_start * total_steps) - 2, "start_lr": "max_lr",
             "end_lr": "initial_lr", "start_momentum": "base_momentum",
             "end_momentum": "max_momentum"},
            {"end_step": total_steps - 1, "start_lr": "initial_lr", "end_lr": "min_lr",
             "start_momentum": "max_momentum", "end_momentum": "max_momentum"}]


cdef tuple _phase_at(list phases, object step, object pct_start, object total_steps):
    """(the phase of step, the fraction of it done), as PyTorch's get_lr finds them. A phase
    of no steps would divide by zero there (PyTorch's ZeroDivisionError): a ValueError."""
    start_step = 0.0
    for index, phase in enumerate(phases):
        end_step = phase["end_step"]
        if step <= end_step or index == len(phases) - 1:
            if end_step == start_step:
                shown = "" if pct_start is None else f"pct_start={errors.shown(pct_start)} and "
                raise ValueError(f"OneCycleLR: phase {index + 1} of the schedule has no steps "
                                 f"({shown}total_steps={total_steps} end it where the phase "
                                 "before it ends); choose a pct_start that gives every phase "
                                 "at least one step")
            return phase, (step - start_step) / (end_step - start_step)
        start_step = end_step
    raise AssertionError("the last phase takes every later step")


# -- The scheduler of weight averaging (tensorplay.optim.swa_utils) ----------------------------

def _cosine_anneal(t):
    return (1 - math.cos(math.pi * t)) / 2


def _linear_anneal(t):
    return t


class SWALRCore(LRSchedulerCore):
    """SWALR: each group's lr annealed to its swa_lr over anneal_epochs epochs, then kept there
    (the schedule of stochastic weight averaging's last phase)."""

    def init(self, optimizer, swa_lr, anneal_epochs, anneal_strategy, last_epoch):
        _check_optimizer(optimizer)  # the types, then the values
        _check_numbers(swa_lr, "swa_lr")
        swa_lrs = _per_group(swa_lr, "swa_lr", optimizer)
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{_said(anneal_strategy)}")
        if last_epoch != -1:
            _check_resumable(optimizer, ("initial_lr",), "SWALR")
        # Checked: PyTorch's changes and attributes, in its order (Note [Scheduler state]).
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        self._set_anneal_func(anneal_strategy)
        self.anneal_epochs = anneal_epochs
        self._start(optimizer, last_epoch)

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = _cosine_anneal if anneal_strategy == "cos" else _linear_anneal

    def c_get_lr(self):
        _warn_outside_step(self)
        # PyTorch's arithmetic: the lr the last step would have started from, then this
        # step's blend of it and swa_lr.
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        groups = self.optimizer.param_groups
        before = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        starts = [group["swa_lr"] if before == 1
                  else (group["lr"] - before * group["swa_lr"]) / (1 - before)
                  for group in groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(groups, starts)]

    def c_state_dict(self):
        return {key: value for key, value in self.__dict__.items()
                if key not in ("optimizer", "anneal_func")}

    def c_load_state_dict(self, state_dict):
        _check_state(state_dict)
        if state_dict.get("_anneal_strategy", self._anneal_strategy) not in ("cos", "linear"):
            raise ValueError(f"state_dict['_anneal_strategy'] must be 'cos' or 'linear', got "
                             f"{errors.shown(state_dict['_anneal_strategy'])}")
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
