# cython: language_level=3
"""tensorplay.optim.swa_utils: weight averaging, as PyTorch's torch.optim.swa_utils.

AveragedModel keeps a copy of a model whose parameters are the running average of the
model's (stochastic weight averaging, Izmailov et al., 2018) or their exponential moving
average; update_bn recomputes BatchNorm statistics for the averaged weights. SWALR, the
scheduler of the averaging phase, is a scheduler like the others (lr_scheduler.pyx).

Note [Averaging on the device]
The averaging functions are PyTorch's arithmetic on tensors, under no_grad: the default
average is p + (q - p) / (n + 1), where n, the number of models averaged so far, is the
AveragedModel's buffer n_averaged (an int64 tensor, made on `device`, or on the CPU when none
is given, as PyTorch's) moved to each parameter's device; on a CUDA device it is
lerp_(q, 1 / (n + 1)) with the weight a tensor there, as PyTorch's foreach path. Only
update_parameters() reads n_averaged on the host (is this the first model?), as PyTorch's
does; the averaging itself reads nothing back.
"""
import copy
import itertools

from tensorplay._runtime.autograd cimport engine as autograd
from tensorplay._runtime.autograd.nn import BatchNormCore, ModuleCore
from tensorplay._runtime.autograd.optim cimport lerp_rounded_
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.base.dtypes cimport named_dtype
from tensorplay._runtime.tensor cimport arguments, copies, elementwise, factories
from tensorplay._runtime.tensor.core cimport CPU, TensorCore


cdef int _check_decay(double decay) except -1:
    if not 0.0 <= decay <= 1.0:  # PyTorch's words (NaN too)
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")
    return 0


cdef object _weight_of(object num_averaged, TensorCore like):
    """1 / (num_averaged + 1) as lerp_ takes it for like: a float, or a tensor of like's dtype
    on its device (Note [Averaging on the device])."""
    if not isinstance(num_averaged, TensorCore):
        return 1 / (num_averaged + 1)
    weight = elementwise.rtruediv(<TensorCore>elementwise.add(num_averaged, 1), 1)
    return copies.to(weight, None, like.dtype_object, False, False)


def _ema_update(decay):
    def ema_update(ema_param_list, current_param_list, _):
        with autograd.no_grad_block():
            for ema, current in zip(ema_param_list, current_param_list):
                if (<TensorCore>ema).dtype_object.floating:
                    lerp_rounded_(ema, current, 1 - decay)
                else:
                    copies.copy_(ema, elementwise.add(elementwise.mul(ema, decay),
                                                      elementwise.mul(current, 1 - decay)),
                                 False)
    return ema_update


cdef object get_ema_multi_avg_fn(double decay):
    _check_decay(decay)
    return _ema_update(decay)


def swa_update(averaged_param_list, current_param_list, num_averaged):
    """PyTorch's swa_update of a list of parameters: each moves 1 / (n + 1) of the way to the
    model's (Note [Averaging on the device])."""
    with autograd.no_grad_block():
        weights = {}
        for averaged, current in zip(averaged_param_list, current_param_list):
            if (<TensorCore>averaged).dtype_object.floating:
                key = ((<TensorCore>averaged).device_index, (<TensorCore>averaged).dtype_object)
                if key not in weights:
                    weights[key] = _weight_of(num_averaged, averaged)
                elementwise.lerp_(averaged, current, weights[key])
            else:
                # An integer tensor (a buffer, with use_buffers) takes the average through a
                # float, truncated as it is copied back, as PyTorch's CPU path does; PyTorch's
                # foreach path refuses it (integer addcdiv_).
                copies.copy_(averaged, swa_single(averaged, current, num_averaged), False)


cdef object get_swa_multi_avg_fn():
    return swa_update


def _ema_single(decay):
    def ema_update(ema_param, current_param, num_averaged):
        with autograd.no_grad_block():
            return elementwise.add(elementwise.rmul(ema_param, decay),
                                   elementwise.rmul(current_param, 1 - decay))
    return ema_update


cdef object get_ema_avg_fn(double decay):
    _check_decay(decay)
    return _ema_single(decay)


def swa_single(averaged_param, current_param, num_averaged):
    """PyTorch's swa_update of one parameter: averaged + (current - averaged) / (n + 1)."""
    with autograd.no_grad_block():
        return elementwise.add(averaged_param, elementwise.truediv(
            elementwise.sub(current_param, averaged_param), num_averaged + 1))


cdef object get_swa_avg_fn():
    return swa_single


# --------------------------------------------------------------------------------------------
# AveragedModel


class AveragedModelCore(ModuleCore):
    """AveragedModel: a deep copy of a model (on device, where given) whose parameters (and,
    with use_buffers, buffers) update_parameters() averages with another model's."""

    def init(self, model, device, avg_fn, multi_avg_fn, bint use_buffers):
        if not isinstance(model, ModuleCore):
            raise TypeError(f"model must be a tensorplay.nn.Module, got {errors.shown(model)}")
        for name, function in (("avg_fn", avg_fn), ("multi_avg_fn", multi_avg_fn)):
            if function is not None and not callable(function):
                raise TypeError(f"{name} must be None or a function of (averaged, current, "
                                f"num_averaged), got {errors.shown(function)}")
        if avg_fn is not None and multi_avg_fn is not None:  # PyTorch's words
            raise ValueError("Only one of avg_fn and multi_avg_fn should be provided")
        averaged = copy.deepcopy(model)
        if device is not None:
            averaged = averaged.to(device)
        ModuleCore.init(self)
        self.module = averaged
        self.register_buffer("n_averaged",
                             factories.tensor(0, named_dtype("int64"), device, False))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def c_forward(self, args, kwargs):
        return self.module(*args, **kwargs)

    def _pairs(self, model):
        """(averaged, model's) tensors, detached: the parameters, and with use_buffers the
        buffers, checked to match in number and shape before anything changes."""
        if self.use_buffers:
            mine = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            mine, theirs = list(self.module.parameters()), list(model.parameters())
        what = "parameters and buffers" if self.use_buffers else "parameters"
        if len(mine) != len(theirs):
            raise ValueError(f"model has {len(theirs)} {what} where the averaged model has "
                             f"{len(mine)}: update_parameters() takes the model that was copied "
                             "(or one of its architecture)")
        for index, (averaged, current) in enumerate(zip(mine, theirs)):
            if (<TensorCore>averaged).sizes != (<TensorCore>current).sizes:
                raise ValueError(f"model's {what} [{index}] has the shape "
                                 f"{list((<TensorCore>current).sizes)} where the averaged one "
                                 f"has {list((<TensorCore>averaged).sizes)}")
        return [((<TensorCore>averaged).c_detach(), (<TensorCore>current).c_detach())
                for averaged, current in zip(mine, theirs)]

    def c_update_parameters(self, model):
        if not isinstance(model, ModuleCore):
            raise TypeError(f"model must be a tensorplay.nn.Module, got {errors.shown(model)}")
        pairs = self._pairs(model)
        with autograd.no_grad_block():
            # PyTorch's: the first model is copied; each later one averaged in.
            first = bool(elementwise.eq(self.n_averaged, 0))
            moved = [(averaged, copies.to(current, averaged.device, None, False, False))
                     for averaged, current in pairs]
            if first:
                for averaged, current in moved:
                    copies.copy_(averaged, current, False)
            else:
                self._average([averaged for averaged, _ in moved],
                              [current for _, current in moved])
            if not self.use_buffers:  # the buffers follow the model's
                for mine, theirs in zip(self.module.buffers(), model.buffers()):
                    copies.copy_((<TensorCore>mine).c_detach(),
                                 copies.to((<TensorCore>theirs).c_detach(), mine.device, None,
                                           False, False), False)
            elementwise.iadd(self.n_averaged, 1)

    def _average(self, list averaged, list current):
        """One more model averaged in (Note [Averaging on the device]): by avg_fn, parameter by
        parameter, else by multi_avg_fn (or PyTorch's default) per device and dtype."""
        if self.avg_fn is not None and self.multi_avg_fn is None:
            for mine, theirs in zip(averaged, current):
                count = copies.to(self.n_averaged, mine.device, None, False, False)
                copies.copy_(mine, self.avg_fn(mine, theirs, count), False)
            return
        groups = {}
        for mine, theirs in zip(averaged, current):
            key = ((<TensorCore>mine).device_index, (<TensorCore>mine).dtype_object)
            groups.setdefault(key, ([], []))
            groups[key][0].append(mine)
            groups[key][1].append(theirs)
        for (device_index, _), (mine, theirs) in groups.items():
            count = copies.to(self.n_averaged, mine[0].device, None, False, False)
            if self.multi_avg_fn is not None:
                self.multi_avg_fn(mine, theirs, count)
            elif device_index >= 0:  # PyTorch's foreach path on CUDA
                swa_update(mine, theirs, count)
            else:
                for each, other in zip(mine, theirs):
                    copies.copy_(each, swa_single(each, other, count), False)


cdef object update_bn(object loader, object model, object device):
    if not isinstance(model, ModuleCore):
        raise TypeError(f"model must be a tensorplay.nn.Module, got {errors.shown(model)}")
    try:
        iter(loader)
    except TypeError:
        raise TypeError(f"loader must be an iterable of batches (a DataLoader), got "
                        f"{errors.shown(loader)}") from None
    if device is not None:
        arguments.device_arg(device, CPU)  # checked even where no layer will use it
    with autograd.no_grad_block():
        momenta = {}
        for module in model.modules():
            if isinstance(module, BatchNormCore):
                module.reset_running_stats()
                momenta[module] = module.momentum
        if not momenta:
            return None
        was_training = model.training
        model.train()
        for module in momenta:
            module.momentum = None  # the cumulative average of every batch
        try:
            for batch in loader:
                if isinstance(batch, (list, tuple)):
                    batch = batch[0]
                if device is not None:
                    batch = batch.to(device)
                model(batch)
        finally:
            for module, momentum in momenta.items():
                module.momentum = momentum
            model.train(was_training)
    return None
