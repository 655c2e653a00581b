# cython: language_level=3
"""The containers of tensorplay.nn: Sequential, ModuleList, ModuleDict, ParameterList and
ParameterDict, as PyTorch's torch/nn/modules/container.py.

Each holds its modules as its children, or its parameters as its parameters (Note [Module
attributes] in nn.pyx), so parameters(), state_dict(), to() and train() reach them as they
reach any attribute's, under the names PyTorch gives them: "0", "1", ... for Sequential,
ModuleList and ParameterList (kept consecutive when one is inserted or deleted, so a
state_dict saved after the change loads into a list built fresh), the keys for ModuleDict and
ParameterDict. The parameter containers wrap a plain tensor as Parameter(tensor), as
PyTorch's; unlike PyTorch's, they hold nothing else (PyTorch's keep other objects as plain
attributes, which no parameters() or state_dict() sees).

Note [Containers change whole or not at all]
extend(), update(), __iadd__ and the constructors check every module (and every key) before
they register the first, so a refused call leaves the container as it was, where PyTorch's
registers the modules before the bad one.
"""
import collections.abc
import operator

from tensorplay._runtime.base cimport errors, public
from tensorplay._runtime.tensor.core cimport TensorCore
from tensorplay._runtime.autograd.nn import ModuleCore, ParameterCore


cdef list checked_modules(object modules, str where):
    """modules (an iterable of Modules) as a list, every element checked."""
    if not isinstance(modules, collections.abc.Iterable) or isinstance(modules, ModuleCore):
        raise TypeError(f"{where} should be called with an iterable of tensorplay.nn.Module, "
                        f"but got {type(modules).__name__}")
    modules = list(modules)
    for index, module in enumerate(modules):
        if not isinstance(module, ModuleCore):
            raise TypeError(f"{where}: element {index} must be a tensorplay.nn.Module, got "
                            f"{errors.shown(module)}")
    return modules


cdef object position(object index, Py_ssize_t length, str container, str items="modules"):
    """index (an int, or anything with __index__) as a position in [0, length) of a container
    of that many items."""
    if isinstance(index, bool):
        raise TypeError(f"{container} indices must be integers or slices, got bool")
    try:
        index = operator.index(index)
    except TypeError:
        raise TypeError(f"{container} indices must be integers or slices, got "
                        f"{type(index).__name__}") from None
    if not -length <= index < length:
        raise IndexError(f"index {index} is out of range for a {container} of {length} "
                         f"{items}")
    return index + length if index < 0 else index


class SequentialCore(ModuleCore):
    """Modules run one after the other, registered as children "0", "1", ..."""

    def init(self, modules):  # the tuple of the positional arguments
        ModuleCore.init(self)
        for index, module in enumerate(modules):
            if not isinstance(module, ModuleCore):
                raise TypeError(f"Sequential: argument {index} must be a tensorplay.nn.Module, "
                                f"got {errors.shown(module)}")
        for index, module in enumerate(modules):
            self.c_add_module(str(index), module)

    def c_forward(self, input):
        for module in self.__dict__["_modules"].values():
            input = module(input)
        return input

    def c_len(self):
        return len(self.__dict__["_modules"])

    def c_iter(self):
        return iter(self.__dict__["_modules"].values())

    def c_getitem(self, index):
        modules = list(self.__dict__["_modules"].values())
        if isinstance(index, slice):
            return type(self)(*modules[index])
        return modules[position(index, len(modules), "Sequential")]


class NumberedCore(ModuleCore):
    """What ModuleList and ParameterList share: items held in the store that _store names
    (children or parameters) under the names "0", "1", ..., kept consecutive, and read by
    position. _container and _items name them in messages, and _checked checks new items."""

    def init(self, items):
        listed = [] if items is None else self._checked(items, self._container)
        ModuleCore.init(self)
        self._renumber(listed)

    def _renumber(self, list items):
        """Register items as "0", "1", ..., in place of the present ones."""
        held = self.__dict__[self._store]
        held.clear()
        for index, item in enumerate(items):
            held[str(index)] = item

    def _listed(self):
        return list(self.__dict__[self._store].values())

    def c_len(self):
        return len(self.__dict__[self._store])

    def c_iter(self):
        return iter(self._listed())

    def c_getitem(self, index):
        items = self._listed()
        if isinstance(index, slice):
            return type(self)(items[index])
        return items[position(index, len(items), self._container, self._items)]

    def c_iadd(self, other):
        return self.c_extend(other)


class ModuleListCore(NumberedCore):
    """Modules held in a list, registered as children "0", "1", ... (no forward of its own)."""
    _store = "_modules"
    _container = "ModuleList"
    _items = "modules"

    def _checked(self, modules, where):
        return checked_modules(modules, where)

    def c_setitem(self, index, module):
        modules = self._listed()
        at = position(index, len(modules), "ModuleList")
        checked_modules([module], "ModuleList.__setitem__")
        self.__dict__["_modules"][str(at)] = module

    def c_delitem(self, index):
        modules = self._listed()
        if isinstance(index, slice):
            del modules[index]
        else:
            del modules[position(index, len(modules), "ModuleList")]
        self._renumber(modules)  # the names stay "0", "1", ... as PyTorch's

    def c_append(self, module):
        checked_modules([module], "ModuleList.append")
        self.__dict__["_modules"][str(self.c_len())] = module
        return self

    def c_extend(self, modules):
        added = checked_modules(modules, "ModuleList.extend")
        self._renumber(self._listed() + added)
        return self

    def c_insert(self, index, module):  # index: an int (the wrapper's check)
        checked_modules([module], "ModuleList.insert")
        modules = self._listed()
        modules.insert(index, module)  # list.insert's rule: clipped to the ends
        self._renumber(modules)

    def c_pop(self, index):
        modules = self._listed()
        module = modules.pop(position(index, len(modules), "ModuleList"))
        self._renumber(modules)
        return module

    def c_add(self, other):
        return type(self)(self._listed() + checked_modules(other, "ModuleList.__add__"))


ctypedef object (*ValueOf)(object value, str where)


cdef object module_value(object value, str where):
    checked_modules([value], where)
    return value


cdef list checked_pairs(object container, object items, str store, str kind, str what,
                        ValueOf value_of):
    """(key, value) of a mapping or an iterable of pairs for a dict container of kind, whose
    store holds what it registers: every key checked as PyTorch checks a name (what names it),
    every value made by value_of(value, where), which raises for one it refuses."""
    if isinstance(items, collections.abc.Mapping) or isinstance(items, type(container)):
        pairs = list(items.items())
    elif isinstance(items, collections.abc.Iterable) and not isinstance(items, ModuleCore):
        pairs = []
        for index, pair in enumerate(items):
            # PyTorch's messages for a sequence element that is not a pair
            if not isinstance(pair, collections.abc.Iterable):
                raise TypeError(f"{kind} update sequence element #{index} should be "
                                f"Iterable; is {type(pair).__name__}")
            pair = tuple(pair)
            if len(pair) != 2:
                raise ValueError(f"{kind} update sequence element #{index} has length "
                                 f"{len(pair)}; 2 is required")
            pairs.append(pair)
    else:
        raise TypeError(f"{kind}.update should be called with an iterable of key/value "
                        f"pairs, but got {type(items).__name__}")
    held = container.__dict__[store]
    checked = []
    for key, value in pairs:
        if not isinstance(key, str):
            raise TypeError(f"{kind} keys must be str, got {errors.shown(key)}")
        if key == "" or "." in key:
            raise KeyError(f"{what} name can't be empty or contain \".\", got {key!r}")
        if hasattr(container, key) and key not in held:
            raise KeyError(f"attribute '{key}' already exists")
        checked.append((key, value_of(value, f"{kind}[{key!r}]")))
    return checked


class ModuleDictCore(ModuleCore):
    """Modules held in an ordered dict, registered as children under their keys."""

    def init(self, modules):
        ModuleCore.init(self)
        if modules is not None:
            self.c_update(modules)

    def c_update(self, modules):
        children = self.__dict__["_modules"]
        for key, module in checked_pairs(self, modules, "_modules", "ModuleDict", "module",
                                         module_value):
            children[key] = module

    def c_getitem(self, key):
        return self.__dict__["_modules"][key]

    def c_setitem(self, key, module):
        self.c_update([(key, module)])

    def c_delitem(self, key):
        del self.__dict__["_modules"][key]

    def c_len(self):
        return len(self.__dict__["_modules"])

    def c_iter(self):
        return iter(list(self.__dict__["_modules"]))

    def c_contains(self, key):
        return key in self.__dict__["_modules"]

    def c_clear(self):
        self.__dict__["_modules"].clear()

    def c_pop(self, key):
        return self.__dict__["_modules"].pop(key)

    def c_keys(self):
        return self.__dict__["_modules"].keys()

    def c_items(self):
        return self.__dict__["_modules"].items()

    def c_values(self):
        return self.__dict__["_modules"].values()


cdef object as_parameter(object value, str where):
    """value as a Parameter: itself, or a plain tensor as Parameter(value), which requires
    grad (so an integer tensor is refused, as PyTorch's Parameter refuses it)."""
    if isinstance(value, ParameterCore):
        return value
    if isinstance(value, TensorCore):
        return public.public_class("ParameterCore", ParameterCore)(value, True)
    raise TypeError(f"{where} must be a tensorplay.nn.Parameter or a tensorplay.Tensor, got "
                    f"{errors.shown(value)}")


cdef list as_parameters(object values, str where):
    if not isinstance(values, collections.abc.Iterable) or isinstance(values, TensorCore):
        raise TypeError(f"{where} should be called with an iterable of tensors, but got "
                        f"{type(values).__name__}")
    return [as_parameter(value, f"{where}: element {index}")
            for index, value in enumerate(values)]


cdef str parameter_line(object key, TensorCore parameter, str kind):
    # A line of PyTorch's ParameterList / ParameterDict extra_repr, which names the dtype, or
    # the legacy type for a dict (torch.typename: "tensorplay.FloatTensor" here).
    device = f" ({parameter.device})" if parameter.device.type == "cuda" else ""
    sizes = "x".join(str(size) for size in parameter.sizes)
    return f"  ({key}): Parameter containing: [{kind} of size {sizes}{device}]"


class ParameterListCore(NumberedCore):
    """Parameters held in a list, registered as parameters "0", "1", ..."""
    _store = "_parameters"
    _container = "ParameterList"
    _items = "parameters"

    def _checked(self, values, where):
        return as_parameters(values, where)

    def c_setitem(self, index, value):
        at = position(index, self.c_len(), "ParameterList", "parameters")
        self.__dict__["_parameters"][str(at)] = as_parameter(value, "ParameterList value")

    def c_append(self, value):
        parameter = as_parameter(value, "ParameterList.append: value")
        self.__dict__["_parameters"][str(self.c_len())] = parameter
        return self

    def c_extend(self, values):
        self._renumber(self._listed() + as_parameters(values, "ParameterList.extend"))
        return self

    def c_extra_repr(self):
        return "\n".join(parameter_line(index, parameter, str(parameter.dtype))
                         for index, parameter in enumerate(self._listed()))


class ParameterDictCore(ModuleCore):
    """Parameters held in an ordered dict, registered as parameters under their keys."""

    def init(self, parameters):
        ModuleCore.init(self)
        if parameters is not None:
            self.c_update(parameters)

    def c_update(self, parameters):
        held = self.__dict__["_parameters"]
        for key, parameter in checked_pairs(self, parameters, "_parameters", "ParameterDict",
                                            "parameter", as_parameter):
            held[key] = parameter

    def c_getitem(self, key):
        return self.__dict__["_parameters"][key]

    def c_setitem(self, key, value):
        self.c_update([(key, value)])

    def c_delitem(self, key):
        del self.__dict__["_parameters"][key]

    def c_len(self):
        return len(self.__dict__["_parameters"])

    def c_iter(self):
        return iter(list(self.__dict__["_parameters"]))

    def c_contains(self, key):
        return key in self.__dict__["_parameters"]

    def c_get(self, key, default):
        return self.__dict__["_parameters"].get(key, default)

    def c_clear(self):
        self.__dict__["_parameters"].clear()

    def c_pop(self, key):
        return self.__dict__["_parameters"].pop(key)

    def c_keys(self):
        return self.__dict__["_parameters"].keys()

    def c_items(self):
        return self.__dict__["_parameters"].items()

    def c_values(self):
        return self.__dict__["_parameters"].values()

    def c_extra_repr(self):
        return "\n".join(parameter_line(key, parameter, parameter.type())
                         for key, parameter in self.__dict__["_parameters"].items())
