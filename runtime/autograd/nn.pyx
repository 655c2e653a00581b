# cython: language_level=3
"""tensorplay.nn: Modules, the Parameters they hold, and the layers of a small network.

See docs/design.md, "tensorplay.nn".

Note [Module attributes]
A Module keeps what it is made of in three ordered dicts, as PyTorch's: _parameters (name ->
Parameter or None), _buffers (name -> Tensor or None; state that is not trained, saved in the
state_dict) and _modules (name -> Module or None, its children). Assigning a Parameter or a
Module to an attribute registers it there (__setattr__), and reading the attribute finds it
there (__getattr__, which Python calls only when the ordinary lookup fails, so plain attributes
cost nothing extra). So a name the class itself has (a method such as train or state_dict, a
property such as training) cannot be registered: the class's attribute would always be found
first. Assigning a Parameter or a Module to one is a KeyError, as register_parameter() and
add_module() refuse it (PyTorch refuses the Parameter and registers the Module, leaving the
method visible). The dicts hold the registration order, which is the order of parameters()
and state_dict(): a Linear's weight before its bias, a Sequential's layers in order, as
PyTorch's, so that weights copied by position or by name land in the same places.

Note [Module classes]
The public classes (generated from api.yaml) derive from the runtime classes here and from
their public parent (subclass_of): tensorplay.nn.Linear from LinearCore and from
tensorplay.nn.Module, tensorplay.nn.Parameter from ParameterCore and from tensorplay.Tensor. So a
Linear is a Module, a Parameter is a Tensor, and the runtime classes hold only what is theirs.
When the runtime makes an object that users see (a Parameter for a Linear's weight), it makes
the public class, which the generated module registers (runtime/base/public.pyx).

Note [Functional forms]
tensorplay.nn.functional's functions and the loss modules are built from recorded tensor
operations (subtraction, exp, log, sums, gathers), so autograd gives
their gradients and a CUDA graph captures them like any other kernels (nothing reads the
device on the host, except the bounds check of class indices on the CPU). log_softmax and
softmax are the tensor layer's (reduction.pyx), which the Tensor methods share: each slice
shifted by its own maximum along dim, detached, before exp, as PyTorch's kernels do.
cross_entropy and nll_loss gather each target's log-probability, as PyTorch's.
"""
import collections
import collections.abc
import math
import os

from libc.stdint cimport int64_t

from cuda.bindings cimport cyruntime
from cuda.bindings.cyruntime cimport cudaStream_t

from tensorplay._runtime.autograd cimport engine as autograd
from tensorplay._runtime.devices cimport device as _device, stream as _stream
from tensorplay._runtime.base cimport dtypes, errors, public
from tensorplay._runtime.random cimport random_ops
from tensorplay._runtime.tensor cimport (copies, core as tensor, elementwise, factories, linalg,
                                         promotion, reduction, scatter_gather, serialization)
from tensorplay._runtime.tensor.core cimport TensorCore
from tensorplay._runtime.tensor.arguments cimport computed_in
from tensorplay._runtime.tensor.reduction cimport nll_loss as fused_nll_loss
from tensorplay._runtime.tensor cimport arguments
from tensorplay._runtime.tensor.arguments import BoolNotImplementedError, DtypeError, ShapeError
from tensorplay._runtime.base.dtypes cimport DtypeCore, named_dtype
from tensorplay._runtime.kernels cimport ops

# The longest name of a parameter, buffer or module (or prefix of names) accepted: longer text is
# a mistake, refused by name rather than carried into every state_dict key.
NAME_CHARACTERS = 4096
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

class IncompatibleKeys(collections.namedtuple("IncompatibleKeys",
                                              ["missing_keys", "unexpected_keys"])):
    """What load_state_dict() returns; printed as PyTorch's _IncompatibleKeys prints."""

    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


cdef object parameter_class():
    return public.public_class("ParameterCore", ParameterCore)


class ParameterCore:
    """What makes a tensor a Parameter; the public Parameter derives from Tensor too (Note
    [Module classes]), so self is a TensorCore."""

    def init(self, data, requires_grad):
        if data is None:  # PyTorch's Parameter() holds an empty float32 tensor
            data = factories.empty((0,), None, None, False)
        if not isinstance(data, TensorCore):
            raise TypeError(f"Parameter: data must be a tensor, got {errors.shown(data)}")
        # Checked before anything changes: an integer tensor cannot require grad.
        if requires_grad and not (<TensorCore>data).dtype_object.floating:
            raise RuntimeError(f"only tensors of floating point dtype can require gradients, "
                               f"got a Parameter of {(<TensorCore>data).dtype_object.name}")
        # The same memory as data, as a new leaf: PyTorch's Parameter(data) shares data's
        # storage and starts its own autograd history.
        tensor.alias_memory(<TensorCore>self, <TensorCore>data)
        (<TensorCore>self).c_set_requires_grad(requires_grad)

    def c_parameter_repr(self):
        return "Parameter containing:\n" + copies.repr_text(<TensorCore>self)

    def c_parameter_reduce_ex(self, protocol):
        # A Parameter pickles as a tensor does (serialization.reduce_ex) and comes back a
        # Parameter, with its requires_grad, as PyTorch's.
        serialization.protocol_arg(protocol)
        return (rebuild_parameter, serialization.rebuild_arguments(<TensorCore>self))

    def c_parameter_deepcopy(self, memo):
        values = serialization.copied_values(<TensorCore>self, memo)
        return serialization.finish_copy(<TensorCore>self, parameter_class()(
            values, (<TensorCore>self).grad_required), memo)


def rebuild_parameter(values, dtype, device, requires_grad):
    """A Parameter from what c_parameter_reduce_ex() pickled (serialization.rebuild_tensor's
    arguments). pickle finds it by name, so its name and arguments stay as they are."""
    return parameter_class()(serialization.rebuilt(values, dtype, device, False),
                             bool(requires_grad))


cdef str child_name(str prefix, str name):
    return f"{prefix}.{name}" if prefix else name


cdef str name_arg(object value, str argument):
    """A name or prefix: a str of at most NAME_CHARACTERS characters."""
    if not isinstance(value, str):
        raise TypeError(f"{argument} must be a str, got {type(value).__name__}")
    if len(value) > NAME_CHARACTERS:
        raise ValueError(f"{argument} must be at most {NAME_CHARACTERS} characters long, got "
                         f"{len(value)}")
    return value


# Where Module.__setattr__ finds a registered name, and what else that store takes there.
_REGISTERED = (("_parameters", "parameter", "tensorplay.nn.Parameter", None),
               ("_modules", "child module", "tensorplay.nn.Module", None),
               ("_buffers", "buffer", "tensorplay.Tensor", TensorCore))


class ModuleCore:
    """The state of a Module (Note [Module attributes]) and what every Module does."""

    def init(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_forward_hooks", {})
        object.__setattr__(self, "_next_hook", 0)

    # -- attributes (Note [Module attributes]) ---------------------------------------------

    def _stores(self, str what):
        stores = self.__dict__.get("_parameters")
        if stores is None:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call (call "
                                 "super().__init__() first in the subclass's __init__)")
        return stores, self.__dict__["_buffers"], self.__dict__["_modules"]

    def _forget(self, str name):
        """Drop name from every place an attribute can live, before it is registered anew."""
        self.__dict__.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            self.__dict__[store].pop(name, None)

    def __setattr__(self, str name, value):
        if isinstance(value, (ParameterCore, ModuleCore)):
            is_parameter = isinstance(value, ParameterCore)
            self._stores("parameters" if is_parameter else "child modules")
            if hasattr(type(self), name):
                # A method or attribute of the class (train, state_dict, training...): a
                # registration would never be found under it, since the ordinary lookup finds
                # the class's first (PyTorch's register_parameter rule; for a Module PyTorch
                # registers it all the same, and the method stays visible).
                raise KeyError(f"attribute '{name}' already exists")
            self._forget(name)
            self.__dict__["_parameters" if is_parameter else "_modules"][name] = value
            return
        state = self.__dict__
        if "_parameters" in state:
            # A registered name takes None, or (a buffer) a tensor; new registrations are above.
            for store, what, expected, accepted in _REGISTERED:
                if name in state[store]:
                    if value is not None and (accepted is None or not isinstance(value, accepted)):
                        raise TypeError(f"cannot assign '{type(value).__name__}' as {what} "
                                        f"'{name}' ({expected} or None expected)")
                    state[store][name] = value
                    return
        object.__setattr__(self, name, value)

    def __getattr__(self, str name):
        state = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            found = state.get(store)
            if found is not None and name in found:
                return found[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, str name):
        state = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            found = state.get(store)
            if found is not None and name in found:
                del found[name]
                return
        object.__delattr__(self, name)

    def _register(self, str store, str what, name, value, accepted, str argument, str expected):
        """register_parameter(), register_buffer() and add_module(), with PyTorch's checks in
        its order: __init__ called, the name a str, not empty, without a dot and not already
        another attribute, then the value an instance of accepted or None."""
        self._stores(what + "s")
        name_arg(name, "name")
        if name == "" or "." in name:
            raise KeyError(f"{what} name can't be empty or contain \".\", got {name!r}")
        if hasattr(self, name) and name not in self.__dict__[store]:
            raise KeyError(f"attribute '{name}' already exists")
        if value is not None and not isinstance(value, accepted):
            raise TypeError(f"cannot assign '{type(value).__name__}' object to {what} '{name}' "
                            f"({argument} must be a {expected} or None)")
        self.__dict__[store][name] = value

    def c_register_parameter(self, name, param):
        self._register("_parameters", "parameter", name, param, ParameterCore, "param",
                       "tensorplay.nn.Parameter")

    def c_register_buffer(self, name, value):
        self._register("_buffers", "buffer", name, value, TensorCore, "tensor",
                       "tensorplay.Tensor")

    def c_add_module(self, name, module):
        self._register("_modules", "module", name, module, ModuleCore, "module",
                       "tensorplay.nn.Module")

    # -- what a Module is made of -------------------------------------------------------------

    def c_named_modules(self, prefix=""):
        return self._walk(name_arg(prefix, "prefix"))

    def _walk(self, str prefix):
        """Each Module once (the first name it is reached by), self first, depth first."""
        seen = set()
        pending = [(prefix, self)]
        while pending:
            name, module = pending.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            children = [(child_name(name, child), value) for child, value
                        in module.__dict__["_modules"].items() if value is not None]
            pending.extend(reversed(children))

    def c_modules(self):
        for _, module in self.c_named_modules():
            yield module

    def c_named_children(self):
        # A child registered under two names is listed once, under its first (PyTorch's
        # named_children() dedupes by identity).
        seen = set()
        for name, module in self.__dict__["_modules"].items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def c_children(self):
        for _, module in self.c_named_children():
            yield module

    def _named_members(self, str store, str prefix, bint recurse):
        """(name, tensor) of store in every Module reached, each tensor once."""
        seen = set()
        modules = self._walk(prefix) if recurse else iter([(prefix, self)])
        for module_name, module in modules:
            for name, value in module.__dict__[store].items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield child_name(module_name, name), value

    def c_named_parameters(self, prefix, recurse):
        return self._named_members("_parameters", name_arg(prefix, "prefix"), recurse)

    def c_parameters(self, recurse):
        for _, parameter in self._named_members("_parameters", "", recurse):
            yield parameter

    def c_named_buffers(self, prefix, recurse):
        return self._named_members("_buffers", name_arg(prefix, "prefix"), recurse)

    def c_buffers(self, recurse):
        for _, buffer in self._named_members("_buffers", "", recurse):
            yield buffer

    # -- modes, gradients and devices ---------------------------------------------------------

    def c_training(self):
        try:
            return self.__dict__["training"]
        except KeyError:  # before Module.__init__(): an attribute error, as for any attribute
            raise AttributeError(f"'{type(self).__name__}' object has no attribute 'training' "
                                 "(call super().__init__() first)") from None

    def c_set_training(self, mode):
        # Kept in the instance dict: Module.__init__ and train() set it on every module.
        self.__dict__["training"] = mode

    def c_train(self, mode):
        # Only a bool: PyTorch refuses 0, 1 and the rest with this ValueError.
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for module in self.c_modules():
            object.__setattr__(module, "training", mode)
        return self

    def c_eval(self):
        return self.c_train(False)

    def c_zero_grad(self, set_to_none):
        autograd.zero_grads(self.c_parameters(True), set_to_none)

    def c_requires_grad_(self, requires_grad):
        for parameter in self.c_parameters(True):
            parameter.requires_grad_(requires_grad)
        return self

    def c_apply(self, fn):
        # Children first, then this module, as PyTorch's (each child's subtree in turn).
        if not callable(fn):
            raise TypeError(f"fn must be callable as fn(module), got {errors.shown(fn)}")
        for module in list(self.c_children()):
            module.apply(fn)
        fn(self)
        return self

    def c_to(self, device, dtype):
        # PyTorch's Module.to forms: to(device), to(dtype), to(device, dtype) and to(tensor),
        # which takes the tensor's device and dtype.
        if isinstance(device, TensorCore):
            if dtype is not None:
                raise TypeError("to() got a dtype twice (the tensor's and dtype)")
            device, dtype = (<TensorCore>device).c_device(), (<TensorCore>device).dtype_object
        elif isinstance(device, DtypeCore):
            if dtype is not None:
                raise TypeError("to() got a dtype twice (as device and as dtype)")
            device, dtype = None, device
        _device.tensor_device_arg(device, "device")  # checked even for a module with no tensor
        if dtype is not None:
            dtype = arguments.dtype_arg(dtype, None, "dtype")
            if not (<DtypeCore>dtype).floating:
                raise TypeError("nn.Module.to only accepts floating point or complex dtypes, "
                                f"but got desired dtype={dtype!r}")
        return self._apply(device, dtype)

    # double(), float(), half(), bfloat16(): floating tensors only are converted, as PyTorch's.
    def c_double(self):
        return self._apply(None, named_dtype("float64"))

    def c_float(self):
        return self._apply(None, named_dtype("float32"))

    def c_half(self):
        return self._apply(None, named_dtype("float16"))

    def c_bfloat16(self):
        return self._apply(None, named_dtype("bfloat16"))

    def c_cuda(self, device):
        target = "cuda" if device is None else device
        if _device.tensor_device_arg(target, "device") == -1:
            raise RuntimeError("Invalid device, must be cuda device")  # PyTorch's message
        return self._apply(target, None)

    def c_cpu(self):
        return self._apply("cpu", None)

    def _apply(self, device, dtype):
        """Every parameter (with its grad) and buffer moved to device (None: where it is) and,
        when floating point, converted to dtype (None: kept), as PyTorch's Module._apply.
        Every tensor is converted before any is changed, so that a failed move (a bad device,
        no GPU) leaves the module as it was."""
        parameters = list(self.c_parameters(True))
        with autograd.no_grad_block():
            moved = [converted(parameter, device, dtype) for parameter in parameters]
            grads = [None if parameter.grad is None else
                     converted(parameter.grad, device, dtype) for parameter in parameters]
            buffers = [(module, name, converted(value, device, dtype))
                       for module in self.c_modules()
                       for name, value in module.__dict__["_buffers"].items()
                       if value is not None]
        for parameter, memory, grad in zip(parameters, moved, grads):
            if memory is not parameter:
                # The Parameter stays the same object (optimisers hold it), now seeing the new
                # memory, as PyTorch's module.to() assigns param.data.
                (<TensorCore>parameter).grad_value = None
                tensor.alias_memory(<TensorCore>parameter, <TensorCore>memory)
                parameter.grad = grad
        for module, name, value in buffers:
            module.__dict__["_buffers"][name] = value
        return self

    # -- state_dict ----------------------------------------------------------------------------

    def _state(self):
        """name -> the Parameter or buffer itself, for every one the state_dict holds."""
        # Every name a module is registered under counts, a shared one's state saved (and
        # loaded) under each: PyTorch's state_dict() and load_state_dict() recurse through
        # _modules without deduplicating.
        state = collections.OrderedDict()
        pending = [("", self)]
        while pending:
            module_name, module = pending.pop()
            for store in ("_parameters", "_buffers"):
                for name, value in module.__dict__[store].items():
                    if value is not None:
                        state[child_name(module_name, name)] = value
            pending.extend(reversed([(child_name(module_name, name), child) for name, child
                                     in module.__dict__["_modules"].items()
                                     if child is not None]))
        return state

    def c_state_dict(self):
        return collections.OrderedDict((name, (<TensorCore>value).c_detach())
                                       for name, value in self._state().items())

    def c_load_state_dict(self, state_dict, strict):
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got "
                            f"{type(state_dict).__name__}.")
        targets = self._state()
        missing = [name for name in targets if name not in state_dict]
        unexpected = [name for name in state_dict if name not in targets]
        problems = []
        for name, target in targets.items():
            if name not in state_dict:
                continue
            source = state_dict[name]
            if not isinstance(source, TensorCore):
                problems.append(f'While copying the parameter named "{name}", expected a '
                                f'tensor from checkpoint but received {type(source).__name__}')
            elif (<TensorCore>source).sizes != (<TensorCore>target).sizes:
                problems.append(f"size mismatch for {name}: copying a param with shape "
                                f"{list((<TensorCore>source).sizes)} from checkpoint, the shape "
                                f"in current model is {list((<TensorCore>target).sizes)}.")
        if strict:
            if unexpected:
                problems.insert(0, "Unexpected key(s) in state_dict: "
                                + ", ".join(f'"{name}"' for name in unexpected) + ". ")
            if missing:
                problems.insert(0, "Missing key(s) in state_dict: "
                                + ", ".join(f'"{name}"' for name in missing) + ". ")
        # Every problem is reported before anything is copied, so a refused load changes nothing.
        if problems:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(problems))
        with autograd.no_grad_block():
            for name, target in targets.items():
                if name in state_dict:
                    copies.copy_(<TensorCore>target, state_dict[name], False)
        return IncompatibleKeys(missing, unexpected)

    # -- calling -------------------------------------------------------------------------------

    def c_register_forward_hook(self, hook, prepend, with_kwargs):
        # PyTorch's always_call (run the hook when forward() raises) is not offered: the
        # schema does not declare it, so passing it is Python's unexpected-keyword TypeError.
        if not callable(hook):
            raise TypeError(f"hook must be callable, got {errors.shown(hook)}")
        key = self.__dict__["_next_hook"]
        object.__setattr__(self, "_next_hook", key + 1)
        hooks = self.__dict__["_forward_hooks"]
        # with_kwargs: called as hook(module, args, kwargs, output), kwargs the call's keyword
        # arguments, as PyTorch's.
        entry = (hook, with_kwargs)
        if prepend:  # first of all the hooks registered so far, as PyTorch's prepend=True
            rest = dict(hooks)
            hooks.clear()
            hooks[key] = entry
            hooks.update(rest)
        else:
            hooks[key] = entry
        return autograd.removable_handle(hooks, key)

    def c_call(self, args, kwargs):
        try:
            forward = self.forward
        except AttributeError:
            raise TypeError(f"{type(self).__name__} must define forward(), which calling the "
                            "module runs") from None
        output = forward(*args, **kwargs)
        hooks = self.__dict__["_forward_hooks"]
        if hooks:  # most modules have none: no copy of the dict on every call
            for hook, with_kwargs in tuple(hooks.values()):  # a hook may remove itself
                replaced = (hook(self, args, kwargs, output) if with_kwargs else
                            hook(self, args, output))
                if replaced is not None:
                    output = replaced
        return output

    def c_extra_repr(self):
        return ""

    def c_repr(self):
        # PyTorch's Module.__repr__: a one-line extra_repr without children stays on the
        # first line; otherwise each line of it, then each child, on a line of its own.
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        children = [f"({name}): " + repr(module).replace("\n", "\n  ")
                    for name, module in self.c_named_children()]
        if len(extra_lines) <= 1 and not children:
            return f"{type(self).__name__}({extra})"
        return f"{type(self).__name__}(\n  " + "\n  ".join(extra_lines + children) + "\n)"


# --------------------------------------------------------------------------------------------
# Layers


cdef object converted(TensorCore value, object device, object dtype):
    """value on device (None: its own), of dtype when it is floating point (Module._apply)."""
    return copies.to(value, device, dtype if value.dtype_object.floating else None, False,
                     False)


cdef int weight_and_bias(object module, tuple weight_shape, bint bias, object dtype,
                         object device) except -1:
    """A layer's weight parameter of weight_shape and its bias (weight_shape[0],), or a bias slot
    left empty, then its reset_parameters(): Linear's and Conv2d's, as PyTorch's."""
    make = parameter_class()
    module.weight = make(factories.empty((weight_shape,), dtype, device, False), True)
    if bias:
        module.bias = make(factories.empty(((weight_shape[0],),), dtype, device, False), True)
    else:
        module.c_register_parameter("bias", None)
    module.c_reset_parameters()
    return 0


cdef int uniform_by_fan_in(object module, object fan_in) except -1:
    """module's weight and bias drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), without
    recording: PyTorch's kaiming_uniform_(weight, a=sqrt(5)) for Linear and Conv2d."""
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
    with autograd.no_grad_block():
        random_ops.uniform_(<TensorCore>module.weight, -bound, bound, None)
        if module.bias is not None:
            random_ops.uniform_(<TensorCore>module.bias, -bound, bound, None)
    return 0


class LinearCore(ModuleCore):
    """y = x @ weight.T + bias, with PyTorch's shapes, order and initialisation."""

    def init(self, in_features, out_features, bias, device, dtype):
        ModuleCore.init(self)
        self.in_features = in_features
        self.out_features = out_features
        # weight before bias: the order of parameters() and state_dict(), as PyTorch's.
        weight_and_bias(self, (out_features, in_features), bias, dtype, device)

    def c_reset_parameters(self):
        # PyTorch's: kaiming_uniform_(weight, a=sqrt(5)) draws from U(-b, b) with
        # b = gain * sqrt(3 / fan_in) and gain = sqrt(2 / (1 + a**2)) = sqrt(1 / 3), so
        # b = 1 / sqrt(fan_in); the bias draws from the same range.
        uniform_by_fan_in(self, self.in_features)

    def c_forward(self, input):
        cdef TensorCore x = tensor.own_tensor_arg(input, "Linear: input")
        # The wrapper checked input (core.pxd, check_awake); the module's own tensors it reads
        # here, past any wrapper.
        tensor.check_awake(<TensorCore>self.weight, b"Linear.forward()", b"weight")
        if self.bias is not None:
            tensor.check_awake(<TensorCore>self.bias, b"Linear.forward()", b"bias")
        output = linalg.matmul(x, (<TensorCore>self.weight).c_t())
        return output if self.bias is None else elementwise.add(<TensorCore>output, self.bias)

    def c_extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class ReLUCore(ModuleCore):
    """max(x, 0), elementwise; with inplace, into the input (clamp_), as PyTorch's."""

    def init(self, inplace):  # a bool (the wrapper's check)
        ModuleCore.init(self)
        self.inplace = inplace

    def c_forward(self, input):
        cdef TensorCore x = tensor.own_tensor_arg(input, "ReLU: input")
        return x.clamp_(0, None) if self.inplace else x.relu()

    def c_extra_repr(self):
        return "inplace=True" if self.inplace else ""


class SigmoidCore(ModuleCore):
    """1 / (1 + exp(-x)), elementwise."""

    def c_forward(self, input):
        return tensor.own_tensor_arg(input, "Sigmoid: input").sigmoid()


class GELUCore(ModuleCore):
    """x * Phi(x), elementwise (gelu), exact or by PyTorch's tanh approximation."""

    def init(self, approximate):
        approximation_arg(approximate)
        ModuleCore.init(self)
        self.approximate = approximate

    def c_forward(self, input):
        return gelu(input, self.approximate)

    def c_extra_repr(self):
        return f"approximate={self.approximate!r}"


class TanhCore(ModuleCore):
    """tanh(x), elementwise."""

    def c_forward(self, input):
        return tensor.own_tensor_arg(input, "Tanh: input").tanh()


cdef int padding_type(object padding_idx) except -1:
    if padding_idx is not None:
        errors.int_arg(padding_idx, "padding_idx", INT64_MIN, INT64_MAX)
    return 0


cdef object padding_arg(object padding_idx, object num_embeddings):
    """padding_idx from 0 (a negative one counts from the end), as PyTorch's, or None."""
    padding_type(padding_idx)
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:  # PyTorch's assertions
        raise ValueError(f"padding_idx must be within num_embeddings, got {padding_idx} for "
                         f"{num_embeddings} embeddings")
    return padding_idx + num_embeddings if padding_idx < 0 else padding_idx


class EmbeddingCore(ModuleCore):
    """A table of num_embeddings vectors of embedding_dim, looked up by index (embedding)."""

    def init(self, num_embeddings, embedding_dim, padding_idx, device, dtype):
        padding = padding_arg(padding_idx, num_embeddings)
        ModuleCore.init(self)
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding
        self.weight = parameter_class()(factories.empty(((num_embeddings, embedding_dim),),
                                                        dtype, device, False), True)
        self.c_reset_parameters()

    def c_reset_parameters(self):
        # PyTorch's: N(0, 1), and the padding row zero.
        with autograd.no_grad_block():
            random_ops.normal_(<TensorCore>self.weight, 0.0, 1.0, None)
            if self.padding_idx is not None:
                copies.fill_(<TensorCore>self.weight[self.padding_idx], 0)

    def c_forward(self, input):
        tensor.check_awake(<TensorCore>self.weight, b"Embedding.forward()", b"weight")
        return embedding(input, self.weight, self.padding_idx)

    def c_extra_repr(self):
        padding = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{padding}"


def embedding(input, weight, padding_idx):
    """weight's rows at input's indices, of shape input.shape + (embedding_dim,), as PyTorch's
    F.embedding; the row at padding_idx gets no gradient."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "embedding: input")
    cdef TensorCore w = tensor.own_tensor_arg(weight, "embedding: weight")
    padding_type(padding_idx)
    if len(w.sizes) != 2:
        raise RuntimeError(f"'weight' must be 2-D, got {len(w.sizes)}-D")
    padding = padding_arg(padding_idx, w.sizes[0])
    if x.dtype_object.name not in ("int64", "int32"):  # PyTorch's message
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the "
                           f"following scalar types: Long, Int; but got {x.dtype_object.name} "
                           "instead")
    flat = x.reshape((x.element_count,))
    rows = copies.index_select(w, 0, flat)
    if padding is not None and tensor.tracked(w):
        # the padding row's value, detached: the same numbers, and no gradient to that row
        rows = elementwise.where((flat == padding).unsqueeze(-1), rows.detach(), rows)
    return rows.reshape(x.sizes + (w.sizes[1],))


class IdentityCore(ModuleCore):
    """The input itself, as a placeholder layer; its arguments are ignored, as PyTorch's."""

    def init(self, args):
        ModuleCore.init(self)

    def c_forward(self, input):
        return input


cdef str inplace_text(bint inplace):
    return ", inplace=True" if inplace else ""


class LeakyReLUCore(ModuleCore):
    """x where x > 0, negative_slope * x elsewhere."""

    def init(self, negative_slope, inplace):
        ModuleCore.init(self)
        self.negative_slope = negative_slope
        self.inplace = inplace

    def c_forward(self, input):
        return activated(leaky_relu, input, self.inplace, self.negative_slope)

    def c_extra_repr(self):
        return f"negative_slope={self.negative_slope}{inplace_text(self.inplace)}"


class SiLUCore(ModuleCore):
    """x * sigmoid(x), elementwise."""

    def init(self, inplace):
        ModuleCore.init(self)
        self.inplace = inplace

    def c_forward(self, input):
        return activated(silu, input, self.inplace)

    def c_extra_repr(self):
        return "inplace=True" if self.inplace else ""


class MishCore(SiLUCore):
    """x * tanh(softplus(x)), elementwise."""

    def c_forward(self, input):
        return activated(mish, input, self.inplace)


class ELUCore(ModuleCore):
    """x where x > 0, alpha * (exp(x) - 1) elsewhere."""

    def init(self, alpha, inplace):
        ModuleCore.init(self)
        self.alpha = alpha
        self.inplace = inplace

    def c_forward(self, input):
        return activated(elu, input, self.inplace, self.alpha)

    def c_extra_repr(self):
        return f"alpha={self.alpha}{inplace_text(self.inplace)}"


class SoftplusCore(ModuleCore):
    """log(1 + exp(beta * x)) / beta, x itself where beta * x > threshold."""

    def init(self, beta, threshold):
        ModuleCore.init(self)
        self.beta = beta
        self.threshold = threshold

    def c_forward(self, input):
        return softplus(input, self.beta, self.threshold)

    def c_extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class HardtanhCore(ModuleCore):
    """x clamped into [min_val, max_val]."""

    def init(self, min_val, max_val, inplace):
        hardtanh_bounds(min_val, max_val)
        ModuleCore.init(self)
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def c_forward(self, input):
        return activated(hardtanh, input, self.inplace, self.min_val,
                         self.max_val)

    def c_extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}{inplace_text(self.inplace)}"


class ReLU6Core(HardtanhCore):
    """min(max(x, 0), 6): Hardtanh(0, 6)."""

    def init(self, inplace):
        HardtanhCore.init(self, 0.0, 6.0, inplace)

    def c_extra_repr(self):
        return "inplace=True" if self.inplace else ""


class SoftmaxCore(ModuleCore):
    """softmax along dim (PyTorch's implicit dimension, with its warning, for None)."""

    def init(self, dim):
        if dim is not None:
            errors.int_arg(dim, "dim", INT64_MIN, INT64_MAX)
        ModuleCore.init(self)
        self.dim = dim

    def c_forward(self, input):
        x = tensor.own_tensor_arg(input, f"{type(self).__name__}: input")
        return softmax(x, implicit_dim(x, self.dim, "softmax"))

    def c_extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmaxCore(SoftmaxCore):
    """log_softmax along dim (PyTorch's implicit dimension, with its warning, for None)."""

    def c_forward(self, input):
        x = tensor.own_tensor_arg(input, f"{type(self).__name__}: input")
        return log_softmax(x, implicit_dim(x, self.dim, "log_softmax"))


class CosineSimilarityCore(ModuleCore):
    """cosine_similarity(x1, x2, dim, eps)."""

    def init(self, dim, eps):
        errors.int_arg(dim, "dim", INT64_MIN, INT64_MAX)
        ModuleCore.init(self)
        self.dim = dim
        self.eps = eps

    def c_forward(self, x1, x2):
        return cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistanceCore(ModuleCore):
    """pairwise_distance(x1, x2, p, eps, keepdim)."""

    def init(self, p, eps, keepdim):
        ModuleCore.init(self)
        self.norm = p  # PyTorch's attribute names
        self.eps = eps
        self.keepdim = keepdim

    def c_forward(self, x1, x2):
        return pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


# What check_awake names for each convolution module's forward, made once rather than per call.
CONVOLUTION_FORWARD = {1: b"Conv1d.forward()", 2: b"Conv2d.forward()"}


class ConvolutionCore(ModuleCore):
    """conv1d or conv2d (SPATIAL dimensions) with a learned weight (out_channels, in_channels /
    groups, *kernel_size) and bias, with PyTorch's arguments, attributes, initialisation and
    repr (its _ConvNd); a subclass names SPATIAL."""

    def init(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups,
             bias, padding_mode, device, dtype):
        count = self.SPATIAL
        kernel = spatial_arg(kernel_size, "kernel_size", 1, count)
        strides = spatial_arg(stride, "stride", 1, count)
        if not isinstance(padding, str):
            padding = spatial_arg(padding, "padding", 0, count)
        dilations = spatial_arg(dilation, "dilation", 1, count)
        if in_channels % groups:  # PyTorch's messages (groups >= 1: the wrapper's check)
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            conv_padding(padding, (1,) * (2 - count) + kernel, (1,) * (2 - count) + strides,
                         (1,) * (2 - count) + dilations)
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError("padding_mode must be one of ['zeros', 'reflect', 'replicate', "
                             f"'circular'], but got padding_mode={errors.shown(padding_mode)}")
        ModuleCore.init(self)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding = kernel, strides, padding
        self.dilation, self.groups, self.padding_mode = dilations, groups, padding_mode
        # PyTorch's _ConvNd: F.pad's pairs, last dimension first, for a padding_mode other
        # than zeros ('same' puts the odd element of its total padding after).
        pads = [0, 0] * count
        for i in range(count):
            dim = count - 1 - i
            if padding == "same":
                total = dilations[dim] * (kernel[dim] - 1)
                pads[2 * i], pads[2 * i + 1] = total // 2, total - total // 2
            elif not isinstance(padding, str):
                pads[2 * i] = pads[2 * i + 1] = padding[dim]
        self._reversed_padding_repeated_twice = tuple(pads)
        weight_and_bias(self, (out_channels, in_channels // groups) + kernel, bias, dtype, device)

    def c_reset_parameters(self):
        # PyTorch's: kaiming_uniform_(weight, a=sqrt(5)), U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        # (LinearCore's reasoning), fan_in = in_channels / groups * the kernel's elements; the
        # bias alike.
        fan_in = self.in_channels // self.groups
        for size in self.kernel_size:
            fan_in *= size
        uniform_by_fan_in(self, fan_in)

    def c_forward(self, input):
        operation = CONVOLUTION_FORWARD[self.SPATIAL]
        tensor.check_awake(<TensorCore>self.weight, operation, b"weight")
        if self.bias is not None:
            tensor.check_awake(<TensorCore>self.bias, operation, b"bias")
        if self.padding_mode != "zeros":  # PyTorch's: F.pad first, then no padding
            input = pad(input, self._reversed_padding_repeated_twice, self.padding_mode, 0)
            return convolution(input, self.weight, self.bias, self.stride,
                               (0,) * self.SPATIAL, self.dilation, self.groups, self.SPATIAL)
        return convolution(input, self.weight, self.bias, self.stride, self.padding,
                           self.dilation, self.groups, self.SPATIAL)

    def c_extra_repr(self):
        # PyTorch's _ConvNd.extra_repr: the arguments that differ from their defaults.
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,) * self.SPATIAL:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * self.SPATIAL:
            text += f", dilation={self.dilation}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class Conv1dCore(ConvolutionCore):
    """conv1d with a learned weight (out_channels, in_channels / groups, kW) and bias."""
    SPATIAL = 1


class Conv2dCore(ConvolutionCore):
    """conv2d with a learned weight (out_channels, in_channels / groups, kH, kW) and bias."""
    SPATIAL = 2


class MaxPool2dCore(ModuleCore):
    """max_pool2d with PyTorch's arguments, attributes and repr."""

    def init(self, kernel_size, stride, padding, dilation, return_indices, ceil_mode):
        pool_arguments(kernel_size, stride, padding)  # checked here, kept as given (PyTorch's)
        pair_arg(dilation, "dilation", 1)
        if return_indices:
            raise ValueError("MaxPool2d: return_indices=True is not offered (the indices of "
                             "the largest elements are not gathered back here); leave it False")
        ModuleCore.init(self)
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def c_forward(self, input):
        return max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          self.ceil_mode, self.return_indices)

    def c_extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AdaptiveAvgPool2dCore(ModuleCore):
    """adaptive_avg_pool2d to output_size, kept as given (PyTorch's attribute and repr)."""

    def init(self, output_size):
        adaptive_output_arg(output_size)
        ModuleCore.init(self)
        self.output_size = output_size

    def c_forward(self, input):
        return adaptive_avg_pool2d(input, self.output_size)

    def c_extra_repr(self):
        return f"output_size={self.output_size}"


class AvgPool2dCore(ModuleCore):
    """avg_pool2d with PyTorch's arguments, attributes and repr."""

    def init(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
             divisor_override):
        pool_arguments(kernel_size, stride, padding)  # checked here, kept as given (PyTorch's)
        divisor_arg(divisor_override)
        ModuleCore.init(self)
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def c_forward(self, input):
        return avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)

    def c_extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class DropoutCore(ModuleCore):
    """While training, zero each element with probability p and scale the rest by 1 / (1 - p)."""

    def init(self, p, inplace):  # inplace a bool (the wrapper's check)
        dropout_probability(p)
        ModuleCore.init(self)
        self.p = p
        self.inplace = inplace

    def c_forward(self, input):
        cdef TensorCore x = tensor.own_tensor_arg(input, "Dropout: input")
        output = dropout(x, self.p, self.training)
        if self.inplace and output is not x:  # as functional.dropout(inplace=True)
            return x.copy_(output)
        return output

    def c_extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


# --------------------------------------------------------------------------------------------
# Functions of tensorplay.nn.functional and the losses (Note [Functional forms])

REDUCTIONS = ("none", "mean", "sum")
# Each reduction's code in the fused nll_loss (reduction.pyx, Note [Fused nll_loss]).
REDUCTION_CODES = {"none": 0, "sum": 1, "mean": 2}


cdef int dropout_probability(object p) except -1:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return 0


def dropout(input, p, training):
    """input with each element zeroed with probability p and the others scaled by
    1 / (1 - p) while training; input itself otherwise."""
    dropout_probability(p)
    tensor.own_tensor_arg(input, "dropout: input")
    if not training or p == 0:
        return input
    mask = factories.empty_like(input, None, None, False)
    if p == 1:
        return input * copies.zero_(<TensorCore>mask)
    # The mask comes from the device's default generator, which CUDA graphs advance on each
    # replay (rng.pyx, Note [Graph-safe random numbers]): a captured dropout draws a fresh mask
    # every time.
    random_ops.bernoulli_(<TensorCore>mask, 1 - p, None)
    elementwise.imul(<TensorCore>mask, 1 / (1 - p))
    return input * mask


cdef int approximation_arg(object approximate) except -1:
    if approximate not in ("none", "tanh"):  # PyTorch's words
        raise ValueError(f"approximate argument must be either none or tanh, got "
                         f"{errors.shown(approximate)}")
    return 0


def gelu(input, approximate):
    """PyTorch's GELU, x * Phi(x) with Phi the standard normal distribution function:
    x / 2 * (1 + erf(x / sqrt(2))), or with approximate="tanh" PyTorch's
    x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3))). Recorded operations (Note
    [Functional forms]); 16-bit floats are computed in float32 and rounded once, as PyTorch's
    kernel computes them."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "gelu: input")
    approximation_arg(approximate)
    cdef DtypeCore dtype = x.dtype_object
    if not dtype.floating:  # PyTorch: "GeluKernelImpl" not implemented for 'Long'
        raise DtypeError(f"gelu: input must be floating point, got {dtype.name}")
    values = copies.to(x, None, computed_in(dtype), False, False)
    if approximate == "tanh":
        inner = (values + values * values * values * 0.044715) * math.sqrt(2 / math.pi)
        output = values * 0.5 * (inner.tanh() + 1)
    else:
        output = values * 0.5 * ((values * math.sqrt(0.5)).erf() + 1)
    return copies.to(<TensorCore>output, None, dtype, False, False)


# The activations of PyTorch's torch.nn.functional, each from recorded operations (Note
# [Functional forms]). Where a branch of where() would overflow on the elements it does not
# select (exp of a large x), its input is clamped first: the unselected branch still gets a
# zero gradient, and zero times an infinite derivative would be NaN.


cdef TensorCore floating_arg(object input, str name):
    """input, a floating-point tensor (PyTorch's kernels of these activations take no other)."""
    cdef TensorCore x = tensor.own_tensor_arg(input, f"{name}: input")
    if not x.dtype_object.floating:
        raise DtypeError(f"{name}: input must be floating point, got {x.dtype_object.name}")
    return x


def activated(function, input, bint inplace, *args):
    """function(input, *args), or (inplace) input with it copied in, as PyTorch's in-place
    activations. Under autograd the function reads a clone of input: its Nodes may save what
    they read (elu's clamp, silu's product), which the copy into input would change, so their
    backward() would refuse to run (PyTorch's in-place forms differentiate from their result
    instead)."""
    if not inplace:
        return function(input, *args)
    source = input
    if isinstance(input, TensorCore) and tensor.tracked(<TensorCore>input):
        source = copies.clone(<TensorCore>input)
    return input.copy_(function(source, *args))


def leaky_relu(input, negative_slope):
    """x where x > 0, negative_slope * x elsewhere (the gradient negative_slope at 0, as
    PyTorch's)."""
    cdef TensorCore x = floating_arg(input, "leaky_relu")
    return elementwise.where(x > 0, x, x * negative_slope)


def silu(input):
    """x * sigmoid(x), computed in float32 for 16-bit floats, as PyTorch's kernel."""
    cdef TensorCore x = floating_arg(input, "silu")
    values = copies.to(x, None, computed_in(x.dtype_object), False, False)
    return copies.to(<TensorCore>(values * values.sigmoid()), None, x.dtype_object, False, False)


def mish(input):
    """x * tanh(softplus(x)), computed in float32 for 16-bit floats, as PyTorch's kernel."""
    cdef TensorCore x = floating_arg(input, "mish")
    values = copies.to(x, None, computed_in(x.dtype_object), False, False)
    output = values * (<TensorCore>softplus(values, 1.0, 20.0)).tanh()
    return copies.to(<TensorCore>output, None, x.dtype_object, False, False)


def elu(input, alpha):
    """x where x > 0, alpha * (exp(x) - 1) elsewhere, in float32 for 16-bit floats."""
    cdef TensorCore x = floating_arg(input, "elu")
    values = copies.to(x, None, computed_in(x.dtype_object), False, False)
    negative = values.clamp(None, 0).expm1() * alpha
    output = elementwise.where(values > 0, values, negative)
    return copies.to(<TensorCore>output, None, x.dtype_object, False, False)


def softplus(input, beta, threshold):
    """log1p(exp(beta * x)) / beta, and x where beta * x > threshold (PyTorch's switch to the
    linear function), in float32 for 16-bit floats."""
    cdef TensorCore x = floating_arg(input, "softplus")
    values = copies.to(x, None, computed_in(x.dtype_object), False, False)
    scaled = values * beta
    curved = scaled.clamp(None, threshold).exp().log1p() / beta
    output = elementwise.where(scaled > threshold, values, curved)
    return copies.to(<TensorCore>output, None, x.dtype_object, False, False)


cdef int hardtanh_bounds(object min_val, object max_val) except -1:
    if not max_val > min_val:  # PyTorch asserts it
        raise ValueError(f"hardtanh: max_val ({max_val}) must be greater than min_val "
                         f"({min_val})")
    return 0


def hardtanh(input, min_val, max_val):
    """input clamped into [min_val, max_val]; the gradient passes strictly inside only, as
    PyTorch's hardtanh_backward (clamp's passes at the bounds too)."""
    hardtanh_bounds(min_val, max_val)
    cdef TensorCore x = tensor.own_tensor_arg(input, "hardtanh: input")
    outside = (x <= min_val) | (x >= max_val)
    return elementwise.where(outside, x.detach().clamp(min_val, max_val), x)


def implicit_dim(input, dim, str name):
    """dim, or for None PyTorch's implicit softmax dimension (torch.nn.functional's
    _get_softmax_dim: 0 for 0, 1 or 3 dimensions, else 1), with its deprecation warning."""
    if dim is not None:
        return dim
    warn_caller(f"Implicit dimension choice for {name} has been deprecated. Change the call to "
                "include dim=X as an argument.")
    return 0 if input.dim() in (0, 1, 3) else 1


# The directory of the tensorplay package: frames of its Python files are not the caller.
PACKAGE_DIRECTORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


cdef int warn_caller(str message) except -1:
    """A UserWarning attributed to the first frame outside tensorplay (the user's call),
    however many of the package's Python frames lie between (compiled ones have none)."""
    import sys
    import warnings
    frame = sys._getframe(0)  # the innermost Python frame: this module's code has none
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(PACKAGE_DIRECTORY + os.sep):
        frame = frame.f_back
        level += 1
    warnings.warn(message, stacklevel=level)
    return 0


cdef tuple normalized_shape_arg(object normalized_shape):
    """normalized_shape as a tuple of sizes: an int or a sequence of them, at least one."""
    if isinstance(normalized_shape, bool) or \
            not isinstance(normalized_shape, (int, tuple, list)):
        raise TypeError(f"normalized_shape must be an int or a tuple or list of ints, got "
                        f"{errors.shown(normalized_shape)}")
    shape = arguments.size_arg((normalized_shape,), "normalized_shape")
    if not shape:  # PyTorch's words
        raise ShapeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                         "containing at least one element, but got normalized_shape = []")
    return shape


def layer_norm(input, normalized_shape, weight, bias, eps):
    """PyTorch's layer normalisation: over the last len(normalized_shape) dimensions,
    (x - mean) / sqrt(var + eps) with the biased variance, times weight, plus bias. Recorded
    operations (Note [Functional forms]); 16-bit floats are computed in float32 and the result
    rounded once, as PyTorch's kernel accumulates them, and so are float32 parameters of a
    16-bit input, the one mix PyTorch allows."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "layer_norm: input")
    cdef tuple shape = normalized_shape_arg(normalized_shape)
    dims = normalized_dims(x, shape, "layer_norm")
    cdef DtypeCore compute = computed_in(x.dtype_object)
    scale = affine_parameter(x, weight, shape, compute, "weight", "layer_norm")
    shift = affine_parameter(x, bias, shape, compute, "bias", "layer_norm")
    values = copies.to(x, None, compute, False, False)
    centred = values - values.mean(dims, keepdim=True)
    output = centred / ((centred * centred).mean(dims, keepdim=True) + eps).sqrt()
    if scale is not None:
        output = output * scale
    if shift is not None:
        output = output + shift
    return copies.to(<TensorCore>output, None, x.dtype_object, False, False)


# The machine epsilon of each floating dtype (torch.finfo(dtype).eps): rms_norm's default eps.
MACHINE_EPSILON = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23,
                   "float64": 2.0 ** -52}


def rms_norm(input, normalized_shape, weight, eps):
    """PyTorch's RMS normalisation: over the last len(normalized_shape) dimensions,
    x / sqrt(mean(x ** 2) + eps) times weight, eps the dtype's machine epsilon when None;
    16-bit floats computed in float32, as layer_norm."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "rms_norm: input")
    eps = optional_eps_arg(eps)
    cdef tuple shape = normalized_shape_arg(normalized_shape)
    dims = normalized_dims(x, shape, "rms_norm")
    cdef DtypeCore compute = computed_in(x.dtype_object)
    scale = affine_parameter(x, weight, shape, compute, "weight", "rms_norm")
    values = copies.to(x, None, compute, False, False)
    epsilon = MACHINE_EPSILON[x.dtype_object.name] if eps is None else eps
    output = values * ((values * values).mean(dims, keepdim=True) + epsilon).rsqrt()
    if scale is not None:
        output = output * scale
    return copies.to(<TensorCore>output, None, x.dtype_object, False, False)


def group_norm(input, num_groups, weight, bias, eps):
    """PyTorch's group normalisation: the channels (the second dimension) in num_groups groups
    of consecutive channels, each sample's group normalised over its channels and every later
    dimension, (x - mean) / sqrt(var + eps) with the biased variance, then times weight and plus
    bias per channel. Recorded operations (Note [Functional forms]); 16-bit floats computed in
    float32, as layer_norm."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "group_norm: input")
    if len(x.sizes) < 2:  # PyTorch's messages
        raise ShapeError(f"Expected at least 2 dimensions for input tensor but received "
                         f"{len(x.sizes)}")
    channels = x.sizes[1]
    if channels % num_groups:
        raise ShapeError(f"Expected number of channels in input to be divisible by num_groups, "
                         f"but got input of shape {list(x.sizes)} and num_groups={num_groups}")
    if not x.dtype_object.floating:
        raise DtypeError(f"group_norm: input must be floating point, got {x.dtype_object.name}")
    cdef DtypeCore compute = computed_in(x.dtype_object)
    mismatch = ("Expected {name} to be a vector of size equal to the number of channels in "
                f"input, but got {{name}} of shape {{shape}} and input of shape {list(x.sizes)}")
    scale = affine_parameter(x, weight, (channels,), compute, "weight", "group_norm", mismatch)
    shift = affine_parameter(x, bias, (channels,), compute, "bias", "group_norm", mismatch)
    values = copies.to(x, None, compute, False, False)
    # each sample's groups as rows: the channels of a group are consecutive, and so are the
    # later dimensions of each channel
    rows = values.reshape((x.sizes[0], num_groups,
                           channels // num_groups * math.prod(x.sizes[2:])))
    centred = rows - rows.mean(2, keepdim=True)
    output = (centred / ((centred * centred).mean(2, keepdim=True) + eps).sqrt()).reshape(
        x.sizes)
    per_channel = (channels,) + (1,) * (len(x.sizes) - 2)
    if scale is not None:
        output = output * scale.reshape(per_channel)
    if shift is not None:
        output = output + shift.reshape(per_channel)
    return copies.to(<TensorCore>output, None, x.dtype_object, False, False)


cdef object optional_eps_arg(object eps):
    return None if eps is None else errors.float_arg(eps, "eps")


cdef tuple normalized_dims(TensorCore x, tuple shape, str name):
    """The last len(shape) dimensions of a floating-point x, whose sizes must be shape."""
    cdef Py_ssize_t count = len(shape), ndim = len(x.sizes)
    if ndim < count or x.sizes[ndim - count:] != shape:
        raise ShapeError(
            f"Given normalized_shape={list(shape)}, expected input with shape "
            f"[*, {', '.join(map(str, shape))}], but got input of size{list(x.sizes)}")
    if not x.dtype_object.floating:  # PyTorch: "LayerNormKernelImpl" not implemented for 'Long'
        raise DtypeError(f"{name}: input must be floating point, got {x.dtype_object.name}")
    return tuple(range(ndim - count, ndim))


cdef object affine_parameter(TensorCore x, object value, tuple shape, DtypeCore compute,
                             str name, str function, str mismatch=None):
    """A normalisation's weight or bias (None: none), checked against x and shape, in compute;
    mismatch: the error of another shape, formatted with name and shape (PyTorch's
    layer_norm's by default)."""
    if value is None:
        return None
    checked = tensor.own_tensor_arg(value, f"{function}: {name}")
    if checked.sizes != shape:
        if mismatch is None:
            mismatch = ("Expected {name} to be of same shape as normalized_shape, but got "
                        "{name} of shape {shape} and normalized_shape = " + str(list(shape)))
        raise ShapeError(mismatch.format(name=name, shape=list(checked.sizes)))
    if checked.dtype_object is not x.dtype_object and checked.dtype_object is not compute:
        raise DtypeError(f"{function}: mixed dtype: expect {name} to have the input's dtype "
                         f"{x.dtype_object.name}, got {checked.dtype_object.name}")
    tensor.check_device(x, checked, function)
    return copies.to(checked, None, compute, False, False)


def batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps):
    """PyTorch's batch normalisation over every dimension but the channels (the second):
    (x - mean) / sqrt(var + eps) times weight, plus bias, per channel. Training uses the batch's
    mean and biased variance and moves running_mean and running_var (when given) toward them by
    momentum, the variance unbiased; otherwise the running statistics normalise. Recorded
    operations (Note [Functional forms]); 16-bit floats are computed in float32."""
    operands = batch_norm_operands(input, running_mean, running_var, weight, bias, training)
    return batch_normalized(operands, training, momentum, eps)


cdef tuple batch_norm_operands(object input, object running_mean, object running_var,
                               object weight, object bias, bint training):
    """The checked input and per-channel tensors (None where not given), before anything is
    computed or changed: a module's forward() counts the batch only once they pass."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "batch_norm: input")
    if len(x.sizes) < 2:
        raise ShapeError(f"batch_norm: input must have at least 2 dimensions (N, C, *), got "
                         f"{len(x.sizes)}")
    if not x.dtype_object.floating:  # PyTorch: "batch_norm" not implemented for 'Long'
        raise DtypeError(f"batch_norm: input must be floating point, got {x.dtype_object.name}")
    if training:
        if (running_mean is None) != (running_var is None):  # PyTorch's words
            raise ValueError("running_mean and running_var must either both be None or neither "
                             "be None")
        # PyTorch's _verify_batch_size: the shape alone, nothing read from the device.
        count = x.sizes[0] * math.prod(x.sizes[2:])
        if count == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {x.sizes}")
    else:
        for name, value in (("running_mean", running_mean), ("running_var", running_var)):
            if value is None:  # PyTorch's words
                raise ValueError(f"{name} must be defined in evaluation mode")
    cdef DtypeCore compute = computed_in(x.dtype_object)
    return (x, compute) + tuple(
        channel_operand(x, value, compute, name) for name, value in (
            ("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
            ("bias", bias)))


cdef object channel_operand(TensorCore x, object value, DtypeCore compute, str name):
    """A per-channel tensor of batch_norm (None: not given): C elements in one dimension, of
    x's dtype or (16-bit x) float32, on x's device."""
    if value is None:
        return None
    checked = tensor.own_tensor_arg(value, f"batch_norm: {name}")
    channels = x.sizes[1]
    if checked.c_numel() != channels:  # PyTorch's words
        raise ShapeError(f"{name} should contain {channels} elements not {checked.c_numel()}")
    if len(checked.sizes) != 1:
        raise ShapeError(f"batch_norm: {name} must be 1-dimensional, got shape "
                         f"{list(checked.sizes)}")
    if checked.dtype_object is not x.dtype_object and checked.dtype_object is not compute:
        raise DtypeError(f"batch_norm: mixed dtype: expect {name} to have the input's dtype "
                         f"{x.dtype_object.name}, got {checked.dtype_object.name}")
    tensor.check_device(x, checked, "batch_norm")
    return checked


cdef object batch_normalized(tuple operands, bint training, object momentum, double eps):
    """batch_norm of checked operands; momentum a float, or a 0-d tensor on the input's device
    (BatchNorm's cumulative average, 1 / num_batches_tracked, never read on the host)."""
    x, compute, running_mean, running_var, weight, bias = operands
    cdef TensorCore input = <TensorCore>x
    cdef Py_ssize_t ndim = len(input.sizes)
    # Each per-channel tensor broadcasts as (1, C, 1, ...) against the input.
    channel_shape = (1, input.sizes[1]) + (1,) * (ndim - 2)
    dims = (0,) + tuple(range(2, ndim))
    values = copies.to(input, None, compute, False, False)
    if training and input.c_numel() == 0:
        # An empty batch has no statistics (their NaN would reach the weight's gradient, as
        # NaN times the empty sum): the output is empty, the gradients of weight and bias
        # zeros and the running statistics stay, as PyTorch's kernels do.
        centred, scale = values, None
    elif training:
        mean = values.mean(dims, keepdim=True)
        centred = values - mean
        variance = (centred * centred).mean(dims, keepdim=True)  # biased, as PyTorch's
        scale = (variance + eps).rsqrt()
        if running_mean is not None:
            update_running_stats(running_mean, running_var, mean, variance,
                                 input.c_numel() // input.sizes[1], momentum, compute)
    else:
        centred = values - per_channel(running_mean, compute, channel_shape)
        scale = (per_channel(running_var, compute, channel_shape) + eps).rsqrt()
    # The weight joins the per-channel scale first: one product over the input, not two.
    if weight is not None:
        weight = per_channel(weight, compute, channel_shape)
        scale = weight if scale is None else scale * weight
    output = centred if scale is None else centred * scale
    if bias is not None:
        output = output + per_channel(bias, compute, channel_shape)
    return copies.to(<TensorCore>output, None, input.dtype_object, False, False)


cdef object per_channel(object value, DtypeCore compute, tuple channel_shape):
    """A per-channel tensor in compute, shaped to broadcast against the input."""
    return copies.to(<TensorCore>value, None, compute, False, False).reshape(channel_shape)


cdef int update_running_stats(object running_mean, object running_var, object mean,
                              object variance, object count, object momentum,
                              DtypeCore compute) except -1:
    """running = (1 - momentum) * running + momentum * batch, in place, for the mean and the
    unbiased variance (count values per channel, at least 2), as PyTorch's kernels; tensor
    operations only, so a captured training step moves the statistics at every replay."""
    with autograd.no_grad_block():
        shape = (<TensorCore>running_mean).sizes
        batch_mean = mean.detach().reshape(shape)
        batch_var = variance.detach().reshape(shape) * (count / (count - 1))
        keep = 1 - momentum
        for running, batch in ((running_mean, batch_mean), (running_var, batch_var)):
            current = copies.to(<TensorCore>running, None, compute, False, False)
            copies.copy_(<TensorCore>running, current * keep + batch * momentum, False)
    return 0


cdef int reduction_arg(object reduction) except -1:
    if reduction not in REDUCTIONS:  # PyTorch's _Reduction.get_enum
        raise ValueError(f"{str(reduction)[:100]} is not a valid value for reduction")
    return 0


cdef object reduced(object losses, str reduction):
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    return losses


def log_softmax(input, dim):
    return reduction.log_softmax(tensor.own_tensor_arg(input, "log_softmax: input"), dim)


def softmax(input, dim):
    return reduction.softmax(tensor.own_tensor_arg(input, "softmax: input"), dim)


cdef object difference(object input, object target, object reduction, str name):
    """input - target of the regression losses, after their checks, with PyTorch's warning
    where the shapes differ (they broadcast)."""
    cdef TensorCore x = tensor.own_tensor_arg(input, f"{name}: input")
    cdef TensorCore y = tensor.own_tensor_arg(target, f"{name}: target")
    reduction_arg(reduction)
    if x.sizes != y.sizes:
        warn_caller(f"Using a target size ({_size(y)}) that is different to the input size "
                    f"({_size(x)}). This will likely lead to incorrect results due to "
                    "broadcasting. Please ensure they have the same size.")
    return x - y


def mse_loss(input, target, reduction):
    """(input - target) ** 2, reduced."""
    error = difference(input, target, reduction, "mse_loss")
    return reduced(error * error, reduction)


def l1_loss(input, target, reduction):
    """|input - target|, reduced (the gradient at 0 is 0, as PyTorch's sign)."""
    return reduced(difference(input, target, reduction, "l1_loss").abs(), reduction)


cdef tuple _operands(tuple values, tuple names, str function, object reduction):
    """The tensors of a margin loss (each checked, named in function's words) and its
    reduction, checked."""
    checked = tuple(tensor.own_tensor_arg(value, f"{function}: {name}")
                    for value, name in zip(values, names))
    reduction_arg(reduction)
    return checked


def margin_ranking_loss(input1, input2, target, margin, reduction):
    """max(0, -target * (input1 - input2) + margin), reduced: PyTorch's, after its check that
    the three have one number of dimensions."""
    a, b, y = _operands((input1, input2, target), ("input1", "input2", "target"),
                        "margin_ranking_loss", reduction)
    if not len((<TensorCore>a).sizes) == len((<TensorCore>b).sizes) == \
            len((<TensorCore>y).sizes):  # PyTorch's words
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same "
                           f"dimension but got sizes: input1: {_size(a)}, input2: {_size(b)}, "
                           f"target: {_size(y)} ")
    return reduced((-y * (a - b) + margin).clamp(0, None), reduction)


def hinge_embedding_loss(input, target, margin, reduction):
    """input where target is 1, max(0, margin - input) where it is -1 (aten's sum of the two
    where()s, so any other target takes both), reduced."""
    x, y = _operands((input, target), ("input", "target"), "hinge_embedding_loss", reduction)
    zeros = x.new_zeros(())
    losses = elementwise.where(y != 1, (margin - x).clamp(0, None), zeros) + \
        elementwise.where(y != -1, x, zeros)
    return reduced(losses, reduction)


def soft_margin_loss(input, target, reduction):
    """log(1 + exp(-target * input)), reduced, as aten's log1p(exp(-input * target))."""
    x, y = _operands((input, target), ("input", "target"), "soft_margin_loss", reduction)
    return reduced((-x * y).exp().log1p(), reduction)


def cosine_embedding_loss(input1, input2, target, margin, reduction):
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1, along
    the last dimension; the cosine aten's, each squared norm plus 1e-12."""
    a, b, y = _operands((input1, input2, target), ("input1", "input2", "target"),
                        "cosine_embedding_loss", reduction)
    dims = len((<TensorCore>y).sizes)
    if dims > 1:  # PyTorch's words
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if not len((<TensorCore>a).sizes) == len((<TensorCore>b).sizes) == dims + 1:
        raise RuntimeError(f"{dims}D target tensor expects {dims + 1}D input tensors, but found "
                           f"inputs with sizes {list((<TensorCore>a).sizes)} and "
                           f"{list((<TensorCore>b).sizes)}.")
    cosine = (a * b).sum(dims) / (((a * a).sum(dims) + 1e-12)
                                  * ((b * b).sum(dims) + 1e-12)).sqrt()
    zeros = cosine.new_zeros(())
    losses = elementwise.where(y == 1, 1 - cosine, zeros) + \
        elementwise.where(y == -1, (cosine - margin).clamp(0, None), zeros)
    return reduced(losses, reduction)


class MarginLossCore(ModuleCore):
    """What MarginRankingLoss, HingeEmbeddingLoss and CosineEmbeddingLoss share: a margin and
    a reduction."""

    def init(self, margin, reduction):
        reduction_arg(reduction)
        ModuleCore.init(self)
        self.margin = margin
        self.reduction = reduction


class MarginRankingLossCore(MarginLossCore):
    """margin_ranking_loss of (input1, input2, target)."""

    def c_forward(self, input1, input2, target):
        return margin_ranking_loss(input1, input2, target, self.margin, self.reduction)


class HingeEmbeddingLossCore(MarginLossCore):
    """hinge_embedding_loss of (input, target)."""

    def c_forward(self, input, target):
        return hinge_embedding_loss(input, target, self.margin, self.reduction)


class SoftMarginLossCore(ModuleCore):
    """soft_margin_loss of (input, target)."""

    def init(self, reduction):
        reduction_arg(reduction)
        ModuleCore.init(self)
        self.reduction = reduction

    def c_forward(self, input, target):
        return soft_margin_loss(input, target, self.reduction)


class CosineEmbeddingLossCore(MarginLossCore):
    """cosine_embedding_loss of (input1, input2, target)."""

    def c_forward(self, input1, input2, target):
        return cosine_embedding_loss(input1, input2, target, self.margin, self.reduction)


cdef int beta_arg(object beta) except -1:
    if beta < 0:  # PyTorch's check and message
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    return 0


cdef int delta_arg(object delta) except -1:
    if not delta > 0:  # PyTorch's check and message
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    return 0


def smooth_l1_loss(input, target, reduction, beta):
    """0.5 * d ** 2 / beta where d = |input - target| < beta, d - 0.5 * beta elsewhere;
    l1_loss for beta 0."""
    beta_arg(beta)
    distance = difference(input, target, reduction, "smooth_l1_loss").abs()
    if beta == 0:
        return reduced(distance, reduction)
    losses = elementwise.where(distance < beta, distance * distance * (0.5 / beta),
                               distance - 0.5 * beta)
    return reduced(losses, reduction)


def huber_loss(input, target, reduction, delta):
    """0.5 * d ** 2 where d = |input - target| < delta, delta * (d - 0.5 * delta) elsewhere."""
    delta_arg(delta)
    distance = difference(input, target, reduction, "huber_loss").abs()
    losses = elementwise.where(distance < delta, distance * distance * 0.5,
                               (distance - 0.5 * delta) * delta)
    return reduced(losses, reduction)


cdef tuple probability_operands(object input, object target, object weight, object reduction,
                                str name):
    """(input, target) of the binary cross entropies, checked with weight and reduction."""
    cdef TensorCore x = tensor.own_tensor_arg(input, f"{name}: input")
    cdef TensorCore y = tensor.own_tensor_arg(target, f"{name}: target")
    reduction_arg(reduction)
    if weight is not None:
        tensor.own_tensor_arg(weight, f"{name}: weight")
    if not x.dtype_object.floating:
        raise DtypeError(f"{name}: input must be floating point, got {x.dtype_object.name}")
    if y.dtype_object is not x.dtype_object:  # PyTorch: "Found dtype Long but expected Float"
        raise DtypeError(f"{name}: target must have input's dtype {x.dtype_object.name}, got "
                         f"{y.dtype_object.name}")
    return x, y


def binary_cross_entropy(input, target, weight, reduction):
    """-(y * log(x) + (1 - y) * log(1 - x)) * weight, reduced, each log at least -100 (PyTorch's
    clamp, so a probability of exactly 0 or 1 costs 100). One recorded node, whose gradient is
    PyTorch's (formulas.pyx)."""
    x, y = probability_operands(input, target, weight, reduction, "binary_cross_entropy")
    if (<TensorCore>y).sizes != (<TensorCore>x).sizes:  # PyTorch's check and message
        raise ValueError(f"Using a target size ({_size(y)}) that is different to the input "
                         f"size ({_size(x)}) is deprecated. Please ensure they have the same "
                         "size.")
    if (<TensorCore>x).device_index < 0 and not ((x >= 0) & (x <= 1)).all().item():
        # PyTorch's CPU check (NaN fails it too); on a device it would read the values back
        raise RuntimeError("all elements of input should be between 0 and 1")
    cdef DtypeCore dtype = (<TensorCore>x).dtype_object
    with autograd.no_grad_block():
        probability = copies.to(<TensorCore>x, None, computed_in(dtype), False, False)
        truth = copies.to(<TensorCore>y, None, computed_in(dtype), False, False)
        losses = ((truth - 1) * (-probability).log1p().clamp(-100, None)
                  - truth * probability.log().clamp(-100, None))
        losses = copies.to(<TensorCore>losses, None, dtype, False, False)
    if tensor.tracked(<TensorCore>x, y):
        losses = tensor.recorded(losses, ops.OP_BINARY_CROSS_ENTROPY, (x, y), (x, y))
    return reduced(losses if weight is None else losses * weight, reduction)


def binary_cross_entropy_with_logits(input, target, weight, reduction, pos_weight):
    """(1 - y) * x + (1 + (pos_weight - 1) * y) * log(1 + exp(-x)), times weight, reduced:
    binary_cross_entropy of sigmoid(x), computed from the logits without overflow (log(1 +
    exp(-x)) as log1p(exp(-|x|)) + max(-x, 0), as PyTorch's). One recorded node, whose gradient
    is PyTorch's (formulas.pyx)."""
    name = "binary_cross_entropy_with_logits"
    x, y = probability_operands(input, target, weight, reduction, name)
    if pos_weight is not None:
        tensor.own_tensor_arg(pos_weight, f"{name}: pos_weight")
    if (<TensorCore>y).sizes != (<TensorCore>x).sizes:  # PyTorch's check and message
        raise ValueError(f"Target size ({_size(y)}) must be the same as input size "
                         f"({_size(x)})")
    cdef DtypeCore dtype = (<TensorCore>x).dtype_object
    with autograd.no_grad_block():
        logits = copies.to(<TensorCore>x, None, computed_in(dtype), False, False)
        truth = copies.to(<TensorCore>y, None, computed_in(dtype), False, False)
        softplus_of_negative = (-logits.abs()).exp().log1p() + (-logits).relu()
        if pos_weight is not None:
            softplus_of_negative = softplus_of_negative * ((pos_weight - 1) * truth + 1)
        losses = (1 - truth) * logits + softplus_of_negative
        losses = copies.to(<TensorCore>losses, None, dtype, False, False)
    if tensor.tracked(<TensorCore>x, y):
        losses = tensor.recorded(losses, ops.OP_BINARY_CROSS_ENTROPY_WITH_LOGITS, (x, y),
                                 (x, y, pos_weight))
    return reduced(losses if weight is None else losses * weight, reduction)


cdef int kl_reduction_arg(object reduction) except -1:
    if reduction not in ("none", "batchmean", "sum", "mean"):  # PyTorch's message
        raise ValueError(f"{str(reduction)[:100]} is not a valid value for reduction")
    return 0


def kl_div(input, target, reduction, log_target):
    """target * (log(target) - input) pointwise (0 where target is 0, as xlogy), or with
    log_target exp(target) * (target - input); reduced, batchmean dividing the sum by the
    first dimension, as PyTorch's kl_div."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "kl_div: input")
    cdef TensorCore y = tensor.own_tensor_arg(target, "kl_div: target")
    kl_reduction_arg(reduction)
    if reduction == "mean":  # PyTorch's warning
        warn_caller("reduction: 'mean' divides the total loss by both the batch size and the "
                    "support size.'batchmean' divides only by the batch size, and aligns with "
                    "the KL div math definition.'mean' will be changed to behave the same as "
                    "'batchmean' in the next major release.")
    if log_target:
        losses = y.exp() * (y - x)
    else:
        # y * log(y) as xlogy: 0 where y is 0, the log taken of 1 there so that neither the
        # value nor the gradient of the unselected branch is NaN
        absent = y == 0
        y_log_y = elementwise.where(absent, 0, y * elementwise.where(absent, 1, y).log())
        losses = y_log_y - y * x
    if reduction == "batchmean":
        return losses.sum() / (x.sizes[0] if x.sizes else 1)
    return reduced(losses, reduction)


def pad(input, pad, mode, value):
    """input with pad[2i] elements before and pad[2i + 1] after its last-but-i dimension, of
    value (constant mode, PyTorch's default), or cropped where a pad is negative; the copy of
    input is a recorded assignment, so the gradient reaches input."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "pad: input")
    if not isinstance(pad, (tuple, list)):
        raise TypeError(f"pad: pad must be a tuple or list of ints, got {errors.shown(pad)}")
    pads = tuple(pad)
    arguments.require_ints(pads, "pad: pad")
    if not arguments.is_scalar(value):
        raise TypeError(f"pad: value must be a bool, int or float, got {errors.shown(value)}")
    for each in pads:
        errors.int_arg(each, "pad", INT64_MIN, INT64_MAX)
    dtypes.check_scalar(value, x.dtype_object, "value")
    if mode not in PAD_MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(map(repr, PAD_MODES))}, got "
                         f"{errors.shown(mode)}")
    if len(pads) % 2:  # PyTorch's messages
        raise ValueError(f"Padding length must be divisible by 2, got a pad of {len(pads)} "
                         "items")
    if len(pads) // 2 > len(x.sizes):
        raise ValueError("Padding length too large")
    if mode != "constant":
        return padded_from_input(x, pads, mode, value)
    shape, source, target = list(x.sizes), [slice(None)] * len(x.sizes), \
        [slice(None)] * len(x.sizes)
    for pair in range(len(pads) // 2):
        dim = len(x.sizes) - 1 - pair
        before, after = pads[2 * pair], pads[2 * pair + 1]
        size = x.sizes[dim] + before + after
        if size < 0:
            raise ValueError(f"The input size {x.sizes[dim]}, plus negative padding {before} "
                             f"and {after} resulted in a negative output size, which is "
                             f"invalid. Check dimension {dim} of your input.")
        shape[dim] = size
        kept = x.sizes[dim] - max(-before, 0) - max(-after, 0)
        source[dim] = slice(max(-before, 0), max(-before, 0) + max(kept, 0))
        target[dim] = slice(max(before, 0), max(before, 0) + max(kept, 0))
    output = x.new_full(tuple(shape), value)
    output[tuple(target)] = x[tuple(source)]
    return output


PAD_MODES = ("constant", "reflect", "replicate", "circular")
PADDED_DIMENSIONS = "WHD"  # PyTorch's names of the last, second and third last dimensions


cdef object padded_from_input(TensorCore x, tuple pads, str mode, object value):
    """F.pad's reflect, replicate and circular modes, with PyTorch's rules and messages
    (aten/src/ATen/native/PadNd.cpp, ReflectionPad.cpp, ReplicationPadding.cpp): one to three
    pairs for the last dimensions of an input with one more (or two, a batch) dimension. Each
    padded dimension is index_select()ed with the positions it reads, made on the input's
    device (an arange and integer arithmetic: nothing from the host, so a capture takes it),
    so the gradient is index_select's, each copy's gradient summed into the element it read."""
    cdef int pairs = len(pads) // 2
    cdef int ndim = len(x.sizes)
    if value != 0:  # functional.pad gives 0 for None
        raise ValueError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if pairs > 3 or ndim not in (pairs + 1, pairs + 2):
        raise ValueError(f"Padding size {len(pads)} is not supported for {ndim}D input tensor.")
    if mode != "circular" and not all(x.sizes[ndim - pairs - 1:]):
        raise ValueError(f"Expected {pairs + 1}D or {pairs + 2}D (batch mode) tensor with "
                         "possibly 0 batch size and other non-zero dimensions for input, but "
                         f"got: {list(x.sizes)}")
    sizes, outputs = [], []
    for pair in range(pairs):
        size = x.sizes[ndim - 1 - pair]
        before, after = pads[2 * pair], pads[2 * pair + 1]
        if mode == "reflect" and (before >= size or after >= size):
            raise ValueError(f"Argument #{4 + 2 * pair}: Padding size should be less than the "
                             "corresponding input dimension, but got: padding "
                             f"({before}, {after}) at dimension {ndim - 1 - pair} of input "
                             f"{list(x.sizes)}")
        # circular crops by a negative pad first, then wraps around what is left
        kept = size - max(-before, 0) - max(-after, 0)
        if mode == "circular" and (before > size or after > size or
                                   (kept >= 0 and max(before, after) > kept)):
            raise ValueError("Padding value causes wrapping around more than once.")
        sizes.append(size)
        outputs.append(size + before + after)
    smallest = 1 if mode == "replicate" or pairs == 1 else 0
    if mode == "circular" and min(outputs) < 0:
        raise ValueError("Negative padding value is resulting in an empty dimension")
    if mode != "circular" and min(outputs) < smallest:
        names = PADDED_DIMENSIONS[pairs - 1::-1]
        if pairs == 1:
            raise ValueError(f"input (W: {sizes[0]}) is too small. Calculated output W: "
                             f"{outputs[0]}")
        raise ValueError("Calculated output " + " ".join(
            f"{name}: {outputs[pairs - 1 - i]}" for i, name in enumerate(names)) +
            f" must be >= {smallest} in every dimension (input " + ", ".join(
            f"{name}: {sizes[pairs - 1 - i]}" for i, name in enumerate(names)) + ")")
    device = "cpu" if x.device_index < 0 else f"cuda:{x.device_index}"
    result = x
    for pair in range(pairs):
        before, after, size = pads[2 * pair], pads[2 * pair + 1], sizes[pair]
        if before == after == 0:
            continue
        # the input position each output element reads, counted from the input's first
        positions = factories.arange(-before, size + after, 1, named_dtype("int64"), device,
                                     False)
        if mode == "replicate":
            positions = positions.clamp(0, size - 1)
        elif mode == "circular":  # wrapped around the elements the negative pads keep
            first, kept = max(-before, 0), size - max(-before, 0) - max(-after, 0)
            if kept:  # else nothing is kept, and nothing is padded either (checked above)
                positions = (positions - first).remainder(kept) + first
        else:  # reflected at the first and the last element, neither repeated
            positions = (size - 1) - ((size - 1) - positions.abs()).abs()
        result = result.index_select(ndim - 1 - pair, positions)
    return result if result is not x else x.clone()


def one_hot(input, num_classes):
    """int64 ones where the last dimension's index equals input's value, as PyTorch's one_hot;
    values checked on the CPU (on a device they would be read back; there a value out of
    range gives a row of zeros)."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "one_hot: input")
    if x.dtype_object.name != "int64":  # PyTorch's message
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        if not x.element_count:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = x.max().item() + 1  # read back, as PyTorch's
    if x.device_index < 0 and x.element_count:
        if x.min().item() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if x.max().item() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    return (x.unsqueeze(-1) == class_indices(num_classes, x)).to(dtype=x.dtype_object)


def normalize(input, p, dim, eps):
    """input / max(norm of input along dim, eps), as PyTorch's F.normalize."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "normalize: input")
    if isinstance(dim, bool) or not isinstance(dim, (int, tuple, list)):  # None is not all
        raise TypeError(f"normalize: dim must be an int or a tuple of ints, got "
                        f"{errors.shown(dim)}")
    return x / x.norm(p, dim, True).clamp(eps, None)


def cosine_similarity(x1, x2, dim, eps):
    """PyTorch's (aten/src/ATen/native/Distance.cpp): the operands broadcast, each divided by
    its 2-norm along dim, then their product summed along dim. Each norm is raised to eps with
    no gradient through that clamp (PyTorch clamps a clone in place without grad), so a
    gradient flows through the norm itself as PyTorch's does. Integer operands compute in the
    common floating dtype, which must be floating point."""
    cdef TensorCore a = tensor.own_tensor_arg(x1, "cosine_similarity: x1")
    cdef TensorCore b = tensor.own_tensor_arg(x2, "cosine_similarity: x2")
    errors.int_arg(dim, "dim", INT64_MIN, INT64_MAX)
    cdef DtypeCore common = promotion.result_type(a, b)
    if not common.floating:
        raise DtypeError(f"cosine_similarity: expected common dtype to be floating point, yet "
                         f"common dtype is {common.name}")
    shape = arguments.broadcast_shape(a.sizes, b.sizes, "cosine_similarity")
    operands = []
    for operand in (a, b):
        if not (<TensorCore>operand).dtype_object.floating:
            operand = copies.to(<TensorCore>operand, None, common, False, False)
        operands.append((<TensorCore>operand).c_expand(shape))
    a, b = operands
    norms = [copies.clone(<TensorCore>a.norm(2, dim, True)),
             copies.clone(<TensorCore>b.norm(2, dim, True))]
    with autograd.no_grad_block():
        for norm in norms:
            norm.clamp_(eps, None)
    return ((a / norms[0]) * (b / norms[1])).sum(dim)


def pairwise_distance(x1, x2, p, eps, keepdim):
    """PyTorch's: the p-norm of x1 - x2 + eps along the last dimension of the two broadcast."""
    cdef TensorCore a = tensor.own_tensor_arg(x1, "pairwise_distance: x1")
    cdef TensorCore b = tensor.own_tensor_arg(x2, "pairwise_distance: x2")
    return ((a - b) + eps).norm(p, max(len(a.sizes), len(b.sizes)) - 1, keepdim)


cdef int ignore_index_arg(object ignore_index) except -1:
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"ignore_index must be an int, got {type(ignore_index).__name__}")
    if not INT64_MIN <= ignore_index <= INT64_MAX:
        raise ValueError(f"ignore_index {errors.shown(ignore_index)} does not fit in int64")
    return 0


cdef str _size(TensorCore value):
    return f"torch.Size({list(value.sizes)})"


def linear(input, weight, bias):
    """input @ weight.T + bias, as Linear's forward."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "linear: input")
    cdef TensorCore w = tensor.own_tensor_arg(weight, "linear: weight")
    output = linalg.matmul(x, w.c_t() if len(w.sizes) == 2 else w)
    if bias is None:
        return output
    return elementwise.add(<TensorCore>output, tensor.own_tensor_arg(bias, "linear: bias"))


cdef object class_weight(object weight, TensorCore x, int class_dim, str name):
    """cross_entropy's and nll_loss's weight, checked against input x: None, or one weight per
    class in a 1-D tensor of x's dtype on x's device (PyTorch's messages)."""
    if weight is None:
        return None
    cdef TensorCore w = tensor.own_tensor_arg(weight, f"{name}: weight")
    classes = x.sizes[class_dim] if x.sizes else 0
    if len(w.sizes) != 1 or w.sizes[0] != classes:
        raise RuntimeError(f"weight tensor should be defined either for all {classes} classes "
                           f"or no classes but got weight tensor of shape: {list(w.sizes)}")
    tensor.check_device(x, w, name)
    if w.dtype_object is not x.dtype_object:
        raise RuntimeError(f"expected scalar type {x.dtype_object.name} but found "
                           f"{w.dtype_object.name} (weight)")
    return w


def cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing):
    """PyTorch's cross_entropy: class indices or class probabilities along dimension 1 (0 for
    an input of one dimension), each class's loss times its weight where weight is given."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "cross_entropy: input")
    cdef TensorCore y = tensor.own_tensor_arg(target, "cross_entropy: target")
    reduction_arg(reduction)
    ignore_index_arg(ignore_index)
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) or \
            not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                         f"{label_smoothing}")
    if not x.sizes:
        raise ValueError("cross_entropy: input must have at least 1 dimension (the classes), "
                         "got a 0-d tensor")
    cdef int class_dim = 0 if len(x.sizes) == 1 else 1
    classes = x.sizes[class_dim]
    w = class_weight(weight, x, class_dim, "cross_entropy")
    logp = log_softmax(x, class_dim)
    if y.dtype_object.floating:  # class probabilities, of input's shape
        if y.sizes != x.sizes:
            raise RuntimeError(f"cross_entropy: target of class probabilities must have "
                               f"input's shape {list(x.sizes)}, got {list(y.sizes)}")
        if y.dtype_object is not x.dtype_object:
            raise RuntimeError(f"expected scalar type {x.dtype_object.name} but found "
                               f"{y.dtype_object.name}")
        if label_smoothing:
            y = y * (1 - label_smoothing) + label_smoothing / classes
        if w is not None:  # along the class dimension, as PyTorch's (the mean stays per item)
            logp = logp * w.reshape(classes, *([1] * (len(x.sizes) - class_dim - 1)))
        losses = -(logp * y).sum(class_dim)
        if reduction == "mean":
            return losses.sum() / (x.element_count // classes if classes else 1)
        return reduced(losses, reduction)
    return picked_losses(logp, y, w, class_dim, ignore_index, reduction, label_smoothing,
                         "cross_entropy")


def nll_loss(input, target, weight, ignore_index, reduction):
    """PyTorch's nll_loss: -input at each target class index, times the class's weight where
    weight is given, input the log-probabilities with the classes along dimension 1 (0 for an
    input of one dimension)."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "nll_loss: input")
    cdef TensorCore y = tensor.own_tensor_arg(target, "nll_loss: target")
    reduction_arg(reduction)
    ignore_index_arg(ignore_index)
    if not x.sizes:
        raise ValueError("nll_loss: input must have at least 1 dimension (the classes), got a "
                         "0-d tensor")
    if not x.dtype_object.floating:
        raise TypeError(f"nll_loss: input must be floating point (log-probabilities), got "
                        f"{x.dtype_object.name}")
    cdef int class_dim = 0 if len(x.sizes) == 1 else 1
    return picked_losses(x, y, class_weight(weight, x, class_dim, "nll_loss"), class_dim,
                         ignore_index, reduction, 0.0, "nll_loss")


cdef object picked_losses(TensorCore logp, TensorCore y, object weight, int class_dim,
                          object ignore_index, str reduction, object label_smoothing, str name):
    """-logp at each class index of y (nll_loss, and cross_entropy of class indices), with
    the class weights, label smoothing, ignore_index and the reduction. With weights, each
    loss is its class's weight times -logp (the smoothing term -(logp * weight).sum() over
    the classes), and the mean divides by the kept targets' weights, as PyTorch's
    (aten's nll_loss and cross_entropy_loss_label_smoothing)."""
    if y.dtype_object.name != "int64":  # PyTorch's nll_loss takes Long indices only
        raise RuntimeError(f"{name}: target must hold class indices (int64)"
                           + (" or class probabilities (floating point)"
                              if name == "cross_entropy" else "")
                           + f", got {y.dtype_object.name}")
    classes = logp.sizes[class_dim]
    expected = logp.sizes[:class_dim] + logp.sizes[class_dim + 1:]
    if y.sizes != expected:
        raise ValueError(f"Expected target size {list(expected)}, got {list(y.sizes)}")
    if y.device_index < 0:  # on a device the check would read the targets back (a sync)
        for value in set(y.detach().flatten().tolist()):
            if value != ignore_index and not 0 <= value < classes:
                raise IndexError(f"Target {value} is out of bounds.")
    if (y.device_index == logp.device_index and not label_smoothing
            and (weight is None or not (<TensorCore>weight).grad_required)):
        # One node; on a CUDA device one kernel each way (reduction.pyx, Note [Fused nll_loss]).
        return fused_nll_loss(logp, y, weight, class_dim, ignore_index,
                              REDUCTION_CODES[reduction])
    # The classes last, one row per prediction, and each target's entry gathered (an ignored
    # target reads class 0, multiplied by 0 below).
    if class_dim == 1 and len(logp.sizes) > 2:
        order = (0,) + tuple(range(2, len(logp.sizes))) + (1,)
        logp = logp.permute(*order)
    ignored = y == ignore_index
    indices = y.masked_fill(ignored, 0)
    kept = (~ignored).to(dtype=logp.dtype_object)
    losses = -scatter_gather.gather(logp, -1, indices.unsqueeze(-1)).squeeze(-1)
    if weight is not None:  # each target's class weight (the classes are last now)
        targets_weight = weight.index_select(0, indices.flatten()).reshape(*y.sizes)
        losses = losses * targets_weight
    if label_smoothing:
        spread = logp.sum(-1) if weight is None else (logp * weight).sum(-1)
        losses = losses * (1 - label_smoothing) - spread * (label_smoothing / classes)
    losses = losses * kept
    if weight is not None:
        kept = kept * targets_weight  # what the mean divides by
    if reduction == "mean":
        return losses.sum() / kept.sum()
    return reduced(losses, reduction)


# 0, 1, ..., classes - 1 on a device, made once per class count and device and kept
# (one_hot's classes, conv2d's and max_pool2d's patches, attention's causal mask). One
# made while a capture is open in the process is not kept: it may come from a graph's private
# pool, freed with the graph, which no process-wide cache may hold. A kept one is waited for
# once, so that any stream may read it later.
_CLASS_INDICES = {}


cdef object class_indices(object classes, TensorCore like):
    cdef cudaStream_t stream
    key = (classes, like.device_index)
    found = _CLASS_INDICES.get(key)
    if found is not None:
        return found
    device = "cpu" if like.device_index < 0 else f"cuda:{like.device_index}"
    found = factories.arange(0, classes, 1, named_dtype("int64"), device, False)
    if like.device_index < 0:
        _CLASS_INDICES[key] = found
    elif not _device.capture_open():
        stream = _stream.current_stream_handle(like.device_index)
        with nogil:
            errors.check(cyruntime.cudaStreamSynchronize(stream), "cudaStreamSynchronize")
        _CLASS_INDICES[key] = found
    return found


# --------------------------------------------------------------------------------------------
# Convolution (docs/design.md, "tensorplay.nn")

# Note [Convolution by gathered patches]
# conv2d is im2col, as PyTorch's slow path computes it: the padded input is flattened per
# sample, index_select gathers every kernel-sized patch into the columns of a (channels * kh *
# kw, out_h * out_w) matrix, and one matrix product with the weight (cuBLASLt on a device) gives
# every output channel at every position. The gather's gradient is index_select's (an
# index_add), so autograd needs nothing of its own. The index of each patch element is
# arithmetic on cached arange tensors (class_indices), device kernels that a capture takes.
# Groups are gathered and multiplied one at a time. The index itself is
# rebuilt on every call (a few small integer kernels), not cached: one built during a capture
# lives in that graph's pool, which no process-wide cache may hold.

cdef tuple pair_arg(object value, str argument, long long low):
    """An int or a tuple or list of two ints, each at least low, as (first, second)."""
    return spatial_arg(value, argument, low, 2)


cdef tuple spatial_arg(object value, str argument, long long low, int count):
    """An int or a tuple or list of count ints, each at least low, as a tuple of count."""
    pair = (value,) * count if isinstance(value, int) and not isinstance(value, bool) else value
    ints = "one int" if count == 1 else "two ints"
    if not isinstance(pair, (tuple, list)) or any(
            isinstance(v, bool) or not isinstance(v, int) for v in pair):
        raise TypeError(f"{argument} must be an int or a tuple of {ints}, got "
                        f"{errors.shown(value)}")
    for each in pair:  # an int no C integer holds is a wrong value, whatever the count
        errors.int_arg(each, argument, INT64_MIN, INT64_MAX)
    if len(pair) != count:
        raise TypeError(f"{argument} must be an int or a tuple of {ints}, got "
                        f"{errors.shown(value)}")
    if min(pair) < low:  # PyTorch's words
        raise ValueError({1: f"non-positive {argument} is not supported",
                          0: f"negative {argument} is not supported"}[low] +
                         f" (got {errors.shown(value)})")
    return tuple(pair)


cdef tuple conv_padding(object padding, tuple kernel, tuple stride, tuple dilation):
    """(top, bottom, left, right) of padding: ints, "valid" (none) or "same" (the output keeps
    the input's size, the odd element after, as PyTorch's; stride 1 only)."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding != "same":
            raise ValueError(f"Invalid padding string {errors.shown(padding)}, should be one "
                             "of {'valid', 'same'}")
        if stride != (1, 1):
            raise ValueError("padding='same' is not supported for strided convolutions")
        sides = []
        for size, spacing in zip(kernel, dilation):
            total = spacing * (size - 1)
            sides += [total // 2, total - total // 2]
        return tuple(sides)
    height, width = pair_arg(padding, "padding", 0)
    return (height, height, width, width)


cdef TensorCore patch_index(tuple counts, tuple sizes, TensorCore like):
    """For a padded (channels, height, width) sample flattened, the flat position of element
    (c, i, j) of every patch, as a (channels * kh * kw, out_h * out_w) int64 matrix; counts is
    (channels, kh, kw, out_h, out_w) and sizes (height, width, stride_h, stride_w, dilation_h,
    dilation_w)."""
    channels, kh, kw, out_h, out_w = counts
    height, width, stride_h, stride_w, dilation_h, dilation_w = sizes
    rows = (class_indices(kh, like) * dilation_h).reshape(kh, 1, 1, 1) + \
        (class_indices(out_h, like) * stride_h).reshape(1, 1, out_h, 1)
    columns = (class_indices(kw, like) * dilation_w).reshape(1, kw, 1, 1) + \
        (class_indices(out_w, like) * stride_w).reshape(1, 1, 1, out_w)
    within = rows * width + columns  # (kh, kw, out_h, out_w)
    planes = (class_indices(channels, like) * (height * width)).reshape(channels, 1, 1, 1, 1)
    return (planes + within.unsqueeze(0)).reshape(channels * kh * kw, out_h * out_w)


def conv1d(input, weight, bias, stride, padding, dilation, groups):
    """PyTorch's F.conv1d: conv2d's of the input and weight with a height of one (Note
    [Convolution by gathered patches])."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(input, weight, bias, stride, padding, dilation, groups):
    """PyTorch's F.conv2d (Note [Convolution by gathered patches])."""
    return convolution(input, weight, bias, stride, padding, dilation, groups, 2)


cdef object convolution(object input, object weight, object bias, object stride,
                        object padding, object dilation, object groups, int spatial):
    """conv1d (spatial 1) or conv2d (spatial 2), checked with PyTorch's messages in the
    caller's shapes; a 1-D convolution is computed as a 2-D one of height one."""
    name = f"conv{spatial}d"
    cdef TensorCore x = tensor.own_tensor_arg(input, f"{name}: input")
    cdef TensorCore w = tensor.own_tensor_arg(weight, f"{name}: weight")
    cdef TensorCore b = optional_tensor(bias, f"{name}: bias")
    if not isinstance(padding, str):
        spatial_arg(padding, "padding", 0, spatial)  # every argument's type before any value
    strides = spatial_arg(stride, "stride", 1, spatial)
    dilations = spatial_arg(dilation, "dilation", 1, spatial)
    errors.int_arg(groups, "groups", INT64_MIN, INT64_MAX)
    if groups <= 0:
        raise ValueError(f"non-positive groups is not supported (got {groups})")
    if len(x.sizes) not in (spatial + 1, spatial + 2):  # PyTorch's message
        raise ShapeError(f"Expected {spatial + 1}D (unbatched) or {spatial + 2}D (batched) input "
                         f"to {name}, but got input of size: {list(x.sizes)}")
    if len(w.sizes) != spatial + 2:
        kernel_names = "kW" if spatial == 1 else "kH, kW"
        raise ShapeError(f"{name}: weight must be {spatial + 2}-D (out_channels, in_channels / "
                         f"groups, {kernel_names}), got shape {list(w.sizes)}")
    cdef bint unbatched = len(x.sizes) == spatial + 1
    if unbatched:
        x = x.unsqueeze(0)
    channels = x.sizes[1]
    out_channels, group_channels = w.sizes[0], w.sizes[1]
    if group_channels * groups != channels:
        raise ShapeError(f"Given groups={groups}, weight of size {list(w.sizes)}, expected "
                         f"input{list(x.sizes)} to have {group_channels * groups} channels, but "
                         f"got {channels} channels instead")
    if out_channels % groups:
        raise ShapeError(f"Given groups={groups}, expected weight to be divisible by {groups} at "
                         f"dimension 0, but got weight of size {list(w.sizes)} instead")
    if b is not None and b.sizes != (out_channels,):
        raise ShapeError(f"Given weight of size {list(w.sizes)}, expected bias to be 1-dimensional "
                         f"with {out_channels} elements, but got bias of size {list(b.sizes)} "
                         "instead")
    if w.dtype_object is not x.dtype_object or (b is not None and
                                                b.dtype_object is not x.dtype_object):
        raise DtypeError(f"{name}: Input type ({x.dtype_object.name}) and weight type "
                         f"({w.dtype_object.name}) should be the same")
    if not x.dtype_object.floating:
        raise DtypeError(f"{name}: input must be floating point, got {x.dtype_object.name}")
    tensor.check_device(x, w, name)
    if b is not None:
        tensor.check_device(x, b, name)
    if spatial == 1:  # a height of one: no padding, stride or dilation along it
        x, w = x.unsqueeze(2), w.unsqueeze(2)
        if not isinstance(padding, str):
            padding = (0,) + spatial_arg(padding, "padding", 0, 1)
        strides, dilations = (1,) + strides, (1,) + dilations
    samples, channels, height, width = x.sizes
    kh, kw = w.sizes[2], w.sizes[3]
    top, bottom, left, right = conv_padding(padding, (kh, kw), strides, dilations)
    padded_h, padded_w = height + top + bottom, width + left + right
    span_h, span_w = dilations[0] * (kh - 1) + 1, dilations[1] * (kw - 1) + 1
    if span_h > padded_h or span_w > padded_w:  # PyTorch's message
        raise ShapeError(
            f"Calculated padded input size per channel: ({padded_w}). Kernel size: ({span_w}). "
            "Kernel size can't be greater than actual input size" if spatial == 1 else
            f"Calculated padded input size per channel: ({padded_h} x {padded_w}). Kernel size: "
            f"({span_h} x {span_w}). Kernel size can't be greater than actual input size")
    out_h = (padded_h - span_h) // strides[0] + 1
    out_w = (padded_w - span_w) // strides[1] + 1
    if top or bottom or left or right:
        x = pad(x, (left, right, top, bottom), "constant", 0)
    flat = x.reshape(samples, channels * padded_h * padded_w)
    index = patch_index((group_channels, kh, kw, out_h, out_w),
                        (padded_h, padded_w) + strides + dilations, x)
    per_group, plane = out_channels // groups, group_channels * padded_h * padded_w
    outputs = []
    for group in range(groups):
        taken = index if group == 0 else index + group * plane
        columns = flat.index_select(1, taken.reshape(-1)).reshape(
            samples, group_channels * kh * kw, out_h * out_w)
        kernels = w[group * per_group:(group + 1) * per_group].reshape(
            per_group, group_channels * kh * kw)
        outputs.append(linalg.matmul(<TensorCore>kernels, <TensorCore>columns))
    output = outputs[0] if groups == 1 else copies.cat(outputs, 1)
    if b is not None:
        output = output + b.reshape(1, out_channels, 1)
    output = output.reshape(samples, out_channels, out_h, out_w)
    if spatial == 1:
        output = output.squeeze(2)
    return output.squeeze(0) if unbatched else output


def max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    """PyTorch's F.max_pool2d by gathered patches (Note [Convolution by gathered patches]):
    each channel's windows of the input padded with -inf, and the largest of each, max(dim)'s
    (the first largest, NaN before any number, the gradient to it, as PyTorch's kernels)."""
    name = "max_pool2d"
    cdef TensorCore x = tensor.own_tensor_arg(input, f"{name}: input")
    kernel, strides, pads = pool_arguments(kernel_size, stride, padding)
    dilations = pair_arg(dilation, "dilation", 1)
    errors.bool_arg(ceil_mode, "ceil_mode")
    errors.bool_arg(return_indices, "return_indices")
    if return_indices:
        raise ValueError("max_pool2d: return_indices=True is not offered (the indices of the "
                         "largest elements are not gathered back here); leave it False")
    if x.dtype_object.code == dtypes.CODE_BOOL:  # PyTorch's kernels take every other dtype
        raise BoolNotImplementedError("max_pool2d: not implemented for 'Bool' tensors, as "
                                      "PyTorch's; convert with .to(tensorplay.uint8) first")
    geometry = pool_geometry(x, name, kernel, strides, pads, dilations, ceil_mode)
    # The padding never wins: -inf, or an integer dtype's smallest value.
    filler = -math.inf if x.dtype_object.floating else \
        (-(1 << (8 * x.dtype_object.itemsize - 1)) if x.dtype_object.signed else 0)
    windows = pooled_windows(x, filler, kernel, strides, dilations, geometry)
    return windows.max(1)[0].reshape(x.sizes[:-2] + geometry[0])


def adaptive_avg_pool2d(input, output_size):
    """PyTorch's adaptive average pooling (aten/src/ATen/native/AdaptiveAveragePooling.cpp):
    output element (i, j) of each plane averages the input's rows floor(i * H / oh) to
    ceil((i + 1) * H / oh) (its start_index and end_index) and its columns likewise. Computed as
    two products with averaging matrices made on the device (rows (oh, H) @ x @ columns (ow,
    W) transposed), so a capture takes it and the gradient is matmul's; an output of (1, 1) is
    each plane's mean. 16-bit floats in float32, as PyTorch's kernel accumulates them."""
    cdef TensorCore x = tensor.own_tensor_arg(input, "adaptive_avg_pool2d: input")
    pair = adaptive_output_arg(output_size)
    cdef int ndim = len(x.sizes)
    if ndim < 3:  # PyTorch's messages
        raise ShapeError("Input dimension should be at least 3")
    if ndim > 4:
        raise ShapeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got "
                         f"{list(x.sizes)}")
    height, width = x.sizes[-2], x.sizes[-1]
    oh = height if pair[0] is None else pair[0]
    ow = width if pair[1] is None else pair[1]
    for dim in (ndim - 2, ndim - 1):
        if not x.sizes[dim]:
            raise ShapeError(f"adaptive_avg_pool2d(): Expected input to have non-zero size for "
                             f"non-batch dimensions, but input has sizes {list(x.sizes)} with "
                             f"dimension {dim} being empty")
    if not x.dtype_object.floating:
        raise DtypeError(f'"adaptive_avg_pool2d" not implemented for '
                         f"'{x.dtype_object.name}'; it needs a floating-point input")
    if (oh, ow) == (1, 1):
        return x.mean((-2, -1), keepdim=True)
    cdef DtypeCore compute = computed_in(x.dtype_object)
    values = copies.to(x, None, compute, False, False)
    planes = math.prod(x.sizes[:ndim - 2])
    columns = values.reshape((planes * height, width)) @ averaging(ow, width, compute, x).t()
    pooled = averaging(oh, height, compute, x) @ columns.reshape((planes, height, ow))
    return copies.to(<TensorCore>pooled.reshape(x.sizes[:ndim - 2] + (oh, ow)), None,
                     x.dtype_object, False, False)


cdef tuple adaptive_output_arg(object output_size):
    """output_size checked: an int, or two ints or Nones (None keeps the input's size), as a
    pair; PyTorch's messages for the count and a negative size."""
    pair = (output_size, output_size) if isinstance(output_size, int) else output_size
    if isinstance(output_size, bool) or not isinstance(pair, (tuple, list)) or any(
            isinstance(size, bool) or not (size is None or isinstance(size, int))
            for size in pair):
        raise TypeError(f"adaptive_avg_pool2d: output_size must be an int or a tuple of two "
                        f"ints or Nones, got {errors.shown(output_size)}")
    for size in pair:
        if size is not None:
            errors.int_arg(size, "output_size", INT64_MIN, INT64_MAX)
    if len(pair) != 2:
        raise ValueError("adaptive_avg_pool2d: output_size must be 2")
    if any(size is not None and size < 0 for size in pair):
        shown = ", ".join("None" if size is None else str(size) for size in pair)
        raise ValueError(f"adaptive_avg_pool2d: elements of output_size must be greater than "
                         f"or equal to 0 but received {{{shown}}}")
    return tuple(pair)


cdef object averaging(int64_t count, int64_t size, DtypeCore dtype, TensorCore like):
    """(count, size): row i holds 1 / its length over the positions floor(i * size / count) to
    ceil((i + 1) * size / count), made on like's device."""
    device = "cpu" if like.device_index < 0 else f"cuda:{like.device_index}"
    if not count:  # no window: no row, and no division by the count
        return factories.zeros(((0, size),), dtype, device, False)
    index = named_dtype("int64")
    rows = factories.arange(0, count, 1, index, device, False).reshape((count, 1))
    positions = factories.arange(0, size, 1, index, device, False)
    start = rows * size // count
    end = ((rows + 1) * size + count - 1) // count
    inside = (positions >= start) & (positions < end)
    return inside.to(dtype) / (end - start).to(dtype)


def avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
               divisor_override):
    """PyTorch's F.avg_pool2d by gathered patches: each window's sum over the input padded with
    zeros, divided by divisor_override or by how many of its elements count (those of the input
    and, with count_include_pad, of the padding; never those a ceil_mode window reaches past
    the padding), which the same gather of a mask of ones counts on the device."""
    name = "avg_pool2d"
    cdef TensorCore x = tensor.own_tensor_arg(input, f"{name}: input")
    kernel, strides, pads = pool_arguments(kernel_size, stride, padding)
    errors.bool_arg(ceil_mode, "ceil_mode")
    errors.bool_arg(count_include_pad, "count_include_pad")
    divisor_arg(divisor_override)
    # PyTorch's CPU kernel also takes int64, each mean truncated toward zero; its CUDA kernel
    # and both devices' other integer dtypes refuse integers.
    cdef bint integers = not x.dtype_object.floating
    if integers and (x.dtype_object.name != "int64" or x.device_index >= 0):
        raise DtypeError(f"{name}: input must be floating point, or int64 on the CPU (as "
                         f"PyTorch's kernels), got a {x.dtype_object.name} tensor on "
                         f"{tensor.device_text(x.device_index)}")
    geometry = pool_geometry(x, name, kernel, strides, pads, (1, 1), ceil_mode)
    sums = pooled_windows(x, 0, kernel, strides, (1, 1), geometry).sum(1)
    if divisor_override is not None:
        return mean_of(sums, divisor_override, integers).reshape(x.sizes[:-2] + geometry[0])
    counted = factories.ones((1, 1) + x.sizes[-2:], x.dtype_object,
                             tensor.device_text(x.device_index), False)
    if count_include_pad:  # the padding counts, what a ceil_mode window reaches past it not
        (top, left), (bottom, right) = geometry[1], geometry[2]
        counted = pad(pad(counted, (left, left, top, top), "constant", 1),
                      (0, right - left, 0, bottom - top), "constant", 0)
        geometry = (geometry[0], (0, 0), (0, 0))
    divisors = pooled_windows(counted, 0, kernel, strides, (1, 1), geometry).sum(1)
    return mean_of(sums, divisors, integers).reshape(x.sizes[:-2] + geometry[0])


cdef object mean_of(object sums, object divisors, bint integers):
    # An integer mean truncated toward zero, as C's division in PyTorch's CPU kernel.
    return elementwise.div(<TensorCore>sums, divisors, "trunc") if integers else sums / divisors


cdef int divisor_arg(object divisor_override) except -1:
    """None, or an int other than 0 (PyTorch's message)."""
    if divisor_override is not None:
        errors.int_arg(divisor_override, "divisor_override", INT64_MIN, INT64_MAX)
        if divisor_override == 0:
            raise ValueError("divisor must be not zero")
    return 0


cdef tuple pool_arguments(object kernel_size, object stride, object padding):
    """(kernel, strides, pads) of a 2-D pooling, as pairs: each an int, a pair or a tuple of
    one (for both), as PyTorch's poolings take them; stride None (or empty) is the kernel's."""
    kernel = pair_arg(one_for_both(kernel_size), "kernel_size", 1)
    strides = kernel if stride is None or stride == () or stride == [] else \
        pair_arg(one_for_both(stride), "stride", 1)
    return kernel, strides, pair_arg(one_for_both(padding), "padding", 0)


cdef object one_for_both(object value):
    return value[0] if isinstance(value, (tuple, list)) and len(value) == 1 else value


cdef tuple pool_geometry(TensorCore x, str name, tuple kernel, tuple strides, tuple pads,
                         tuple dilations, bint ceil_mode):
    """((out_h, out_w), the padding before (top, left), after (bottom, right)) of a 2-D pooling
    of x, checked with PyTorch's messages: the padding after is the pad and what the last
    ceil_mode window reaches past it."""
    for size, spacing, each in zip(kernel, dilations, pads):
        if each > (spacing * (size - 1) + 1) // 2:  # PyTorch's messages
            raise ValueError(f"pad should be at most half of effective kernel size, but got "
                             f"pad={each}, kernel_size={size} and dilation={spacing}")
    if len(x.sizes) not in (3, 4) or 0 in x.sizes[-3:]:
        raise ShapeError(f"Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size "
                         f"for input, but got: {list(x.sizes)}")
    height, width = x.sizes[-2:]
    counts = []
    for size, step, each, spacing, extent in zip(kernel, strides, pads, dilations,
                                                 (height, width)):
        span = spacing * (size - 1) + 1
        room = extent + 2 * each - span
        outputs = (-(-room // step) if ceil_mode else room // step) + 1
        if ceil_mode and (outputs - 1) * step >= extent + each:
            outputs -= 1  # PyTorch's rule: the last window starts inside the input or its pad
        if outputs < 1:
            raise ShapeError(f"Given input size: ({x.sizes[-3]}x{height}x{width}). Calculated "
                             f"output size: ({x.sizes[-3]}x{max(outputs, 0)}x...). Output size "
                             "is too small")
        counts.append((outputs, max(each, (outputs - 1) * step + span - extent - each)))
    (out_h, after_h), (out_w, after_w) = counts
    return ((out_h, out_w), pads, (after_h, after_w))


cdef object pooled_windows(TensorCore x, object filler, tuple kernel, tuple strides,
                           tuple dilations, tuple geometry):
    """Every window of each plane of x (its last two dimensions) padded with filler as geometry
    says (pool_geometry), as a (planes, kh * kw, out_h * out_w) tensor gathered by index_select
    (Note [Convolution by gathered patches])."""
    (out_h, out_w), (top, left), (bottom, right) = geometry
    height, width = x.sizes[-2:]
    planes = math.prod(x.sizes[:-2])
    padded = x.reshape(planes, 1, height, width)
    if top or left or bottom or right:
        padded = pad(padded, (left, right, top, bottom), "constant", filler)
    padded_h, padded_w = padded.sizes[-2:]
    index = patch_index((1, kernel[0], kernel[1], out_h, out_w),
                        (padded_h, padded_w) + strides + dilations, x)
    return padded.reshape(planes, padded_h * padded_w).index_select(
        1, index.reshape(-1)).reshape(planes, kernel[0] * kernel[1], out_h * out_w)


# --------------------------------------------------------------------------------------------
# Attention (docs/design.md, "tensorplay.nn")

cdef object causal_allowed(object rows, object columns, TensorCore like):
    """The (rows, columns) bool mask of PyTorch's is_causal, ones(L, S).tril(): position j is
    allowed for query i where j <= i. A comparison of the cached index tensors (class_indices),
    a device kernel that a capture takes."""
    return class_indices(columns, like) <= class_indices(rows, like).unsqueeze(-1)


cdef TensorCore optional_tensor(object value, str argument):
    return None if value is None else tensor.own_tensor_arg(value, argument)


cdef tuple batch_shape(TensorCore q, TensorCore k, TensorCore v):
    """The broadcast batch dimensions (all but the last two) of query, key and value."""
    what = "scaled_dot_product_attention"
    return arguments.broadcast_shape(arguments.broadcast_shape(q.sizes[:-2], k.sizes[:-2], what),
                                     v.sizes[:-2], what)


cdef object batched(TensorCore x, tuple batch):
    """x broadcast to batch + its last two sizes, as one batch of matrices for matmul (which
    takes 3 dimensions at most)."""
    count = 1
    for size in batch:
        count *= size
    return x.expand(*(batch + x.sizes[-2:])).reshape((count,) + x.sizes[-2:])


cdef object repeated_heads(TensorCore x, object heads, str name):
    """x with each head (dimension -3) repeated heads // x.size(-3) times in a row, PyTorch's
    repeat_interleave(heads // x.size(-3), -3) of enable_gqa."""
    own = x.sizes[-3]
    if own == heads:
        return x
    if own == 0 or heads % own:
        raise ShapeError(f"Number of heads in key and value must divide the number of heads in "
                         f"query (enable_gqa=True): query has {heads} heads, {name} {own}")
    front = x.sizes[:-3]
    spread = x.unsqueeze(-3).expand(*(front + (own, heads // own) + x.sizes[-2:]))
    return spread.reshape(front + (heads,) + x.sizes[-2:])


def scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                 enable_gqa):
    """PyTorch's math reference of F.scaled_dot_product_attention: softmax(q @ k^T * scale
    + bias) @ v, a bool mask allowing its True positions, a float mask added, is_causal the
    lower triangle; a row with no position allowed gives zeros (PyTorch's _safe_softmax).
    Recorded operations (Note [Functional forms]); 16-bit floats computed in float32."""
    name = "scaled_dot_product_attention"
    cdef TensorCore q = tensor.own_tensor_arg(query, f"{name}: query")
    cdef TensorCore k = tensor.own_tensor_arg(key, f"{name}: key")
    cdef TensorCore v = tensor.own_tensor_arg(value, f"{name}: value")
    cdef TensorCore mask = optional_tensor(attn_mask, f"{name}: attn_mask")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise TypeError(f"{name}: dropout_p must be a float, got {errors.shown(dropout_p)}")
    if scale is not None:
        errors.float_arg(scale, "scale")
    errors.bool_arg(is_causal, "is_causal")
    errors.bool_arg(enable_gqa, "enable_gqa")
    dropout_probability(dropout_p)
    if is_causal and mask is not None:  # PyTorch's message
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                         "when is_causal=True")
    if len(q.sizes) < 2 or len(k.sizes) < 2 or len(v.sizes) < 2:
        raise ShapeError(f"Expected query, key, and value to all be at least 2 dimensional, but "
                         f"got query.dim: {len(q.sizes)} key.dim: {len(k.sizes)} and value.dim: "
                         f"{len(v.sizes)} instead.")
    cdef DtypeCore dtype = q.dtype_object
    if k.dtype_object is not dtype or v.dtype_object is not dtype:
        raise DtypeError(f"Expected query, key, and value to have the same dtype, but got "
                         f"query.dtype: {dtype.name} key.dtype: {k.dtype_object.name} and "
                         f"value.dtype: {v.dtype_object.name} instead.")
    if not dtype.floating:
        raise DtypeError(f"{name}: query, key and value must be floating point, got "
                         f"{dtype.name}")
    tensor.check_device(q, k, name)
    tensor.check_device(q, v, name)
    if mask is not None:
        tensor.check_device(q, mask, name)
        if mask.dtype_object.name not in ("bool", "float32", dtype.name):  # PyTorch's message
            raise DtypeError(f"Expected attn_mask dtype to be bool or float or to match query "
                             f"dtype, but got attn_mask.dtype: {mask.dtype_object.name} and "
                             f"query.dtype: {dtype.name} instead.")
    if k.sizes[-1] != q.sizes[-1]:
        raise ShapeError(f"{name}: key's last dimension must be query's embedding size "
                         f"{q.sizes[-1]}, got key of shape {list(k.sizes)}")
    if v.sizes[-2] != k.sizes[-2]:
        raise ShapeError(f"{name}: value must have key's sequence length {k.sizes[-2]} (its "
                         f"dimension -2), got value of shape {list(v.sizes)}")
    if enable_gqa and min(len(q.sizes), len(k.sizes), len(v.sizes)) >= 3:
        k = repeated_heads(k, q.sizes[-3], "key")
        v = repeated_heads(v, q.sizes[-3], "value")
    batch = batch_shape(q, k, v)
    L, S = q.sizes[-2], k.sizes[-2]
    scores_shape = batch + (L, S)
    if mask is not None:
        broadcast = arguments.broadcast_shape(scores_shape, mask.sizes, f"{name}: attn_mask")
        if broadcast != scores_shape:  # PyTorch adds the mask in place
            raise ShapeError(f"output with shape {list(scores_shape)} doesn't match the "
                             f"broadcast shape {list(broadcast)}")
    causal = causal_allowed(L, S, q) if is_causal else None
    cdef DtypeCore compute = computed_in(dtype)
    factor = 1 / math.sqrt(q.sizes[-1]) if scale is None else scale
    cdef TensorCore qs = copies.to(<TensorCore>batched(q, batch), None, compute, False, False)
    cdef TensorCore ks = copies.to(<TensorCore>batched(k, batch), None, compute, False, False)
    cdef TensorCore vs = copies.to(<TensorCore>batched(v, batch), None, compute, False, False)
    scores = (linalg.matmul(<TensorCore>qs, ks.transpose(-2, -1)) * factor).reshape(scores_shape)
    if causal is not None:
        scores = scores.masked_fill(causal.logical_not(), -math.inf)
    if mask is not None:
        if mask.dtype_object.name == "bool":
            scores = scores.masked_fill(mask.logical_not(), -math.inf)
        else:
            scores = scores + copies.to(mask, None, compute, False, False)
    # PyTorch's _safe_softmax: a row of -inf only gives zeros, and no gradient (softmax of it
    # would be NaN, and so would its backward through where()'s unselected branch), so such
    # rows are zeroed before and after.
    blocked = (scores.detach() == -math.inf).all(-1, keepdim=True)
    weights = softmax(scores.masked_fill(blocked, 0), -1).masked_fill(blocked, 0)
    if dropout_p > 0:
        weights = dropout(weights, dropout_p, True)
    output = linalg.matmul(<TensorCore>weights.reshape(qs.sizes[:1] + (L, S)), vs)
    output = output.reshape(batch + (L, vs.sizes[-1]))
    return copies.to(<TensorCore>output, None, dtype, False, False)


cdef int optional_dim_type(object value, str argument) except -1:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{argument} must be an int or None, got {errors.shown(value)}")
    return 0


cdef object xavier_uniform(TensorCore weight):
    """PyTorch's xavier_uniform_ of a 2-D weight: U(-b, b), b = sqrt(6 / (fan_in + fan_out))."""
    bound = math.sqrt(6.0 / (weight.sizes[0] + weight.sizes[1]))
    return random_ops.uniform_(weight, -bound, bound, None)


class MultiheadAttentionCore(ModuleCore):
    """PyTorch's MultiheadAttention: projections of query, key and value into num_heads heads,
    scaled dot-product attention in each, and an output projection (out_proj, a Linear)."""

    def init(self, embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim,
             batch_first, device, dtype):
        # embed_dim and num_heads ints from 1, dropout a float and the flags bools (the
        # wrapper's checks); every other type before any value, before anything changes.
        optional_dim_type(kdim, "kdim")
        optional_dim_type(vdim, "vdim")
        for value, argument in ((kdim, "kdim"), (vdim, "vdim")):
            if value is not None:
                errors.int_arg(value, argument, 1, INT64_MAX)
        dropout_probability(dropout)
        if embed_dim % num_heads:  # PyTorch's words (its AssertionError)
            raise ValueError(f"embed_dim must be divisible by num_heads, got embed_dim="
                             f"{embed_dim} and num_heads={num_heads}")
        ModuleCore.init(self)
        self.embed_dim = embed_dim
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        make = parameter_class()
        # PyTorch's registration order, so that state_dict() keys come in its order.
        if self._qkv_same_embed_dim:
            self.in_proj_weight = make(factories.empty(((3 * embed_dim, embed_dim),), dtype,
                                                       device, False), True)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.c_register_parameter(name, None)
        else:
            for name, size in (("q_proj_weight", embed_dim), ("k_proj_weight", self.kdim),
                               ("v_proj_weight", self.vdim)):
                setattr(self, name, make(factories.empty(((embed_dim, size),), dtype, device,
                                                         False), True))
            self.c_register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = make(factories.empty(((3 * embed_dim,),), dtype, device, False),
                                     True)
        else:
            self.c_register_parameter("in_proj_bias", None)
        # PyTorch's NonDynamicallyQuantizableLinear is a Linear (its name only tells its
        # quantisation tools to leave it alone): the same parameters and state_dict keys.
        self.out_proj = public.public_class("LinearCore", LinearCore)(
            embed_dim, embed_dim, bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = make(factories.empty(((1, 1, embed_dim),), dtype, device, False), True)
            self.bias_v = make(factories.empty(((1, 1, embed_dim),), dtype, device, False), True)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self.c_reset_parameters()

    def c_reset_parameters(self):
        # PyTorch's _reset_parameters: xavier_uniform_ of the input projections, zero biases,
        # xavier_normal_ of bias_k and bias_v ((1, 1, E): both fans E, so std sqrt(1 / E)).
        # out_proj.weight keeps the Linear's own initialisation, as in PyTorch.
        with autograd.no_grad_block():
            if self._qkv_same_embed_dim:
                xavier_uniform(<TensorCore>self.in_proj_weight)
            else:
                for weight in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                    xavier_uniform(<TensorCore>weight)
            if self.in_proj_bias is not None:
                copies.zero_(<TensorCore>self.in_proj_bias)
                copies.zero_(<TensorCore>self.out_proj.bias)
            if self.bias_k is not None:
                for each in (self.bias_k, self.bias_v):
                    random_ops.normal_(<TensorCore>each, 0.0, math.sqrt(1.0 / self.embed_dim),
                                       None)

    def c_forward(self, query, key, value, key_padding_mask, need_weights, attn_mask,
                  average_attn_weights, is_causal):
        name = "MultiheadAttention"
        cdef TensorCore q = tensor.own_tensor_arg(query, f"{name}: query")
        cdef TensorCore k = tensor.own_tensor_arg(key, f"{name}: key")
        cdef TensorCore v = tensor.own_tensor_arg(value, f"{name}: value")
        cdef TensorCore padding = optional_tensor(key_padding_mask, f"{name}: key_padding_mask")
        cdef TensorCore mask = optional_tensor(attn_mask, f"{name}: attn_mask")
        for flag, argument in ((need_weights, "need_weights"),
                               (average_attn_weights, "average_attn_weights"),
                               (is_causal, "is_causal")):
            errors.bool_arg(flag, argument)
        cdef bytes argument_name
        for parameter_name, parameter in self.c_named_parameters("", True):
            argument_name = parameter_name.encode()
            tensor.check_awake(<TensorCore>parameter, b"MultiheadAttention.forward()",
                               argument_name)
        return multi_head_attention(self, q, k, v, padding, need_weights, mask,
                                    average_attn_weights, is_causal)


cdef object float_mask(TensorCore mask, str name, DtypeCore dtype):
    """PyTorch's _canonical_mask: a bool mask as 0 where False and -inf where True, in dtype;
    a floating one as it is."""
    if mask is None:
        return None
    if mask.dtype_object.name != "bool" and not mask.dtype_object.floating:
        raise DtypeError(f"only bool and floating types of {name} are supported, got "
                         f"{mask.dtype_object.name}")
    if mask.dtype_object.floating:
        return mask
    return copies.to(mask, None, dtype, False, False).masked_fill(mask, -math.inf)


cdef int mha_shape_check(TensorCore q, TensorCore k, TensorCore v, TensorCore padding,
                         TensorCore mask, object num_heads) except -1:
    """PyTorch's _mha_shape_check (its AssertionErrors are ShapeErrors here)."""
    if len(q.sizes) == 3:
        if len(k.sizes) != 3 or len(v.sizes) != 3:
            raise ShapeError(f"For batched (3-D) `query`, expected `key` and `value` to be 3-D "
                             f"but found {len(k.sizes)}-D and {len(v.sizes)}-D tensors "
                             "respectively")
        if padding is not None and len(padding.sizes) != 2:
            raise ShapeError(f"For batched (3-D) `query`, expected `key_padding_mask` to be "
                             f"`None` or 2-D but found {len(padding.sizes)}-D tensor instead")
        if mask is not None and len(mask.sizes) not in (2, 3):
            raise ShapeError(f"For batched (3-D) `query`, expected `attn_mask` to be `None`, "
                             f"2-D or 3-D but found {len(mask.sizes)}-D tensor instead")
    elif len(q.sizes) == 2:
        if len(k.sizes) != 2 or len(v.sizes) != 2:
            raise ShapeError(f"For unbatched (2-D) `query`, expected `key` and `value` to be "
                             f"2-D but found {len(k.sizes)}-D and {len(v.sizes)}-D tensors "
                             "respectively")
        if padding is not None and len(padding.sizes) != 1:
            raise ShapeError(f"For unbatched (2-D) `query`, expected `key_padding_mask` to be "
                             f"`None` or 1-D but found {len(padding.sizes)}-D tensor instead")
        if mask is not None:
            if len(mask.sizes) not in (2, 3):
                raise ShapeError(f"For unbatched (2-D) `query`, expected `attn_mask` to be "
                                 f"`None`, 2-D or 3-D but found {len(mask.sizes)}-D tensor "
                                 "instead")
            expected = (num_heads, q.sizes[0], k.sizes[0])
            if len(mask.sizes) == 3 and mask.sizes != expected:
                raise ShapeError(f"Expected `attn_mask` shape to be {expected} but got "
                                 f"{_size(mask)}")
    else:
        raise ShapeError(f"query should be unbatched 2D or batched 3D tensor but received "
                         f"{len(q.sizes)}-D query tensor")
    return 0


cdef object multi_head_attention(object module, TensorCore query, TensorCore key,
                                 TensorCore value, TensorCore padding, bint need_weights,
                                 TensorCore mask, bint average_attn_weights, bint is_causal):
    """PyTorch's MultiheadAttention.forward and F.multi_head_attention_forward (without its
    fast path, whose numbers are the same), step by step."""
    cdef DtypeCore dtype = query.dtype_object
    mha_shape_check(query, key, value, padding, mask, module.num_heads)
    if not dtype.floating:
        raise DtypeError(f"MultiheadAttention: query must be floating point, got {dtype.name}")
    if padding is not None and mask is not None and \
            padding.dtype_object is not mask.dtype_object:
        float_mask(padding, "key_padding_mask", dtype)
        warn_caller("Support for mismatched key_padding_mask and attn_mask is deprecated. Use "
                    "same type for both instead.")
    padding_bias = float_mask(padding, "key_padding_mask", dtype)
    batched = len(query.sizes) == 3
    q, k, v = query, key, value
    if module.batch_first and batched:
        q, k, v = q.transpose(1, 0), k.transpose(1, 0), v.transpose(1, 0)
    if not batched:
        q, k, v = q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1)
        if padding_bias is not None:
            padding_bias = padding_bias.unsqueeze(0)
    tgt_len, bsz, embed_dim = q.shape
    heads, head_dim = module.num_heads, module.head_dim
    if is_causal and mask is None:  # PyTorch's message
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and padding_bias is None and not need_weights:
        bias = None  # the hint alone: scaled_dot_product_attention makes the causal mask
    else:
        bias = float_mask(mask, "attn_mask", dtype)
        if padding_bias is not None:
            is_causal = False
    if embed_dim != module.embed_dim:
        raise ShapeError(f"was expecting embedding dimension of {module.embed_dim}, but got "
                         f"{embed_dim}")
    if module._qkv_same_embed_dim:
        if k.shape != v.shape:
            raise ShapeError(f"key shape {_size(k)} does not match value shape {_size(v)}")
        w_q, w_k, w_v = module.in_proj_weight.chunk(3)
    else:
        if k.shape[:2] != v.shape[:2]:
            raise ShapeError(f"key's sequence and batch dims {tuple(k.shape[:2])} do not match "
                             f"value's {tuple(v.shape[:2])}")
        w_q, w_k, w_v = module.q_proj_weight, module.k_proj_weight, module.v_proj_weight
    for x, w, argument in ((k, w_k, "key"), (v, w_v, "value")):
        if x.shape[-1] != w.shape[1]:
            raise ShapeError(f"MultiheadAttention: {argument} must have {w.shape[1]} features "
                             f"(its last dimension), got {argument} of shape "
                             f"{list(x.shape)}")
    src_len = k.shape[0]
    if bias is not None:
        if bias.dim() == 2:
            if tuple(bias.shape) != (tgt_len, src_len):
                raise ShapeError(f"The shape of the 2D attn_mask is {_size(bias)}, but should "
                                 f"be {(tgt_len, src_len)}.")
            bias = bias.unsqueeze(0)
        elif tuple(bias.shape) != (bsz * heads, tgt_len, src_len):
            raise ShapeError(f"The shape of the 3D attn_mask is {_size(bias)}, but should be "
                             f"{(bsz * heads, tgt_len, src_len)}.")
    if padding_bias is not None:
        # The key padding mask's size, after the extra key of add_bias_kv and add_zero_attn
        # (PyTorch pads it along with the keys and checks it then).
        extra = (module.bias_k is not None) + bool(module.add_zero_attn)
        if tuple(padding_bias.shape) != (bsz, src_len):
            dim = 0 if padding_bias.shape[0] != bsz else 1
            raise ShapeError(f"Expected key_padded_mask.shape[{dim}] to be "
                             f"{(bsz, src_len + extra)[dim]}, but got "
                             f"{padding_bias.shape[dim] + (extra if dim else 0)}")
    # Every argument checked: the computation.
    if module.in_proj_bias is None:
        b_q = b_k = b_v = None
    else:
        b_q, b_k, b_v = module.in_proj_bias.chunk(3)
    q, k, v = linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)
    if module.bias_k is not None:
        k = copies.cat((k, module.bias_k.repeat(1, bsz, 1)), 0)
        v = copies.cat((v, module.bias_v.repeat(1, bsz, 1)), 0)
        if bias is not None:
            bias = pad(bias, (0, 1), "constant", 0)
        if padding_bias is not None:
            padding_bias = pad(padding_bias, (0, 1), "constant", 0)
    q = q.reshape((tgt_len, bsz * heads, head_dim)).transpose(0, 1)
    k = k.reshape((k.shape[0], bsz * heads, head_dim)).transpose(0, 1)
    v = v.reshape((v.shape[0], bsz * heads, head_dim)).transpose(0, 1)
    if module.add_zero_attn:
        zeros = k.new_full((bsz * heads, 1, head_dim), 0)  # a fill kernel, no host copy
        k = copies.cat((k, zeros), 1)
        v = copies.cat((v, zeros), 1)
        if bias is not None:
            bias = pad(bias, (0, 1), "constant", 0)
        if padding_bias is not None:
            padding_bias = pad(padding_bias, (0, 1), "constant", 0)
    src_len = k.shape[1]
    if padding_bias is not None:
        padding_bias = padding_bias.reshape((bsz, 1, 1, src_len)).expand(
            bsz, heads, 1, src_len).reshape((bsz * heads, 1, src_len))
        bias = padding_bias if bias is None else bias + padding_bias
    dropout_p = module.dropout if module.training else 0.0
    if need_weights:
        scores = linalg.matmul(<TensorCore>(q * math.sqrt(1.0 / head_dim)), k.transpose(-2, -1))
        if bias is not None:
            scores = scores + bias
        weights = softmax(scores, -1)  # PyTorch's plain softmax here: a row all -inf is NaN
        if dropout_p > 0:
            weights = dropout(weights, dropout_p, True)
        output = linalg.matmul(<TensorCore>weights, v).transpose(0, 1).reshape(
            (tgt_len * bsz, embed_dim))
        output = linear(output, module.out_proj.weight, module.out_proj.bias).reshape(
            (tgt_len, bsz, embed_dim))
        weights = weights.reshape((bsz, heads, tgt_len, src_len))
        if average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            output, weights = output.squeeze(1), weights.squeeze(0)
    else:
        if bias is not None:
            if bias.shape[0] == 1 and bias.dim() == 3:
                bias = bias.unsqueeze(0)
            else:
                bias = bias.reshape((bsz, heads, bias.shape[1], src_len))
        output = scaled_dot_product_attention(
            q.reshape((bsz, heads, tgt_len, head_dim)), k.reshape((bsz, heads, src_len, head_dim)),
            v.reshape((bsz, heads, src_len, head_dim)), bias, dropout_p, is_causal, None, False)
        output = output.permute(2, 0, 1, 3).reshape((bsz * tgt_len, embed_dim))
        output = linear(output, module.out_proj.weight, module.out_proj.bias).reshape(
            (tgt_len, bsz, embed_dim))
        weights = None
        if not batched:
            output = output.squeeze(1)
    if module.batch_first and batched:
        output = output.transpose(1, 0)
    return output, weights


cdef int affine_parameters(object module, tuple shape, bint weight, bint bias, object dtype,
                           object device) except -1:
    """A normalisation's learned weight and bias of shape, each registered (None where it is
    not learned): weight before bias, ones and zeros, PyTorch's order and reset_parameters()."""
    make = parameter_class()
    if weight:
        module.weight = make(factories.ones((shape,), dtype, device, False), True)
    else:
        module.c_register_parameter("weight", None)
    if bias:
        module.bias = make(factories.zeros((shape,), dtype, device, False), True)
    else:
        module.c_register_parameter("bias", None)
    return 0


cdef int check_awake_parameters(object module, bytes operation) except -1:
    """The module's weight and bias (those it has) refused while their graph sleeps."""
    for name in ("weight", "bias"):
        value = module.__dict__["_parameters"][name]
        if value is not None:
            tensor.check_awake(<TensorCore>value, operation, name.encode())
    return 0


class LayerNormCore(ModuleCore):
    """layer_norm over the last dimensions, with a learned weight and bias of that shape."""

    def init(self, normalized_shape, eps, elementwise_affine, bias, device, dtype):
        # eps a float, elementwise_affine and bias bools (the wrapper's checks); an int
        # normalized_shape is one dimension, as PyTorch's LayerNorm takes it.
        shape = normalized_shape_arg(normalized_shape)
        ModuleCore.init(self)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        affine_parameters(self, shape, elementwise_affine, elementwise_affine and bias, dtype,
                          device)

    def c_forward(self, input):
        check_awake_parameters(self, b"LayerNorm.forward()")
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def c_extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class RMSNormCore(ModuleCore):
    """rms_norm over the last dimensions, with a learned weight of that shape."""

    def init(self, normalized_shape, eps, elementwise_affine, device, dtype):
        # elementwise_affine a bool (the wrapper's check); an int normalized_shape is one
        # dimension, as PyTorch's RMSNorm takes it.
        eps = optional_eps_arg(eps)
        shape = normalized_shape_arg(normalized_shape)
        ModuleCore.init(self)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:  # ones: PyTorch's reset_parameters()
            self.weight = parameter_class()(factories.ones((shape,), dtype, device, False), True)
        else:
            self.c_register_parameter("weight", None)

    def c_forward(self, input):
        if self.weight is not None:
            tensor.check_awake(<TensorCore>self.weight, b"RMSNorm.forward()", b"weight")
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def c_extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNormCore(ModuleCore):
    """group_norm of num_groups groups of num_channels channels, with a learned per-channel
    weight and bias."""

    def init(self, num_groups, num_channels, eps, affine, device, dtype, bias):
        # the ints bounded, eps a float, the flags bools (the wrapper's checks)
        if num_channels % num_groups:  # PyTorch's message
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        ModuleCore.init(self)
        self.num_groups, self.num_channels = num_groups, num_channels
        self.eps, self.affine = eps, affine
        affine_parameters(self, (num_channels,), affine, affine and bias, dtype, device)

    def c_forward(self, input):
        check_awake_parameters(self, b"GroupNorm.forward()")
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def c_extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class BatchNormCore(ModuleCore):
    """batch_norm over every dimension but the channels (the second), with a learned
    per-channel weight and bias, and the running statistics in buffers, as PyTorch's
    _BatchNorm; each subclass names the input dimensions it takes."""

    _input_dims = ()       # the numbers of input dimensions taken
    _expected_dims = ""    # how PyTorch's error names them

    def init(self, num_features, eps, momentum, affine, track_running_stats, device, dtype,
             bias):
        # num_features a bounded int, eps a float, the flags bools (the wrapper's checks).
        if momentum is not None:
            momentum = errors.float_arg(momentum, "momentum")
        _device.tensor_device_arg(device, "device")
        element = arguments.dtype_arg(dtype, named_dtype("float32"), "dtype")
        if not element.floating:
            raise DtypeError(f"{type(self).__name__}: dtype must be floating point, got "
                             f"{element.name}")
        size = ((num_features,),)
        # Made before the module changes, so that a failed allocation (a bad device) leaves
        # nothing half-built.
        weight = factories.ones(size, element, device, False) if affine else None
        shift = factories.zeros(size, element, device, False) if affine and bias else None
        if track_running_stats:
            # PyTorch's buffers: zeros, ones and an int64 count of the training batches.
            stats = (factories.zeros(size, element, device, False),
                     factories.ones(size, element, device, False),
                     factories.zeros(((),), named_dtype("int64"), device, False))
        else:
            stats = (None, None, None)
        ModuleCore.init(self)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        make = parameter_class()
        # weight, bias, then the buffers: PyTorch's order of the state_dict.
        for name, value in (("weight", weight), ("bias", shift)):
            self.c_register_parameter(name, None if value is None else make(value, True))
        for name, value in zip(("running_mean", "running_var", "num_batches_tracked"), stats):
            self.c_register_buffer(name, value)

    def c_reset_running_stats(self):
        if self.track_running_stats:
            with autograd.no_grad_block():
                for name, fill in (("running_mean", 0), ("running_var", 1),
                                   ("num_batches_tracked", 0)):
                    value = self.__dict__["_buffers"][name]
                    if value is not None:
                        copies.fill_(<TensorCore>value, fill)

    def c_reset_parameters(self):
        self.c_reset_running_stats()
        with autograd.no_grad_block():
            for name, fill in (("weight", 1), ("bias", 0)):
                value = self.__dict__["_parameters"][name]
                if value is not None:
                    copies.fill_(<TensorCore>value, fill)

    def c_forward(self, input):
        cdef TensorCore x = tensor.own_tensor_arg(input, f"{type(self).__name__}: input")
        if len(x.sizes) not in self._input_dims:  # PyTorch's words
            raise ShapeError(f"expected {self._expected_dims} input (got {len(x.sizes)}D "
                             f"input)")
        stores = (self.__dict__["_parameters"], self.__dict__["_buffers"])
        for store in stores:
            for name, value in store.items():
                if value is not None:
                    tensor.check_awake(<TensorCore>value, b"BatchNorm.forward()", name.encode())
        running_mean, running_var = self.running_mean, self.running_var
        counter = self.num_batches_tracked
        training = self.training
        # PyTorch's rules: the batch's statistics while training, or when there are no running
        # ones; the running ones are moved only while training and tracking.
        batch_statistics = training or (running_mean is None and running_var is None)
        if training and not self.track_running_stats:
            running_mean = running_var = None
        operands = batch_norm_operands(x, running_mean, running_var, self.weight, self.bias,
                                       batch_statistics)
        momentum = 0.0 if self.momentum is None else self.momentum
        if training and self.track_running_stats and counter is not None:
            # Counted on the device, after every check: a capture replays the count and a
            # refused call leaves it as it was.
            with autograd.no_grad_block():
                elementwise.iadd(<TensorCore>counter, 1)
                if self.momentum is None:
                    # The cumulative average: 1 / count as a tensor, where PyTorch reads the
                    # count on the host (float(num_batches_tracked)), which a capture refuses.
                    momentum = 1 / copies.to(<TensorCore>counter, None, operands[1], False,
                                             False)
        return batch_normalized(operands, batch_statistics, momentum, self.eps)

    def c_extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1dCore(BatchNormCore):
    """BatchNorm of (N, C) or (N, C, L) inputs."""

    _input_dims = (2, 3)
    _expected_dims = "2D or 3D"


class BatchNorm2dCore(BatchNormCore):
    """BatchNorm of (N, C, H, W) inputs."""

    _input_dims = (4,)
    _expected_dims = "4D"


class BatchNorm3dCore(BatchNormCore):
    """BatchNorm of (N, C, D, H, W) inputs."""

    _input_dims = (5,)
    _expected_dims = "5D"


class MSELossCore(ModuleCore):
    """The mean squared error of input against target (mse_loss)."""

    def init(self, reduction):
        reduction_arg(reduction)
        ModuleCore.init(self)
        self.reduction = reduction

    def c_forward(self, input, target):
        return mse_loss(input, target, self.reduction)

    def c_extra_repr(self):
        return ""


class NLLLossCore(ModuleCore):
    """The negative log likelihood of log-probabilities at class indices (nll_loss); weight a
    buffer."""

    def init(self, weight, ignore_index, reduction):
        if weight is not None:
            tensor.own_tensor_arg(weight, "NLLLoss: weight")
        ignore_index_arg(ignore_index)
        reduction_arg(reduction)
        ModuleCore.init(self)
        self.c_register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.reduction = reduction

    def c_forward(self, input, target):
        return nll_loss(input, target, self.weight, self.ignore_index, self.reduction)

    def c_extra_repr(self):
        return ""


class FlattenCore(ModuleCore):
    """Dimensions start_dim to end_dim joined into one (Tensor.flatten)."""

    def init(self, start_dim, end_dim):  # ints (the wrapper's range checks)
        ModuleCore.init(self)
        self.start_dim = start_dim
        self.end_dim = end_dim

    def c_forward(self, input):
        return tensor.own_tensor_arg(input, "Flatten: input").flatten(self.start_dim,
                                                                      self.end_dim)

    def c_extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class L1LossCore(ModuleCore):
    """The absolute error of input against target (l1_loss)."""

    def init(self, reduction):
        reduction_arg(reduction)
        ModuleCore.init(self)
        self.reduction = reduction

    def c_forward(self, input, target):
        return l1_loss(input, target, self.reduction)


class SmoothL1LossCore(ModuleCore):
    """The absolute error, squared below beta (smooth_l1_loss)."""

    def init(self, reduction, beta):
        reduction_arg(reduction)
        beta_arg(beta)
        ModuleCore.init(self)
        self.reduction = reduction
        self.beta = beta

    def c_forward(self, input, target):
        return smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLossCore(ModuleCore):
    """The squared error below delta, delta times the absolute error above (huber_loss)."""

    def init(self, reduction, delta):
        reduction_arg(reduction)
        delta_arg(delta)
        ModuleCore.init(self)
        self.reduction = reduction
        self.delta = delta

    def c_forward(self, input, target):
        return huber_loss(input, target, self.reduction, self.delta)


class BCELossCore(ModuleCore):
    """The binary cross entropy of probabilities (binary_cross_entropy); weight a buffer."""

    def init(self, weight, reduction):
        if weight is not None:
            tensor.own_tensor_arg(weight, "BCELoss: weight")
        reduction_arg(reduction)
        ModuleCore.init(self)
        self.c_register_buffer("weight", weight)
        self.reduction = reduction

    def c_forward(self, input, target):
        return binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLossCore(ModuleCore):
    """The binary cross entropy of logits (binary_cross_entropy_with_logits); weight and
    pos_weight buffers."""

    def init(self, weight, reduction, pos_weight):
        if weight is not None:
            tensor.own_tensor_arg(weight, "BCEWithLogitsLoss: weight")
        if pos_weight is not None:
            tensor.own_tensor_arg(pos_weight, "BCEWithLogitsLoss: pos_weight")
        reduction_arg(reduction)
        ModuleCore.init(self)
        self.c_register_buffer("weight", weight)
        self.c_register_buffer("pos_weight", pos_weight)
        self.reduction = reduction

    def c_forward(self, input, target):
        return binary_cross_entropy_with_logits(input, target, self.weight, self.reduction,
                                                self.pos_weight)


class KLDivLossCore(ModuleCore):
    """The Kullback-Leibler divergence of target from input's distribution (kl_div)."""

    def init(self, reduction, log_target):
        kl_reduction_arg(reduction)
        ModuleCore.init(self)
        self.reduction = reduction
        self.log_target = log_target

    def c_forward(self, input, target):
        return kl_div(input, target, self.reduction, self.log_target)


class CrossEntropyLossCore(ModuleCore):
    """The cross entropy of logits against class indices or probabilities (cross_entropy)."""

    def init(self, weight, ignore_index, reduction, label_smoothing):
        if weight is not None:
            tensor.own_tensor_arg(weight, "CrossEntropyLoss: weight")
        ignore_index_arg(ignore_index)
        reduction_arg(reduction)
        if isinstance(label_smoothing, bool) or \
                not isinstance(label_smoothing, (int, float)) or \
                not 0.0 <= label_smoothing <= 1.0:
            raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: "
                             f"{label_smoothing}")
        ModuleCore.init(self)
        self.c_register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.label_smoothing = label_smoothing

    def c_forward(self, input, target):
        return cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                             self.label_smoothing)

    def c_extra_repr(self):
        return ""
