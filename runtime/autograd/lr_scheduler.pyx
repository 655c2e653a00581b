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
                        "one of tensorplay.optim's optimisers, SGD, Adam, AdamW, RMSprop or "
                        "Adagrad, or a subclass of one)")
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
        before = (self.last_epoch, self._step_count)
        self._step_count += 1  # get_lr() reads it (CosineAnnealingLR's resumed first step)
        try:
            values = self._next_lrs(epoch)
        except BaseException:
            self.last_epoch, self._step_count = before
            raise
        groups = self.optimizer.param_groups
        for group, lr in zip(groups, values):
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
        count = len(self.optimizer.param_groups)
        if len(values) != count:
            raise ValueError(f"the scheduler computed {len(values)} learning rates for the "
                             f"optimizer's {count} parameter groups (a group added after the "
                             "scheduler was made has no base lr)")
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


class LambdaLRCore(LRSchedulerCore):
    """LambdaLR: each group's base lr times its function of the epoch."""

    def init(self, optimizer, lr_lambda, last_epoch):
        _check_optimizer(optimizer)
        count = len(optimizer.param_groups)
        if isinstance(lr_lambda, (list, tuple)):
            for index, function in enumerate(lr_lambda):
                if not callable(function):
                    raise TypeError(f"lr_lambda[{index}] must be a function of the epoch, got "
                                    f"{type(function).__name__} ({errors.shown(function)})")
            if len(lr_lambda) != count:
                raise ValueError(f"Expected {count} lr_lambdas, but got {len(lr_lambda)}")
            lambdas = list(lr_lambda)
        elif callable(lr_lambda):
            lambdas = [lr_lambda] * count
        else:
            raise TypeError(f"lr_lambda must be a function of the epoch or a list of them, one "
                            f"per parameter group, got {type(lr_lambda).__name__} "
                            f"({errors.shown(lr_lambda)})")
        self.lr_lambdas = lambdas
        self._start(optimizer, last_epoch)

    def c_get_lr(self):
        _warn_outside_step(self)
        return [base_lr * function(self.last_epoch)
                for function, base_lr in zip(self.lr_lambdas, self.base_lrs)]

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
            raise KeyError("state_dict has no 'lr_lambdas'; a LambdaLR's state_dict() holds "
                           "them")
        saved = state_dict["lr_lambdas"]
        if not isinstance(saved, (list, tuple)) or len(saved) != len(self.lr_lambdas):
            raise ValueError(f"state_dict['lr_lambdas'] must be a list of one entry per "
                             f"lr_lambda ({len(self.lr_lambdas)}), got {errors.shown(saved)}")
        self.__dict__.update({key: value for key, value in state_dict.items()
                              if key != "lr_lambdas"})
        for function, attributes in zip(self.lr_lambdas, saved):
            if attributes is not None:
                function.__dict__.update(attributes)


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
