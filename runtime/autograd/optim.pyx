# cython: language_level=3
"""tensorplay.optim: optimisers that update parameters from their gradients.

See docs/design.md, "tensorplay.optim".

Note [Capturable step]
SGD.step() can be captured into a CUDA graph with the forward and backward passes, so that a
whole training step is one graph launch. Everything it does on the device is an in-place kernel
with the hyperparameters as arguments (one sgd_step kernel per contiguous CUDA parameter, which
reads the parameter, its gradient and its buffer once, where PyTorch's foreach step makes three
passes; mul_ and add_ otherwise), or an allocation, which a capture takes
from the graph's private pool; it never reads device memory on the host and never
synchronises. What a replay repeats is fixed at capture:
- the hyperparameters: the values in param_groups when step() was captured;
- which parameters are updated: those whose grad existed then (a step skips a parameter
  without grad, as PyTorch's);
- the momentum buffers: allocated, as zeros, when the optimiser is made, so their addresses
  never change and no step has to create one. PyTorch's first step copies the gradient into a
  new buffer; momentum * 0 + gradient is the same value. A parameter that has none (added to
  param_groups later, or all of them when momentum was 0 at construction and is set later)
  gets its buffer, as zeros, at the next eager step that updates it, as PyTorch's first step
  makes one; a captured step refuses to make one, since the zeros would be written again on
  every replay.

Note [Checked steps]
step() follows param_groups as PyTorch's does: every group, its current "params", "lr",
"momentum" and "weight_decay", read at each step. Before it changes anything (a parameter, a
momentum buffer made) it checks all of them: each group a dict with those keys, the
hyperparameters finite numbers >= 0 (PyTorch checks lr < 0 only, at construction; a NaN or an
infinity would turn every weight into NaN at the first step), "params" a list or tuple of leaf
tensors, each in one place only, and each parameter with a grad a floating-point tensor whose
grad and momentum buffer match it (shape, dtype, device) in writable memory. So a refused step
updates no parameter, where updating the first ones and raising on a later one would leave the
model half-stepped. The checks run on the host, read nothing from the device and launch
nothing, so a captured step costs the same replay.
"""
import math
import numbers

from tensorplay._runtime.autograd cimport engine as autograd
from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.kernels cimport device_ops
from tensorplay._runtime.tensor cimport core as tensor, elementwise, factories
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.tensor.core cimport TensorCore

# The keys of a parameter group, and how PyTorch's messages name each hyperparameter.
GROUP_KEYS = ("params", "lr", "momentum", "weight_decay")
HYPERPARAMETERS = (("lr", "learning rate"), ("momentum", "momentum value"),
                   ("weight_decay", "weight_decay value"))


cdef object _hyperparameter(object value, str key, str what, str where):
    """value as a float: a finite number >= 0, PyTorch's message where it is negative."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's too
        raise TypeError(f"{key}{where} must be a float (or an int), got "
                        f"{type(value).__name__} ({errors.shown(value)})")
    try:
        number = float(value)
    except OverflowError:
        raise ValueError(f"Invalid {what}: {errors.shown(value)}{where} is too large for a "
                         "float") from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"Invalid {what}: {errors.shown(value)}{where}; it must be a finite "
                         "number >= 0")
    return number


cdef bint fused(TensorCore param, TensorCore gradient, object buffer):
    """Whether a step of param is one kernel (elementwise.cu, sgd_step): CUDA tensors of one
    layout, each contiguous (step() checked their shapes, dtypes and devices)."""
    return param.device_index != tensor.CPU and tensor.is_contiguous(param) and \
        tensor.is_contiguous(gradient) and (buffer is None or
                                           tensor.is_contiguous(<TensorCore>buffer))


cdef int sgd_step(TensorCore param, TensorCore gradient, object buffer, object lr,
                  object momentum, object weight_decay) except -1:
    """param's SGD step in one pass, as the unfused operations of c_step round it; counts the
    in-place change of param and of its momentum buffer."""
    param.c_mark_modified("step")
    if buffer is not None:
        (<TensorCore>buffer).c_mark_modified("step")
    device_ops.sgd_step(param.device_index, param.dtype_object, param.data, gradient.data,
                        (<TensorCore>buffer).data if buffer is not None else 0, lr, momentum,
                        weight_decay, param.element_count,
                        tensor.current_stream(param.device_index))
    return 0


cdef str _place(Py_ssize_t group, Py_ssize_t index):
    return f"param_groups[{group}]['params'][{index}]"


cdef bint _capturing(TensorCore param) except -1:
    """Whether the current stream of param's device captures a CUDA graph."""
    if param.device_index < 0:
        return False
    return _device.stream_capturing(<void*>_stream.current_stream_handle(param.device_index),
                                    param.device_index)


class SGDCore:
    """Stochastic gradient descent with momentum and weight decay (PyTorch's update rule)."""

    def init(self, params, lr, momentum, weight_decay):
        if isinstance(params, TensorCore):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got a Tensor")
        try:
            params = list(params)
        except TypeError:
            raise TypeError(f"params must be an iterable of tensors, got "
                            f"{errors.shown(params)}") from None
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        seen = set()
        for index, param in enumerate(params):
            if not isinstance(param, TensorCore):
                raise TypeError(f"optimizer can only optimize Tensors, but params[{index}] is "
                                f"{type(param).__name__}")
            if not param.is_leaf:
                raise ValueError(f"can't optimize a non-leaf Tensor (params[{index}])")
            if id(param) in seen:
                raise ValueError(f"params[{index}] appears more than once; each parameter "
                                 "must be given once")
            seen.add(id(param))
        # Note [Checked steps]: finite, not only >= 0.
        lr = _hyperparameter(lr, "lr", "learning rate", "")
        momentum = _hyperparameter(momentum, "momentum", "momentum value", "")
        weight_decay = _hyperparameter(weight_decay, "weight_decay", "weight_decay value", "")
        self.param_groups = [{"params": params, "lr": lr, "momentum": momentum,
                              "weight_decay": weight_decay}]
        # Per parameter, as PyTorch's optimizer.state: {"momentum_buffer": tensor}. Note
        # [Capturable step]: every buffer exists, at a fixed address, before any capture.
        self.state = {}
        if momentum:
            for param in params:
                self.state[param] = {
                    "momentum_buffer": factories.zeros_like(param, None, None, False)}

    def _planned_steps(self):
        """(param, grad, group settings, momentum buffer or None) of every parameter that has
        a grad, after every check of Note [Checked steps]; and the parameters that need a
        momentum buffer made first."""
        cdef TensorCore param, grad, buffer
        groups = self.param_groups
        if not isinstance(groups, list) or not groups:
            raise TypeError(f"param_groups must be a non-empty list of dicts, got "
                            f"{errors.shown(groups)}")
        planned, missing, seen = [], [], set()
        for number, group in enumerate(groups):
            if not isinstance(group, dict):
                raise TypeError(f"param_groups[{number}] must be a dict, got "
                                f"{type(group).__name__}")
            absent = [key for key in GROUP_KEYS if key not in group]
            if absent:
                raise ValueError(f"param_groups[{number}] has no "
                                 f"{', '.join(repr(key) for key in absent)}; a group holds "
                                 f"{', '.join(repr(key) for key in GROUP_KEYS)}")
            settings = tuple(_hyperparameter(group[key], key, what,
                                             f" (param_groups[{number}]['{key}'])")
                             for key, what in HYPERPARAMETERS)
            momentum = settings[1]
            params = group["params"]
            if not isinstance(params, (list, tuple)):
                raise TypeError(f"param_groups[{number}]['params'] must be a list of tensors, "
                                f"got {type(params).__name__}")
            for index, value in enumerate(params):
                if not isinstance(value, TensorCore):
                    raise TypeError(f"optimizer can only optimize Tensors, but "
                                    f"{_place(number, index)} is {type(value).__name__}")
                param = value
                if param.grad_node is not None:
                    raise ValueError(f"can't optimize a non-leaf Tensor ({_place(number, index)})")
                if id(param) in seen:
                    raise ValueError(f"{_place(number, index)} appears more than once in "
                                     "param_groups; each parameter must be given once")
                seen.add(id(param))
                if param.grad_value is None:
                    continue
                grad = param.grad_value
                if not param.dtype_object.floating:
                    raise TypeError(f"SGD updates floating-point parameters only; "
                                    f"{_place(number, index)} is "
                                    f"{param.dtype_object.name}")
                if grad.sizes != param.sizes or grad.dtype_object is not param.dtype_object \
                        or grad.device_index != param.device_index:
                    raise ValueError(f"the grad of {_place(number, index)} does not match it "
                                     f"(shape, dtype or device)")
                param.c_check_in_place("SGD.step()")  # writable memory (under no_grad)
                buffer = None
                if momentum:
                    entry = self.state.get(param)
                    found = entry.get("momentum_buffer") if isinstance(entry, dict) else None
                    if found is None:
                        missing.append((param, number, index))
                    elif not isinstance(found, TensorCore):
                        raise TypeError(f"the momentum buffer of {_place(number, index)} must "
                                        f"be a tensor, got {type(found).__name__}")
                    else:
                        buffer = found
                        if buffer.sizes != param.sizes or \
                                buffer.dtype_object is not param.dtype_object or \
                                buffer.device_index != param.device_index:
                            raise ValueError(
                                f"the momentum buffer of {_place(number, index)} does not "
                                f"match it (shape, dtype or device: the parameter was moved "
                                f"or replaced after the optimiser was made); make the "
                                f"optimiser after moving the module")
                        buffer.c_check_in_place("SGD.step()")
                planned.append((param, grad, settings, buffer))
        for param, number, index in missing:
            if _capturing(param):
                raise RuntimeError(
                    f"SGD.step(): {_place(number, index)} has no momentum buffer yet (it was "
                    "added to param_groups, or momentum set above 0, after the optimiser was "
                    "made), and one made during a CUDA graph capture would be zeroed again on "
                    "every replay; run one step() eagerly before the capture, which makes it")
        return planned, missing

    def c_step(self):
        cdef TensorCore gradient
        with autograd.no_grad_block():
            planned, missing = self._planned_steps()  # Note [Checked steps]: nothing changed yet
            made = {}
            for param, _, _ in missing:  # eager only: Note [Capturable step]
                buffer = made[id(param)] = factories.zeros_like(param, None, None, False)
                self.state.setdefault(param, {})["momentum_buffer"] = buffer
            for param, gradient, (lr, momentum, weight_decay), buffer in planned:
                if momentum and buffer is None:
                    buffer = made[id(param)]
                if fused(param, gradient, buffer if momentum else None):
                    sgd_step(param, gradient, buffer if momentum else None, lr, momentum,
                             weight_decay)
                    continue
                # The runtime's own operations, not the public methods: every value was
                # checked above.
                if weight_decay:
                    gradient = elementwise.add_scaled(<TensorCore>gradient, param, weight_decay)
                if momentum:
                    elementwise.imul(<TensorCore>buffer, momentum)
                    elementwise.add_scaled_(<TensorCore>buffer, gradient, 1)
                    gradient = buffer
                elementwise.sub_scaled_(<TensorCore>param, gradient, lr)

    def c_zero_grad(self, set_to_none):
        params = []
        for group in self.param_groups:
            params.extend(group["params"])
        autograd.zero_grads(params, set_to_none)
