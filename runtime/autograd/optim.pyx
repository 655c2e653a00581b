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

Note [Capturable Adam]
Adam.step() with capturable=True is PyTorch's capturable branch of _single_tensor_adam
(torch/optim/adam.py): the step count is a 0-d float32 tensor on the parameter's device, and
the bias corrections 1 - beta ** step, the step size and the denominator's scale are computed
from it by kernels, so each replay counts its step and corrects by that count, where the
eager branch reads the count on the host (a Python float a capture would freeze). The rest is
in-place kernels on the state made at the first (eager) step, as Note [Capturable step] says
for SGD: a captured step refuses a parameter without state yet, and a group that is not
capturable (PyTorch's RuntimeError). PyTorch refuses capturable=True for CPU parameters; here
it runs (the same arithmetic on the CPU), which the CPU tests compare with the eager branch.

RMSprop's capturable branch is the same design: its step count, which its update only counts,
lives on the parameter's device with capturable=True, so every replay counts its step, and
capturing a step whose group is not capturable is PyTorch's RuntimeError.

Note [Capturable Adagrad]
PyTorch's Adagrad keeps its step count on the CPU and reads it on the host for lr_decay's
learning rate, lr / (1 + (step - 1) * lr_decay), so a captured step would repeat the rate and
the count of the capture. Here the count (a 0-d float32 tensor, as PyTorch's) always lives on
the parameter's device, and with lr_decay the rate is computed there by kernels from the
count, in float64 as PyTorch's Python floats (the count is exact, so the rate is PyTorch's to
the bit), then rounded to the parameter's dtype, as PyTorch's kernel rounds its scalar. The
state ("step" and "sum") is made with the optimiser, as PyTorch's, and for a group added
later when it is added, so a first step can be captured too, with no warm-up; every replay
counts, decays and accumulates as an eager step would. A parameter the loaded state does not
cover gets its step and sum reset in place.

Note [Loaded in place]
load_state_dict() copies each loaded tensor into the state tensor that holds the same key for
the same parameter when shape, dtype and device match, where PyTorch's replaces the state with
new tensors. A captured step reads the state at the addresses it was captured with, so after
a load its replays follow the loaded state. A parameter the loaded state does not cover starts
again: SGD zeroes its momentum buffer in place (the next step is a first step), Adam drops its
state (the next eager step makes it).
"""
import math
import numbers

from tensorplay._runtime.autograd cimport engine as autograd
from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.base cimport errors
from tensorplay._runtime.base.dtypes cimport named_dtype
from tensorplay._runtime.kernels cimport device_ops
from tensorplay._runtime.tensor cimport core as tensor, copies, elementwise, factories
from tensorplay._runtime.devices cimport stream as _stream
from tensorplay._runtime.tensor.core cimport TensorCore

# How PyTorch's messages name each number of a group (torch/optim/sgd.py, adam.py,
# rmsprop.py, adagrad.py).
NUMBER_NAMES = {"lr": "learning rate", "momentum": "momentum value",
                "dampening": "dampening value", "weight_decay": "weight_decay value",
                "eps": "epsilon value", "alpha": "alpha value", "lr_decay": "lr_decay value",
                "initial_accumulator_value": "initial_accumulator_value value",
                "momentum_decay": "momentum_decay value", "rho": "rho value"}
SGD_DEFAULTS = (("lr", 0.001), ("momentum", 0), ("dampening", 0), ("weight_decay", 0),
                ("nesterov", False), ("maximize", False), ("foreach", None),
                ("differentiable", False), ("fused", None))
ADAM_DEFAULTS = (("lr", 0.001), ("betas", (0.9, 0.999)), ("eps", 1e-08), ("weight_decay", 0),
                 ("amsgrad", False), ("maximize", False), ("foreach", None),
                 ("capturable", False), ("differentiable", False), ("fused", None),
                 ("decoupled_weight_decay", False))
CAPTURABLE_DEVICE = "If capturable=True, params and state_steps must be on the same device"
# PyTorch's keys in PyTorch's order, so that state_dict()'s groups read as torch's.
RMSPROP_DEFAULTS = (("lr", 0.01), ("momentum", 0), ("alpha", 0.99), ("eps", 1e-08),
                    ("centered", False), ("weight_decay", 0), ("capturable", False),
                    ("foreach", None), ("maximize", False), ("differentiable", False))
# PyTorch's keys in PyTorch's order (torch/optim/adamax.py, nadam.py, radam.py).
ADAMAX_DEFAULTS = (("lr", 0.002), ("betas", (0.9, 0.999)), ("eps", 1e-08), ("weight_decay", 0),
                   ("foreach", None), ("maximize", False), ("differentiable", False),
                   ("capturable", False))
NADAM_DEFAULTS = (("lr", 0.002), ("betas", (0.9, 0.999)), ("eps", 1e-08), ("weight_decay", 0),
                  ("momentum_decay", 0.004), ("decoupled_weight_decay", False),
                  ("maximize", False), ("foreach", None), ("capturable", False),
                  ("differentiable", False))
RADAM_DEFAULTS = (("lr", 0.001), ("betas", (0.9, 0.999)), ("eps", 1e-08), ("weight_decay", 0),
                  ("maximize", False), ("foreach", None), ("capturable", False),
                  ("decoupled_weight_decay", False), ("differentiable", False))
ADADELTA_DEFAULTS = (("lr", 1.0), ("rho", 0.9), ("eps", 1e-06), ("weight_decay", 0),
                     ("maximize", False), ("capturable", False), ("foreach", None),
                     ("differentiable", False))
ASGD_DEFAULTS = (("lr", 0.01), ("lambd", 0.0001), ("alpha", 0.75), ("t0", 1000000.0),
                 ("weight_decay", 0), ("foreach", None), ("maximize", False),
                 ("differentiable", False), ("capturable", False))
RPROP_DEFAULTS = (("lr", 0.01), ("etas", (0.5, 1.2)), ("step_sizes", (1e-06, 50)),
                  ("foreach", None), ("maximize", False), ("differentiable", False),
                  ("capturable", False))
ADAGRAD_DEFAULTS = (("lr", 0.01), ("lr_decay", 0), ("eps", 1e-10), ("weight_decay", 0),
                    ("initial_accumulator_value", 0), ("foreach", None), ("maximize", False),
                    ("differentiable", False), ("fused", None))


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


cdef object _number(dict group, str key, str where):
    """group[key], checked; where is "" or names the group with %s for the key."""
    return _hyperparameter(group[key], key, NUMBER_NAMES[key], where.replace("%s", key))


cdef bint _flag(dict group, str key, str where) except -1:
    """group[key] as a bool (numpy's bool, 0 and 1 too)."""
    value = group[key]
    where = where.replace("%s", key)
    if isinstance(value, (bool, numbers.Integral)) and value in (0, 1) or \
            type(value).__name__ == "bool_":
        return bool(value)
    raise TypeError(f"{key}{where} must be a bool, got {type(value).__name__} "
                    f"({errors.shown(value)})")


cdef int _unoffered(dict group, str where) except -1:
    """foreach is accepted and changes nothing (every step is per parameter, the numbers are
    the same); differentiable and fused are not offered (docs/design.md, tensorplay.optim)."""
    if group["foreach"] is not None and not isinstance(group["foreach"], bool):
        raise TypeError(f"foreach{where.replace('%s', 'foreach')} must be None or a bool, got "
                        f"{type(group['foreach']).__name__}")
    if group["differentiable"] is not False:
        raise ValueError(f"differentiable=True{where.replace('%s', 'differentiable')} is not "
                         "offered: a step runs under no_grad")
    if group.get("fused") not in (None, False):  # RMSprop has no fused
        raise ValueError(f"fused=True{where.replace('%s', 'fused')} is not offered (a step is "
                         "in-place kernels; SGD's of a contiguous CUDA parameter is one kernel "
                         "already)")
    return 0


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


cdef str _device_text(TensorCore param):
    return "cpu" if param.device_index < 0 else f"cuda:{param.device_index}"


cdef int _check_like(object value, TensorCore param, str what, str place, str name) except -1:
    """value is a tensor of param's shape, dtype and device, in writable memory."""
    if not isinstance(value, TensorCore):
        raise TypeError(f"the {what} of {place} must be a tensor, got {type(value).__name__}")
    cdef TensorCore other = value
    if other.sizes != param.sizes or other.dtype_object is not param.dtype_object or \
            other.device_index != param.device_index:
        raise ValueError(f"the {what} of {place} does not match it (shape, dtype or device: the "
                         "parameter was moved or replaced after the optimiser was made, or "
                         "the state loaded was another's); make the optimiser after moving "
                         "the module")
    other.c_check_in_place(name)
    return 0


class OptimizerCore:
    """What SGD and Adam share, as torch.optim.Optimizer: parameter groups (add_param_group),
    the state per parameter, state_dict() and load_state_dict(). A subclass names its
    DEFAULTS, checks a group's settings (_settings) and may prepare a new group (_added)."""

    def _setup(self, params, dict defaults):
        if isinstance(params, TensorCore):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got a Tensor")
        try:
            groups = list(params)
        except TypeError:
            raise TypeError(f"params must be an iterable of tensors or dicts, got "
                            f"{errors.shown(params)}") from None
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        self.defaults = defaults
        self.state = {}
        self.param_groups = []
        if not isinstance(groups[0], dict):
            self._add(dict(params=groups), "params")
            return
        for group in groups:
            self.c_add_param_group(group)

    def c_add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        self._add(param_group, "param_group['params']")

    def _add(self, dict group, str label):
        """Check group as PyTorch's add_param_group, then fill in the defaults and append it;
        label names its params in messages. Nothing changes when a check fails."""
        if "params" not in group:
            raise ValueError("param_group has no 'params'")
        params = group["params"]
        if isinstance(params, TensorCore):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            try:
                params = list(params)
            except TypeError:
                raise TypeError(f"{label} must be an iterable of tensors, got "
                                f"{errors.shown(params)}") from None
        seen = set()
        for index, param in enumerate(params):
            if not isinstance(param, TensorCore):
                raise TypeError(f"optimizer can only optimize Tensors, but {label}[{index}] is "
                                f"{type(param).__name__}")
            if not param.is_leaf:
                raise ValueError(f"can't optimize a non-leaf Tensor ({label}[{index}])")
            if id(param) in seen:  # PyTorch warns; a step would update it twice
                raise ValueError(f"{label}[{index}] appears more than once; each parameter "
                                 "must be given once")
            seen.add(id(param))
        for other in self.param_groups:
            if any(id(param) in seen for param in other["params"]):
                raise ValueError("some parameters appear in more than one parameter group")
        filled = dict(group)
        for key, default in self.defaults.items():
            filled.setdefault(key, default)
        filled["params"] = params
        self._settings(filled, "")  # refuses bad numbers before anything is added
        group.update(filled)
        self.param_groups.append(group)
        self._added(group)

    def _added(self, dict group):
        pass

    def _groups(self):
        """param_groups, checked as a list of dicts that hold every key of the defaults."""
        groups = self.param_groups
        if not isinstance(groups, list) or not groups:
            raise TypeError(f"param_groups must be a non-empty list of dicts, got "
                            f"{errors.shown(groups)}")
        for number, group in enumerate(groups):
            if not isinstance(group, dict):
                raise TypeError(f"param_groups[{number}] must be a dict, got "
                                f"{type(group).__name__}")
            absent = [key for key in ("params",) + tuple(self.defaults) if key not in group]
            if absent:
                raise ValueError(f"param_groups[{number}] has no "
                                 f"{', '.join(repr(key) for key in absent)}; a group holds "
                                 f"'params', {', '.join(repr(key) for key in self.defaults)}")
        return groups

    def _stepped(self, str name):
        """(param, grad, group number, index, settings) of every parameter that has a grad,
        checked as Note [Checked steps] says (the state is the subclass's to check)."""
        cdef TensorCore param, grad
        planned, seen = [], set()
        for number, group in enumerate(self._groups()):
            settings = self._settings(group, f" (param_groups[{number}]['%s'])")
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
                    raise TypeError(f"{name} updates floating-point parameters only; "
                                    f"{_place(number, index)} is "
                                    f"{param.dtype_object.name}")
                if grad.sizes != param.sizes or grad.dtype_object is not param.dtype_object \
                        or grad.device_index != param.device_index:
                    raise ValueError(f"the grad of {_place(number, index)} does not match it "
                                     f"(shape, dtype or device)")
                param.c_check_in_place(f"{name}.step()")  # writable memory (under no_grad)
                planned.append((param, grad, number, index, settings))
        return planned

    def c_zero_grad(self, set_to_none):
        params = []
        for group in self.param_groups:
            params.extend(group["params"])
        autograd.zero_grads(params, set_to_none)

    def c_state_dict(self):
        """PyTorch's format: the state keyed by each parameter's index in the order of
        param_groups, and the groups with 'params' as lists of those indices. The state's
        tensors are the optimiser's own, not copies (as PyTorch's)."""
        indices, groups = {}, []
        for group in self.param_groups:
            packed = {key: value for key, value in group.items() if key != "params"}
            for param in group["params"]:
                indices.setdefault(id(param), len(indices))
            packed["params"] = [indices[id(param)] for param in group["params"]]
            groups.append(packed)
        state = {indices[id(param)]: entry for param, entry in self.state.items()
                 if id(param) in indices}
        return {"state": state, "param_groups": groups}

    def c_load_state_dict(self, state_dict):
        """Load state_dict (of state_dict()'s format) as PyTorch's load_state_dict, but in
        place: a tensor of the state that exists already, of the loaded one's shape, is
        copied into, so a captured step follows the loaded state (Note [Loaded in place])."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or \
                "param_groups" not in state_dict:
            raise TypeError(f"state_dict must be a dict with 'state' and 'param_groups', as "
                            f"state_dict() returns, got {errors.shown(state_dict)}")
        saved_groups, saved_state = state_dict["param_groups"], state_dict["state"]
        if not isinstance(saved_groups, (list, tuple)) or not isinstance(saved_state, dict):
            raise TypeError("state_dict['param_groups'] must be a list of dicts and "
                            "state_dict['state'] a dict")
        groups = self._groups()
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for saved in saved_groups:
            if not isinstance(saved, dict) or not isinstance(saved.get("params"), (list, tuple)):
                raise TypeError("each of state_dict['param_groups'] must be a dict with "
                                "'params', a list of indices")
        if any(len(group["params"]) != len(saved["params"])
               for group, saved in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        by_index = {}
        for group, saved in zip(groups, saved_groups):
            by_index.update(zip(saved["params"], group["params"]))
        loaded_groups = []
        for number, (group, saved) in enumerate(zip(groups, saved_groups)):
            loaded = dict(saved)
            loaded["params"] = group["params"]
            for key, default in self.defaults.items():
                loaded.setdefault(key, default)  # a state_dict of an older version
            self._settings(loaded, f" (state_dict['param_groups'][{number}]['%s'])")
            loaded_groups.append(loaded)
        plans = {}  # param -> {key: (kind, value)}: every check before any copy
        for index, entry in saved_state.items():
            if index not in by_index:
                continue  # PyTorch keeps a state it cannot place; nothing would read it
            if not isinstance(entry, dict):
                raise TypeError(f"state_dict['state'][{index}] must be a dict, got "
                                f"{type(entry).__name__}")
            param = by_index[index]
            group = next(g for g in loaded_groups if any(p is param for p in g["params"]))
            plans[id(param)] = (param, {key: self._loaded(param, group, key, value,
                                                          f"state_dict['state'][{index}]"
                                                          f"['{key}']")
                                        for key, value in entry.items()})
        with autograd.no_grad_block():
            for group in self.param_groups:
                for param in group["params"]:
                    if id(param) not in plans:
                        self._unloaded(param)
            for param, values in plans.values():
                entry = self.state.setdefault(param, {})
                for key, value in values.items():
                    current = entry.get(key)
                    if isinstance(value, TensorCore) and isinstance(current, TensorCore) and \
                            (<TensorCore>current).sizes == (<TensorCore>value).sizes and \
                            (<TensorCore>current).dtype_object is \
                            (<TensorCore>value).dtype_object and \
                            (<TensorCore>current).device_index == \
                            (<TensorCore>value).device_index:
                        copies.copy_(<TensorCore>current, value, False)
                    elif value is not None or not isinstance(current, TensorCore):
                        entry[key] = value
                self._loaded_entry(param, values)
            for group, loaded in zip(self.param_groups, loaded_groups):
                group.clear()
                group.update(loaded)

    def _loaded(self, TensorCore param, dict group, str key, value, str where):
        """A loaded state value for param: a floating tensor on param's device and of its
        dtype (PyTorch's _process_value_according_to_param_policy), other values as they
        are."""
        if not isinstance(value, TensorCore):
            return value
        if (<TensorCore>value).dtype_object.floating:
            return copies.to(value, _device_text(param), param.dtype_object, False, True)
        return copies.to(value, _device_text(param), None, False, True)

    def _unloaded(self, TensorCore param):
        """param has no state in the loaded state_dict: it starts again (PyTorch's, whose
        state after loading holds only what was loaded)."""
        self.state.pop(param, None)

    def _loaded_entry(self, TensorCore param, dict values):
        pass

    def __getstate__(self):
        # A scheduler's wrapper of step() holds this optimiser (lr_scheduler.pyx, Note
        # [Counted optimiser steps]): a copy or an unpickled optimiser takes its class's step()
        # instead, as PyTorch's Optimizer.__getstate__ leaves the wrapper out.
        return {key: value for key, value in self.__dict__.items()
                if key not in ("step", "_opt_called")}


class SGDCore(OptimizerCore):
    """Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight
    decay (PyTorch's update rule)."""

    def init(self, params, lr, momentum, dampening, weight_decay, nesterov, maximize,
             foreach):
        # Buffers made as zeros that no step has used yet: the first step with dampening
        # copies the gradient in (PyTorch's clone of it), a zero buffer gives the same
        # otherwise. By id, since a tensor's == compares elements.
        self._fresh = set()
        defaults = dict(SGD_DEFAULTS)
        defaults.update(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach)
        self._setup(params, defaults)

    def _settings(self, dict group, str where):
        """(lr, momentum, dampening, weight_decay, nesterov, maximize) of group, checked;
        where holds %s for the key."""
        numbers_ = tuple(_number(group, key, where)
                         for key in ("lr", "momentum", "dampening", "weight_decay"))
        flags = tuple(_flag(group, key, where) for key in ("nesterov", "maximize"))
        _unoffered(group, where)
        if flags[0] and (numbers_[1] <= 0 or numbers_[2] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        return numbers_ + flags

    def _added(self, dict group):
        # Note [Capturable step]: every buffer exists, at a fixed address, before any capture.
        if _hyperparameter(group["momentum"], "momentum", "momentum value", ""):
            for param in group["params"]:
                if param not in self.state:
                    self._make_buffer(param)

    def _make_buffer(self, TensorCore param):
        buffer = factories.zeros_like(param, None, None, False)
        self.state.setdefault(param, {})["momentum_buffer"] = buffer
        self._fresh.add(id(param))
        return buffer

    def _unloaded(self, TensorCore param):
        entry = self.state.get(param)
        buffer = entry.get("momentum_buffer") if isinstance(entry, dict) else None
        if isinstance(buffer, TensorCore):  # kept at its address, as zeros: a first step
            copies.fill_(<TensorCore>buffer, 0)
            self._fresh.add(id(param))

    def _loaded(self, TensorCore param, dict group, str key, value, str where):
        if key == "momentum_buffer" and value is not None:
            if not isinstance(value, TensorCore) or (<TensorCore>value).sizes != param.sizes:
                raise ValueError(f"{where} must be a tensor of the parameter's shape "
                                 f"{list(param.sizes)}")
        return OptimizerCore._loaded(self, param, group, key, value, where)

    def _loaded_entry(self, TensorCore param, dict values):
        if isinstance(values.get("momentum_buffer"), TensorCore):
            self._fresh.discard(id(param))
        elif isinstance(self.state[param].get("momentum_buffer"), TensorCore):
            self._unloaded(param)  # PyTorch's None: no step made it yet
        else:
            self.state[param].pop("momentum_buffer", None)
            if not self.state[param]:
                del self.state[param]

    def _planned_steps(self):
        """(param, grad, settings, momentum buffer or None) of every parameter that has a
        grad, after every check of Note [Checked steps]; and the parameters that need a
        momentum buffer made first."""
        planned, missing = [], []
        for param, grad, number, index, settings in self._stepped("SGD"):
            momentum, dampening = settings[1], settings[2]
            buffer = None
            if momentum:
                entry = self.state.get(param)
                found = entry.get("momentum_buffer") if isinstance(entry, dict) else None
                if found is None:
                    missing.append((param, number, index))
                else:
                    _check_like(found, param, "momentum buffer", _place(number, index),
                                "SGD.step()")
                    buffer = found
                    if dampening and id(param) in self._fresh and _capturing(param):
                        raise RuntimeError(
                            f"SGD.step(): the momentum buffer of {_place(number, index)} has "
                            "not been used yet, and with dampening its first step copies the "
                            "gradient in (PyTorch's rule), which a replay would repeat; run one "
                            "step() eagerly before the capture")
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
                made[id(param)] = self._make_buffer(param)
            for param, gradient, settings, buffer in planned:
                lr, momentum, dampening, weight_decay, nesterov, maximize = settings
                if momentum and buffer is None:
                    buffer = made[id(param)]
                first = momentum and id(param) in self._fresh
                self._fresh.discard(id(param))
                if not (nesterov or maximize or dampening and not first) and \
                        fused(param, gradient, buffer if momentum else None):
                    # a fresh buffer is zeros: momentum * 0 + g is PyTorch's clone of g
                    sgd_step(param, gradient, buffer if momentum else None, lr, momentum,
                             weight_decay)
                    continue
                # torch/optim/sgd.py, _single_tensor_sgd, with the runtime's own operations:
                # every value was checked above.
                if maximize:
                    gradient = elementwise.neg(gradient)
                if weight_decay:
                    gradient = elementwise.add_scaled(gradient, param, weight_decay)
                if momentum:
                    if first:  # zeros + g: the clone of g
                        elementwise.add_scaled_(<TensorCore>buffer, gradient, 1)
                    else:
                        elementwise.imul(<TensorCore>buffer, momentum)
                        elementwise.add_scaled_(<TensorCore>buffer, gradient, 1 - dampening)
                    if nesterov:
                        gradient = elementwise.add_scaled(gradient, buffer, momentum)
                    else:
                        gradient = buffer
                elementwise.sub_scaled_(<TensorCore>param, gradient, lr)


cdef int _check_state(object entry, TensorCore param, str place, str name, tuple keys,
                      tuple counters, str device_rule) except -1:
    """The state of param before a step changes anything (Note [Checked steps]): a dict with
    keys, each a tensor like param, and counters ("step" and any the optimiser adds), each a
    floating 0-d tensor in writable memory, on param's device unless device_rule (the message
    where it is not) is empty."""
    if not isinstance(entry, dict):
        raise TypeError(f"the state of {place} must be a dict, got {type(entry).__name__}")
    for key in keys:
        if key not in entry:
            raise ValueError(f"the state of {place} has no {key!r}")
        _check_like(entry[key], param, key, place, f"{name}.step()")
    cdef TensorCore counter
    for key in counters:
        value = entry.get(key)
        if not isinstance(value, TensorCore) or (<TensorCore>value).sizes != () or \
                not (<TensorCore>value).dtype_object.floating:
            raise ValueError(f"the {key} of {place} must be a floating 0-d tensor")
        counter = value
        if device_rule and counter.device_index != param.device_index:
            raise ValueError(f"{device_rule} ({place})")
        counter.c_check_in_place(f"{name}.step()")
    return 0


cdef object _loaded_step(TensorCore param, object value, str where, bint on_device):
    """A loaded step count: a 0-d float32 tensor (a number, PyTorch's older format, too), on
    param's device when on_device, else where it was (PyTorch's
    _process_value_according_to_param_policy)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        value = factories.tensor(float(value), named_dtype("float32"), None, False)
    if not isinstance(value, TensorCore) or (<TensorCore>value).sizes != ():
        raise ValueError(f"{where} must be a 0-d tensor (the step count)")
    return copies.to(value, _device_text(param) if on_device else None,
                     named_dtype("float32"), False, True)


cdef int _check_shape(TensorCore param, object value, str where) except -1:
    if not isinstance(value, TensorCore) or (<TensorCore>value).sizes != param.sizes:
        raise ValueError(f"{where} must be a tensor of the parameter's shape "
                         f"{list(param.sizes)}")
    return 0


cdef tuple _betas(object betas, str where):
    if not isinstance(betas, (tuple, list)):
        raise TypeError(f"betas{where} must be a tuple of two floats, got "
                        f"{errors.shown(betas)}")
    if len(betas) != 2:
        raise ValueError(f"betas{where} must be a tuple of two floats, got "
                         f"{errors.shown(betas)}")
    checked = []
    for index, beta in enumerate(betas):
        if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
            raise TypeError(f"betas[{index}]{where} must be a float, got "
                            f"{type(beta).__name__}")
        if not 0.0 <= beta < 1.0:  # NaN fails too
            raise ValueError(f"Invalid beta parameter at index {index}: {beta}")
        checked.append(float(beta))
    return tuple(checked)


cdef object _scalar_like(object value, TensorCore param):
    """A 0-d tensor of the step's float32 arithmetic, in param's dtype (PyTorch's 0-d
    operand does not promote a tensor of the same kind)."""
    if (<TensorCore>value).dtype_object is param.dtype_object:
        return value
    return copies.to(value, None, param.dtype_object, False, False)


class CountedCore(OptimizerCore):
    """An optimiser whose state per parameter holds "step", a 0-d float32 step count, and
    tensors like the parameter, made at its first eager step (PyTorch's _init_group): every
    optimiser but SGD. Where the subclass keeps the count on the parameter's device
    (_on_device: capturable, or always for Adagrad and ASGD) and allows it (_capturable), the
    step can be captured into a CUDA graph (Note [Capturable Adam]). A subclass names _shaped
    (its state tensors like the parameter; _state_keys, those a group's settings make, is all
    of them unless overridden) and gives _update (one parameter's step, after every check),
    and may add 0-d float32 counters to "step" (_counters: each key and its starting
    value)."""

    _counters = {"step": 0.0}
    _shaped = ()

    def _state_keys(self, tuple settings):
        return self._shaped

    def _counts_on_device(self, dict group):
        """Where a loaded count goes: the parameter's device when capturable, else where it was
        (PyTorch's _process_value_according_to_param_policy for "step")."""
        return group["capturable"]

    def _loaded(self, TensorCore param, dict group, str key, value, str where):
        if key in self._counters:  # float32
            return _loaded_step(param, value, where, self._counts_on_device(group))
        if key in self._shaped:
            _check_shape(param, value, where)
        return OptimizerCore._loaded(self, param, group, key, value, where)

    def c_step(self):
        cdef TensorCore param
        name = type(self).__name__
        with autograd.no_grad_block():
            planned, missing = [], []
            for param, grad, number, index, settings in self._stepped(name):
                on_device = self._on_device(settings)
                place = _place(number, index)
                capturing = _capturing(param)
                if capturing and not self._capturable(settings):
                    raise RuntimeError(f"Attempting CUDA graph capture of step() for an "
                                       f"instance of {name} but param_groups' capturable is "
                                       "False.")
                entry = self.state.get(param)
                if not entry:
                    if capturing:
                        raise RuntimeError(
                            f"{name}.step(): {place} has no state yet, and one made during a "
                            "CUDA graph capture would be zeroed again on every replay; run "
                            "one step() eagerly before the capture (PyTorch's warm-up)")
                    missing.append((param, settings))
                else:
                    _check_state(entry, param, place, name, self._state_keys(settings),
                                 tuple(self._counters), self._device_rule() if on_device else "")
                planned.append((param, grad, settings))
            for param, settings in missing:  # eager only; PyTorch's _init_group
                device = _device_text(param) if self._on_device(settings) else "cpu"
                entry = {key: factories.full((), self._counter_start(key, settings),
                                             named_dtype("float32"), device, False)
                         for key in self._counters}
                for key in self._state_keys(settings):
                    entry[key] = self._new_state(param, key, settings)
                self.state[param] = entry
            for param, grad, settings in planned:
                self._update(param, grad, self.state[param], settings)

    def _capturable(self, tuple settings):
        """Whether a step may be captured: where the counts live on the device, unless the
        subclass keeps them there always (ASGD) and asks for capturable=True as well."""
        return self._on_device(settings)

    def _counter_start(self, str key, tuple settings):
        return self._counters[key]

    def _device_rule(self):
        return CAPTURABLE_DEVICE

    def _new_state(self, TensorCore param, str key, tuple settings):
        return factories.zeros_like(param, None, None, False)


class AdamCore(CountedCore):
    """Adam and AdamW (decoupled weight decay), PyTorch's update rule, with PyTorch's
    capturable step (Note [Capturable Adam])."""

    def init(self, params, lr, betas, eps, weight_decay, amsgrad, foreach, maximize,
             capturable, decoupled_weight_decay):
        defaults = dict(ADAM_DEFAULTS)
        defaults.update(lr=lr, betas=(0.9, 0.999) if betas is None else betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                        capturable=capturable, decoupled_weight_decay=decoupled_weight_decay)
        self._settings(defaults, "")  # PyTorch's order: lr, eps, betas, weight_decay
        self._setup(params, defaults)

    def _settings(self, dict group, str where):
        """(lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, capturable, decoupled)
        of group, checked; where holds %s for the key."""
        lr = _number(group, "lr", where)
        eps = _number(group, "eps", where)
        beta1, beta2 = _betas(group["betas"], where.replace("%s", "betas"))
        weight_decay = _number(group, "weight_decay", where)
        flags = tuple(_flag(group, key, where) for key in
                      ("amsgrad", "maximize", "capturable", "decoupled_weight_decay"))
        _unoffered(group, where)
        return (lr, beta1, beta2, eps, weight_decay) + flags

    def _on_device(self, tuple settings):
        return settings[7]  # capturable

    _shaped = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")

    def _state_keys(self, tuple settings):
        return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if settings[5] else ())

    def _update(self, TensorCore param, TensorCore gradient, dict entry, tuple settings):
        adam_step(param, gradient, entry, settings)


class AdamWCore(AdamCore):
    """AdamW: Adam with decoupled weight decay (PyTorch's AdamW is Adam with
    decoupled_weight_decay=True)."""

    def init(self, params, lr, betas, eps, weight_decay, amsgrad, foreach, maximize,
             capturable):
        AdamCore.init(self, params, lr, betas, eps, weight_decay, amsgrad, foreach, maximize,
                      capturable, True)


cdef int adam_step(TensorCore param, TensorCore grad, dict entry, tuple settings) except -1:
    """torch/optim/adam.py, _single_tensor_adam, with the runtime's own operations: the
    capturable branch reads the step count on the device (Note [Capturable Adam])."""
    lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, capturable, decoupled = settings
    cdef TensorCore exp_avg = entry["exp_avg"], exp_avg_sq = entry["exp_avg_sq"]
    cdef TensorCore step_t = entry["step"]
    if maximize:
        grad = elementwise.neg(grad)
    elementwise.iadd(step_t, 1)
    if weight_decay:
        if decoupled:
            elementwise.imul(param, 1 - lr * weight_decay)
        else:
            grad = elementwise.add_scaled(grad, param, weight_decay)
    # exp_avg.lerp_(grad, 1 - beta1): exp_avg + (1 - beta1) * (grad - exp_avg)
    elementwise.add_scaled_(exp_avg, elementwise.sub(grad, exp_avg), 1 - beta1)
    elementwise.imul(exp_avg_sq, beta2)
    elementwise.add_scaled_(exp_avg_sq, elementwise.mul(grad, grad), 1 - beta2)
    second = exp_avg_sq
    if amsgrad:
        second = entry["max_exp_avg_sq"]
        copies.copy_(<TensorCore>second, elementwise.where(
            elementwise.gt(exp_avg_sq, second), exp_avg_sq, second), False)
    if capturable:
        bias_correction1 = elementwise.rsub(elementwise.rpow(step_t, beta1), 1)
        bias_correction2 = elementwise.rsub(elementwise.rpow(step_t, beta2), 1)
        step_size_neg = elementwise.neg(elementwise.rtruediv(bias_correction1, lr))
        bias_correction2_sqrt = elementwise.sqrt(bias_correction2)
        scale = _scalar_like(elementwise.mul(bias_correction2_sqrt, step_size_neg), param)
        offset = _scalar_like(elementwise.rtruediv(step_size_neg, eps), param)
        denom = elementwise.truediv(elementwise.sqrt(second), scale)
        elementwise.iadd(denom, offset)
        elementwise.iadd(param, elementwise.truediv(exp_avg, denom))
    else:
        step = copies.python_float(step_t)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        denom = elementwise.truediv(elementwise.sqrt(second), bias_correction2 ** 0.5)
        elementwise.iadd(denom, eps)
        elementwise.sub_scaled_(param, elementwise.truediv(exp_avg, denom), step_size)
    return 0


class MomentsCore(CountedCore):
    """Adamax, NAdam and RAdam: Adam's lr, eps, betas and weight_decay, checked in PyTorch's
    order, then the optimiser's other numbers (_numbers) and flags (_flags, "capturable" last);
    the state "exp_avg" and a second moment (_shaped), made at the first eager step, with the
    step count on the device when capturable (Note [Capturable Adam])."""

    _numbers = ()
    _flags = ("maximize", "capturable")

    def _setup_moments(self, params, tuple table, dict given):
        defaults = dict(table)
        if given["betas"] is None:
            given["betas"] = defaults["betas"]
        defaults.update(given)
        self._settings(defaults, "")
        self._setup(params, defaults)

    def _settings(self, dict group, str where):
        lr = _number(group, "lr", where)
        eps = _number(group, "eps", where)
        beta1, beta2 = _betas(group["betas"], where.replace("%s", "betas"))
        weight_decay = _number(group, "weight_decay", where)
        numbers = tuple(_number(group, key, where) for key in self._numbers)
        flags = tuple(_flag(group, key, where) for key in self._flags)
        _unoffered(group, where)
        return (lr, beta1, beta2, eps, weight_decay) + numbers + flags

    def _on_device(self, tuple settings):
        return settings[-1]  # capturable



class AdamaxCore(MomentsCore):
    """Adamax (Kingma and Ba, 2015, section 7.1: Adam with the infinity norm), PyTorch's update
    rule, with PyTorch's capturable step."""

    _shaped = ("exp_avg", "exp_inf")

    def init(self, params, lr, betas, eps, weight_decay, foreach, maximize, capturable):
        self._setup_moments(params, ADAMAX_DEFAULTS, dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
            maximize=maximize, capturable=capturable))

    def _update(self, TensorCore param, TensorCore gradient, dict entry, tuple settings):
        adamax_step(param, gradient, entry, settings)


class NAdamCore(MomentsCore):
    """NAdam (Dozat, 2016: Adam with Nesterov momentum), PyTorch's update rule with its
    momentum_decay schedule, with PyTorch's capturable step; "mu_product", the product of the
    momentum schedule so far, is a 0-d float32 counter beside "step"."""

    _shaped = ("exp_avg", "exp_avg_sq")
    _numbers = ("momentum_decay",)
    _flags = ("decoupled_weight_decay", "maximize", "capturable")
    _counters = {"step": 0.0, "mu_product": 1.0}

    def init(self, params, lr, betas, eps, weight_decay, momentum_decay, decoupled_weight_decay,
             foreach, maximize, capturable):
        self._setup_moments(params, NADAM_DEFAULTS, dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
            momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
            foreach=foreach, maximize=maximize, capturable=capturable))

    def _update(self, TensorCore param, TensorCore gradient, dict entry, tuple settings):
        nadam_step(param, gradient, entry, settings)


class RAdamCore(MomentsCore):
    """RAdam (Liu et al., 2019: Adam with the variance of its adaptive rate rectified),
    PyTorch's update rule, with PyTorch's capturable step."""

    _shaped = ("exp_avg", "exp_avg_sq")
    _flags = ("decoupled_weight_decay", "maximize", "capturable")

    def init(self, params, lr, betas, eps, weight_decay, decoupled_weight_decay, foreach,
             maximize, capturable):
        self._setup_moments(params, RADAM_DEFAULTS, dict(
            lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
            decoupled_weight_decay=decoupled_weight_decay, foreach=foreach, maximize=maximize,
            capturable=capturable))

    def _update(self, TensorCore param, TensorCore gradient, dict entry, tuple settings):
        radam_step(param, gradient, entry, settings)


cdef object _decayed(TensorCore param, object grad, object weight_decay, bint decoupled,
                     object lr):
    """The gradient after weight decay: L2 (weight_decay * param added to it), or decoupled
    (param scaled by 1 - lr * weight_decay, AdamW's), as PyTorch's optimisers."""
    if weight_decay:
        if decoupled:
            elementwise.imul(param, 1 - lr * weight_decay)
        else:
            return elementwise.add_scaled(grad, param, weight_decay)
    return grad


cdef int _second_moment_(TensorCore exp_avg_sq, object grad, object beta2) except -1:
    """exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2), rounded as PyTorch's."""
    elementwise.imul(exp_avg_sq, beta2)
    elementwise.iadd(exp_avg_sq, elementwise.mul(elementwise.mul(grad, 1 - beta2), grad))
    return 0


cdef int adamax_step(TensorCore param, TensorCore grad, dict entry, tuple settings) except -1:
    """torch/optim/adamax.py, _single_tensor_adamax (not differentiable), with the runtime's
    own operations; the capturable branch corrects by the count on the device."""
    lr, beta1, beta2, eps, weight_decay, maximize, capturable = settings
    cdef TensorCore exp_avg = entry["exp_avg"], exp_inf = entry["exp_inf"]
    cdef TensorCore step_t = entry["step"]
    if maximize:
        grad = elementwise.neg(grad)
    elementwise.iadd(step_t, 1)
    grad = _decayed(param, grad, weight_decay, False, lr)
    lerp_rounded_(exp_avg, grad, 1 - beta1)
    elementwise.imul(exp_inf, beta2)  # torch.maximum(exp_inf * beta2, |grad| + eps)
    copies.copy_(exp_inf, elementwise.maximum(exp_inf, elementwise.add(
        elementwise.absolute(grad), eps)), False)
    if capturable:  # param += exp_avg / (exp_inf * (beta1 ** step - 1) / lr)
        negative_correction = elementwise.truediv(
            elementwise.sub(elementwise.rpow(step_t, beta1), 1), lr)
        denom = elementwise.mul(exp_inf, _scalar_like(negative_correction, param))
        elementwise.iadd(param, elementwise.truediv(exp_avg, denom))
    else:  # param.addcdiv_(exp_avg, exp_inf, value=-clr)
        clr = lr / (1 - beta1 ** copies.python_float(step_t))
        elementwise.iadd(param, elementwise.truediv(elementwise.mul(exp_avg, -clr), exp_inf))
    return 0


cdef object _momentum_schedule(object step, object beta1, object momentum_decay):
    """NAdam's mu at step: beta1 * (1 - 0.5 * 0.96 ** (step * momentum_decay)), for a Python
    float or a 0-d tensor step, in PyTorch's order of operations."""
    if isinstance(step, TensorCore):
        decay = elementwise.rpow(elementwise.mul(step, momentum_decay), 0.96)
        return elementwise.mul(elementwise.rsub(elementwise.mul(decay, 0.5), 1.0), beta1)
    return beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))


cdef int nadam_step(TensorCore param, TensorCore grad, dict entry, tuple settings) except -1:
    """torch/optim/nadam.py, _single_tensor_nadam (not differentiable), with the runtime's own
    operations; the capturable branch computes the schedule from the count on the device."""
    (lr, beta1, beta2, eps, weight_decay, momentum_decay, decoupled, maximize,
     capturable) = settings
    cdef TensorCore exp_avg = entry["exp_avg"], exp_avg_sq = entry["exp_avg_sq"]
    cdef TensorCore step_t = entry["step"], mu_product = entry["mu_product"]
    if maximize:
        grad = elementwise.neg(grad)
    elementwise.iadd(step_t, 1)
    step = step_t if capturable else copies.python_float(step_t)
    bias_correction2 = elementwise.rsub(elementwise.rpow(step_t, beta2), 1) if capturable \
        else 1 - beta2 ** step
    grad = _decayed(param, grad, weight_decay, decoupled, lr)
    mu = _momentum_schedule(step, beta1, momentum_decay)
    mu_next = _momentum_schedule(elementwise.add(step_t, 1) if capturable else step + 1,
                                 beta1, momentum_decay)
    elementwise.imul(mu_product, mu)
    lerp_rounded_(exp_avg, grad, 1 - beta1)
    _second_moment_(exp_avg_sq, grad, beta2)
    denom = elementwise.sqrt(elementwise.truediv(exp_avg_sq, _scalar_like(
        bias_correction2, param) if capturable else bias_correction2))
    if capturable:  # the step sizes as 0-d tensors, each multiplied in, then divided
        denom = elementwise.add(denom, eps)
        mu_product_next = elementwise.mul(mu_product, mu_next)
        grad_size = elementwise.truediv(elementwise.mul(elementwise.rsub(mu, 1.0), -lr),
                                        elementwise.rsub(mu_product, 1.0))
        avg_size = elementwise.truediv(elementwise.mul(mu_next, -lr),
                                       elementwise.rsub(mu_product_next, 1.0))
        elementwise.iadd(param, elementwise.truediv(
            elementwise.mul(grad, _scalar_like(grad_size, param)), denom))
        elementwise.iadd(param, elementwise.truediv(
            elementwise.mul(exp_avg, _scalar_like(avg_size, param)), denom))
    else:  # two addcdiv_ with the sizes as values, the product read on the host
        product = copies.python_float(mu_product)
        mu_product_next = product * mu_next
        elementwise.iadd(denom, eps)
        elementwise.iadd(param, elementwise.truediv(
            elementwise.mul(grad, -lr * (1.0 - mu) / (1.0 - product)), denom))
        elementwise.iadd(param, elementwise.truediv(
            elementwise.mul(exp_avg, (-lr * mu_next) / (1.0 - mu_product_next)), denom))
    return 0


cdef int radam_step(TensorCore param, TensorCore grad, dict entry, tuple settings) except -1:
    """torch/optim/radam.py, _single_tensor_radam (not differentiable), with the runtime's own
    operations; the capturable branch rectifies by the count on the device, choosing with
    where() what the eager branch chooses on the host."""
    lr, beta1, beta2, eps, weight_decay, decoupled, maximize, capturable = settings
    cdef TensorCore exp_avg = entry["exp_avg"], exp_avg_sq = entry["exp_avg_sq"]
    cdef TensorCore step_t = entry["step"]
    if maximize:
        grad = elementwise.neg(grad)
    elementwise.iadd(step_t, 1)
    grad = _decayed(param, grad, weight_decay, decoupled, lr)
    lerp_rounded_(exp_avg, grad, 1 - beta1)
    _second_moment_(exp_avg_sq, grad, beta2)
    rho_inf = 2 / (1 - beta2) - 1  # the largest length of the approximated SMA
    if capturable:
        bias_correction1 = elementwise.rsub(elementwise.rpow(step_t, beta1), 1)
        bias_correction2 = elementwise.rsub(elementwise.rpow(step_t, beta2), 1)
        corrected = elementwise.truediv(exp_avg, _scalar_like(bias_correction1, param))
        rho_t = elementwise.rsub(elementwise.truediv(elementwise.mul(
            elementwise.mul(step_t, 2), elementwise.rpow(step_t, beta2)), bias_correction2),
            rho_inf)
        rect = elementwise.sqrt(elementwise.truediv(elementwise.mul(elementwise.mul(
            elementwise.sub(rho_t, 4), elementwise.sub(rho_t, 2)), rho_inf),
            elementwise.mul(rho_t, (rho_inf - 4) * (rho_inf - 2))))
        adaptive = elementwise.truediv(_scalar_like(elementwise.sqrt(bias_correction2), param),
                                       elementwise.add(elementwise.sqrt(exp_avg_sq), eps))
        update = elementwise.where(elementwise.gt(rho_t, 5.0), elementwise.mul(
            _scalar_like(rect, param), adaptive), 1.0)
        elementwise.isub(param, elementwise.mul(elementwise.mul(corrected, lr), update))
        return 0
    step = copies.python_float(step_t)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    corrected = elementwise.truediv(exp_avg, bias_correction1)
    rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
    if rho_t > 5.0:  # the variance is tractable: rectified adaptive step
        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) \
            ** 0.5
        adaptive = elementwise.rtruediv(elementwise.add(elementwise.sqrt(exp_avg_sq), eps),
                                        bias_correction2 ** 0.5)
        elementwise.isub(param, elementwise.mul(elementwise.mul(elementwise.mul(
            corrected, lr), adaptive), rect))
    else:  # SGD with momentum
        elementwise.isub(param, elementwise.mul(corrected, lr))
    return 0


class RMSpropCore(CountedCore):
    """RMSprop (Hinton's lecture notes; centered as Graves, 2013), PyTorch's update rule, with
    PyTorch's capturable step (the step count on the device; RMSprop's update does not read
    it)."""

    def init(self, params, lr, alpha, eps, weight_decay, momentum, centered, capturable,
             foreach, maximize):
        defaults = dict(RMSPROP_DEFAULTS)
        defaults.update(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                        momentum=momentum, centered=centered, capturable=capturable,
                        foreach=foreach, maximize=maximize)
        self._settings(defaults, "")
        self._setup(params, defaults)

    def _settings(self, dict group, str where):
        """(lr, alpha, eps, weight_decay, momentum, centered, maximize, capturable) of group,
        checked in PyTorch's order (lr, eps, momentum, weight_decay, alpha); where holds %s
        for the key."""
        lr = _number(group, "lr", where)
        eps = _number(group, "eps", where)
        momentum = _number(group, "momentum", where)
        weight_decay = _number(group, "weight_decay", where)
        alpha = _number(group, "alpha", where)
        flags = tuple(_flag(group, key, where) for key in ("centered", "maximize", "capturable"))
        _unoffered(group, where)
        return (lr, alpha, eps, weight_decay, momentum) + flags

    def _on_device(self, tuple settings):
        return settings[7]

    _shaped = ("square_avg", "momentum_buffer", "grad_avg")

    def _state_keys(self, tuple settings):
        # PyTorch's _init_group: the buffer with momentum > 0, the average with centered
        return ("square_avg",) + (("momentum_buffer",) if settings[4] > 0 else ()) + \
            (("grad_avg",) if settings[5] else ())

    def _update(self, TensorCore param, TensorCore gradient, dict entry, tuple settings):
        rmsprop_step(param, gradient, entry, settings)


cdef int rmsprop_step(TensorCore param, TensorCore grad, dict entry, tuple settings) except -1:
    """torch/optim/rmsprop.py, _single_tensor_rmsprop, with the runtime's own in-place
    operations (each a kernel a capture records)."""
    lr, alpha, eps, weight_decay, momentum, centered, maximize, _ = settings
    cdef TensorCore square_avg = entry["square_avg"], grad_avg
    if maximize:
        grad = elementwise.neg(grad)
    elementwise.iadd(<TensorCore>entry["step"], 1)
    if weight_decay:
        grad = elementwise.add_scaled(grad, param, weight_decay)
    elementwise.imul(square_avg, alpha)
    # PyTorch's addcmul_ and addcdiv_ kernels round (value * tensor1) * tensor2 (or /): the
    # same order here, so that the steps match PyTorch's to the last bits.
    elementwise.iadd(square_avg, elementwise.mul(elementwise.mul(grad, 1 - alpha), grad))
    if centered:
        grad_avg = entry["grad_avg"]
        lerp_rounded_(grad_avg, grad, 1 - alpha)
        avg = elementwise.sqrt_(elementwise.sub(square_avg, elementwise.mul(grad_avg,
                                                                            grad_avg)))
    else:
        avg = elementwise.sqrt(square_avg)
    elementwise.iadd(avg, eps)
    if momentum > 0:
        buffer = entry["momentum_buffer"]
        elementwise.imul(buffer, momentum)
        elementwise.iadd(buffer, elementwise.truediv(grad, avg))
        elementwise.sub_scaled_(param, buffer, lr)
    else:
        elementwise.iadd(param, elementwise.truediv(elementwise.mul(grad, -lr), avg))
    return 0


cdef int lerp_rounded_(TensorCore tensor, TensorCore end, double weight) except -1:
    """tensor.lerp_(end, weight) rounded as PyTorch's kernel: tensor + weight * (end - tensor)
    for a weight below 0.5, else end - (1 - weight) * (end - tensor)."""
    if weight < 0.5:
        elementwise.lerp_(tensor, end, weight)
    else:
        copies.copy_(tensor, elementwise.sub_scaled(end, elementwise.sub(end, tensor),
                                                    1 - weight), False)
    return 0


class AdadeltaCore(CountedCore):
    """Adadelta (Zeiler, 2012), PyTorch's update rule, with PyTorch's capturable step (the
    step count on the device; Adadelta's update does not read it)."""

    def init(self, params, lr, rho, eps, weight_decay, foreach, capturable, maximize):
        defaults = dict(ADADELTA_DEFAULTS)
        defaults.update(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        capturable=capturable, maximize=maximize)
        self._settings(defaults, "")
        self._setup(params, defaults)

    def _settings(self, dict group, str where):
        """(lr, rho, eps, weight_decay, maximize, capturable) of group, checked in PyTorch's
        order (lr, rho, eps, weight_decay); where holds %s for the key."""
        lr = _number(group, "lr", where)
        rho = _number(group, "rho", where)
        if rho > 1.0:  # PyTorch's 0 <= rho <= 1
            raise ValueError(f"Invalid rho value: {errors.shown(group['rho'])}"
                             f"{where.replace('%s', 'rho')}; it must be in [0, 1]")
        eps = _number(group, "eps", where)
        weight_decay = _number(group, "weight_decay", where)
        flags = tuple(_flag(group, key, where) for key in ("maximize", "capturable"))
        _unoffered(group, where)
        return (lr, rho, eps, weight_decay) + flags

    def _on_device(self, tuple settings):
        return settings[-1]

    _shaped = ("square_avg", "acc_delta")

    def _update(self, TensorCore param, TensorCore gradient, dict entry, tuple settings):
        adadelta_step(param, gradient, entry, settings)


cdef int adadelta_step(TensorCore param, TensorCore grad, dict entry, tuple settings) except -1:
    """torch/optim/adadelta.py, _single_tensor_adadelta (not differentiable), with the
    runtime's own in-place operations."""
    lr, rho, eps, weight_decay, maximize, _ = settings
    cdef TensorCore square_avg = entry["square_avg"], acc_delta = entry["acc_delta"]
    elementwise.iadd(<TensorCore>entry["step"], 1)
    if maximize:
        grad = elementwise.neg(grad)
    grad = _decayed(param, grad, weight_decay, False, lr)
    _second_moment_(square_avg, grad, rho)
    std = elementwise.sqrt_(elementwise.add(square_avg, eps))
    delta = elementwise.sqrt_(elementwise.add(acc_delta, eps))
    elementwise.imul(elementwise.itruediv(delta, std), grad)
    _second_moment_(acc_delta, delta, rho)
    elementwise.add_scaled_(param, delta, -lr)
    return 0


cdef tuple _pair(object value, str key, str where):
    """value as a tuple of two floats (Rprop's etas and step_sizes)."""
    where = where.replace("%s", key)
    if not isinstance(value, (tuple, list)):
        raise TypeError(f"{key}{where} must be a tuple of two floats, got "
                        f"{errors.shown(value)}")
    if len(value) != 2:
        raise ValueError(f"{key}{where} must be a tuple of two floats, got "
                         f"{errors.shown(value)}")
    for index, number in enumerate(value):
        if isinstance(number, bool) or not isinstance(number, numbers.Real):
            raise TypeError(f"{key}[{index}]{where} must be a float, got "
                            f"{type(number).__name__}")
    return float(value[0]), float(value[1])


class RpropCore(CountedCore):
    """Rprop (Riedmiller and Braun, 1993), PyTorch's update rule, with PyTorch's capturable
    step. The masked assignments of PyTorch's eager branch and the where() of its capturable
    one give the same numbers, so every step here is where(), which a capture takes."""

    def init(self, params, lr, etas, step_sizes, capturable, foreach, maximize):
        defaults = dict(RPROP_DEFAULTS)
        defaults.update(lr=lr, foreach=foreach, maximize=maximize, capturable=capturable)
        if etas is not None:
            defaults["etas"] = etas
        if step_sizes is not None:
            defaults["step_sizes"] = step_sizes
        self._settings(defaults, "")
        self._setup(params, defaults)

    def _settings(self, dict group, str where):
        """(lr, etaminus, etaplus, step_size_min, step_size_max, maximize, capturable) of group,
        checked in PyTorch's order (lr, etas); where holds %s for the key."""
        lr = _number(group, "lr", where)
        etaminus, etaplus = _pair(group["etas"], "etas", where)
        if not 0.0 < etaminus < 1.0 < etaplus:
            raise ValueError(f"Invalid eta values: {etaminus}, {etaplus}"
                             f"{where.replace('%s', 'etas')}; they must be 0 < etaminus < 1 < "
                             "etaplus")
        step_size_min, step_size_max = _pair(group["step_sizes"], "step_sizes", where)
        flags = tuple(_flag(group, key, where) for key in ("maximize", "capturable"))
        _unoffered(group, where)
        return (lr, etaminus, etaplus, step_size_min, step_size_max) + flags

    def _on_device(self, tuple settings):
        return settings[-1]

    _shaped = ("prev", "step_size")

    def _new_state(self, TensorCore param, str key, tuple settings):
        if key == "step_size":  # PyTorch's _init_group: the group's lr, of the grad's shape
            return factories.full_like(param, settings[0], None, None, False)
        return factories.zeros_like(param, None, None, False)

    def _update(self, TensorCore param, TensorCore gradient, dict entry, tuple settings):
        rprop_step(param, gradient, entry, settings)


cdef int rprop_step(TensorCore param, TensorCore grad, dict entry, tuple settings) except -1:
    """torch/optim/rprop.py, _single_tensor_rprop's capturable branch (not differentiable),
    with the runtime's own operations."""
    lr, etaminus, etaplus, step_size_min, step_size_max, maximize, _ = settings
    cdef TensorCore prev = entry["prev"], step_size = entry["step_size"]
    elementwise.iadd(<TensorCore>entry["step"], 1)
    if maximize:
        grad = elementwise.neg(grad)
    # the change of each step size: etaplus where the gradient kept its sign, etaminus where
    # it changed, 1 where either is 0 (NaN stays NaN, as PyTorch's)
    sign = elementwise.sign(elementwise.mul(grad, prev))
    sign = elementwise.where(elementwise.gt(sign, 0), etaplus, sign)
    sign = elementwise.where(elementwise.lt(sign, 0), etaminus, sign)
    sign = elementwise.where(elementwise.eq(sign, 0), 1, sign)
    elementwise.clamp_(elementwise.imul(step_size, sign), step_size_min, step_size_max)
    # where the sign changed, no step and no memory of the gradient (PyTorch's grad[...] = 0)
    grad = elementwise.where(elementwise.eq(sign, etaminus), 0, grad)
    elementwise.isub(param, elementwise.mul(elementwise.sign(grad), step_size))
    copies.copy_(prev, grad, False)
    return 0


cdef object _real(dict group, str key, str where):
    """group[key] as a float, any real number (ASGD's lambd, alpha and t0: PyTorch checks none
    of them)."""
    value = group[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{key}{where.replace('%s', key)} must be a float (or an int), got "
                        f"{type(value).__name__} ({errors.shown(value)})")
    return float(value)


class ASGDCore(CountedCore):
    """Averaged SGD (Polyak and Juditsky, 1992), PyTorch's update rule. Its counts ("step",
    "eta", the learning rate, and "mu", the averaging weight) are 0-d float32 tensors on the
    parameter's device, as PyTorch's _init_group makes them whatever capturable says; with
    capturable=True the step reads them there (PyTorch's capturable branch), so it can be
    captured, else on the host."""

    _counters = {"step": 0.0, "eta": None, "mu": 1.0}

    def init(self, params, lr, lambd, alpha, t0, weight_decay, foreach, maximize, capturable):
        defaults = dict(ASGD_DEFAULTS)
        defaults.update(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, capturable=capturable)
        self._settings(defaults, "")
        self._setup(params, defaults)

    def _settings(self, dict group, str where):
        """(lr, lambd, alpha, t0, weight_decay, maximize, capturable) of group, lr and
        weight_decay checked in PyTorch's order; where holds %s for the key."""
        lr = _number(group, "lr", where)
        lambd, alpha, t0 = (_real(group, key, where) for key in ("lambd", "alpha", "t0"))
        weight_decay = _number(group, "weight_decay", where)
        flags = tuple(_flag(group, key, where) for key in ("maximize", "capturable"))
        _unoffered(group, where)
        return (lr, lambd, alpha, t0, weight_decay) + flags

    def _on_device(self, tuple settings):
        return True

    def _capturable(self, tuple settings):
        return settings[-1]

    def _device_rule(self):
        return "ASGD keeps its step, eta and mu on the parameter's device"

    def _counter_start(self, str key, tuple settings):
        return settings[0] if key == "eta" else self._counters[key]  # eta starts at lr

    _shaped = ("ax",)

    def _counts_on_device(self, dict group):
        return True

    def _update(self, TensorCore param, TensorCore gradient, dict entry, tuple settings):
        asgd_step(param, gradient, entry, settings)


cdef int asgd_step(TensorCore param, TensorCore grad, dict entry, tuple settings) except -1:
    """torch/optim/asgd.py, _single_tensor_asgd (not differentiable), with the runtime's own
    operations: the capturable branch computes eta and mu from the count on the device, the
    eager one reads them on the host."""
    lr, lambd, alpha, t0, weight_decay, maximize, capturable = settings
    cdef TensorCore step_t = entry["step"], eta = entry["eta"], mu = entry["mu"]
    cdef TensorCore ax = entry["ax"]
    if maximize:
        grad = elementwise.neg(grad)
    elementwise.iadd(step_t, 1)
    grad = _decayed(param, grad, weight_decay, False, lr)
    if capturable:
        elementwise.imul(param, _scalar_like(elementwise.rsub(elementwise.mul(eta, lambd), 1),
                                             param))
        elementwise.isub(param, elementwise.mul(grad, _scalar_like(eta, param)))
        elementwise.iadd(ax, elementwise.imul(elementwise.sub(param, ax),
                                              _scalar_like(mu, param)))
        # eta = lr / (1 + lambd * lr * step) ** alpha, mu = 1 / max(step - t0, 1)
        copies.copy_(eta, elementwise.rtruediv(elementwise.power(elementwise.radd(
            elementwise.mul(step_t, lambd * lr), 1), alpha), lr), False)
        copies.copy_(mu, elementwise.rtruediv(elementwise.maximum(
            elementwise.sub(step_t, t0), factories.ones_like(step_t, None, None, False)), 1),
            False)
        return 0
    eta_value = copies.python_float(eta)
    elementwise.imul(param, 1 - lambd * eta_value)  # the decay
    elementwise.add_scaled_(param, grad, -eta_value)
    if copies.python_float(mu) != 1:  # the running average; at mu 1 the parameter itself
        elementwise.iadd(ax, elementwise.imul(elementwise.sub(param, ax),
                                              _scalar_like(mu, param)))
    else:
        copies.copy_(ax, param, False)
    step = copies.python_float(step_t)
    copies.fill_(eta, lr / ((1 + lambd * lr * step) ** alpha))
    copies.fill_(mu, 1 / max(1, step - t0))
    return 0


class AdagradCore(CountedCore):
    """Adagrad (Duchi et al., 2011), PyTorch's update rule. The state is made with the
    optimiser, as PyTorch's, and the step count lives on the parameter's device, where
    lr_decay's learning rate is computed from it (Note [Capturable Adagrad])."""

    def init(self, params, lr, lr_decay, weight_decay, initial_accumulator_value, eps,
             foreach, maximize):
        defaults = dict(ADAGRAD_DEFAULTS)
        defaults.update(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, eps=eps,
                        foreach=foreach, maximize=maximize)
        self._settings(defaults, "")
        self._setup(params, defaults)

    def _settings(self, dict group, str where):
        """(lr, lr_decay, eps, weight_decay, maximize) of group, checked in PyTorch's order
        (lr, lr_decay, weight_decay, initial_accumulator_value, eps); where holds %s for the
        key."""
        lr = _number(group, "lr", where)
        lr_decay = _number(group, "lr_decay", where)
        weight_decay = _number(group, "weight_decay", where)
        _number(group, "initial_accumulator_value", where)
        eps = _number(group, "eps", where)
        maximize = _flag(group, "maximize", where)
        _unoffered(group, where)
        return (lr, lr_decay, eps, weight_decay, maximize)

    def _added(self, dict group):
        # PyTorch's constructor makes the state; here every group's, so that a first step
        # can be captured too.
        for param in group["params"]:
            if param not in self.state:
                self.state[param] = {
                    "step": factories.zeros((), named_dtype("float32"), _device_text(param),
                                            False),
                    "sum": self._new_state(param, "sum", None)}

    def _on_device(self, tuple settings):
        return True

    def _device_rule(self):
        return "Adagrad keeps the step count on the parameter's device"

    _shaped = ("sum",)

    def _counts_on_device(self, dict group):
        return True

    def _new_state(self, TensorCore param, str key, tuple settings):
        # PyTorch's: the optimiser's initial_accumulator_value, whatever the group's says
        return factories.full_like(param, _hyperparameter(
            self.defaults["initial_accumulator_value"], "initial_accumulator_value",
            NUMBER_NAMES["initial_accumulator_value"], ""), None, None, False)

    def _unloaded(self, TensorCore param):
        # Starts again at its address, as PyTorch's fresh state would (Note [Loaded in place])
        entry = self.state.get(param)
        if isinstance(entry, dict) and isinstance(entry.get("step"), TensorCore) and \
                isinstance(entry.get("sum"), TensorCore):
            copies.fill_(<TensorCore>entry["step"], 0)
            copies.copy_(<TensorCore>entry["sum"], self._new_state(param, "sum", None), False)
        else:
            self.state.pop(param, None)

    def _update(self, TensorCore param, TensorCore gradient, dict entry, tuple settings):
        adagrad_step(param, gradient, entry, settings)


cdef int adagrad_step(TensorCore param, TensorCore grad, dict entry, tuple settings) except -1:
    """torch/optim/adagrad.py, _single_tensor_adagrad (dense), with the runtime's own
    operations; lr_decay's learning rate from the count on the device (Note [Capturable
    Adagrad])."""
    lr, lr_decay, eps, weight_decay, maximize = settings
    cdef TensorCore step_t = entry["step"], state_sum = entry["sum"]
    elementwise.iadd(step_t, 1)
    if maximize:
        grad = elementwise.neg(grad)
    if weight_decay:
        grad = elementwise.add_scaled(grad, param, weight_decay)
    elementwise.iadd(state_sum, elementwise.mul(grad, grad))
    std = elementwise.sqrt(state_sum)
    elementwise.iadd(std, eps)
    if lr_decay:
        # -lr / (1 + (step - 1) * lr_decay), in float64 as PyTorch's Python floats
        count = copies.to(step_t, None, named_dtype("float64"), False, False)
        scale = elementwise.radd(elementwise.mul(elementwise.sub(count, 1), lr_decay), 1)
        negative_lr = _scalar_like(elementwise.rtruediv(scale, -lr), param)
    else:
        negative_lr = -lr
    # param.addcdiv_(grad, std, value=-clr) as PyTorch's CPU kernel rounds it
    elementwise.iadd(param, elementwise.truediv(elementwise.mul(grad, negative_lr), std))
    return 0
