# cython: language_level=3
"""The containers of tensorplay.nn: Sequential, ModuleList and ModuleDict, as PyTorch's
torch/nn/modules/container.py.

Each holds its modules as its children (Note [Module attributes] in nn.pyx), so parameters(),
state_dict(), to() and train() reach them as they reach any attribute's module, under the
names PyTorch gives them: "0", "1", ... for Sequential and ModuleList (kept consecutive when
one is inserted or deleted, so a state_dict saved after the change loads into a list built
fresh), the keys for ModuleDict.

Note [Containers change whole or not at all]
extend(), update(), __iadd__ and the constructors check every module (and every key) before
they register the first, so a refused call leaves the container as it was, where PyTorch's
registers the modules before the bad one.
"""
import collections.abc
import operator

from tensorplay._runtime.base cimport errors
from tensorplay._runtime.autograd.nn import ModuleCore


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


cdef object position(object index, Py_ssize_t length, str container):
    """index (an int, or anything with __index__) as a position in [0, length)."""
    if isinstance(index, bool):
        raise TypeError(f"{container} indices must be integers or slices, got bool")
    try:
        index = operator.index(index)
    except TypeError:
        raise TypeError(f"{container} indices must be integers or slices, got "
                        f"{type(index).__name__}") from None
    if not -length <= index < length:
        raise IndexError(f"index {index} is out of range for a {container} of {length} "
                         "modules")
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


class ModuleListCore(ModuleCore):
    """Modules held in a list, registered as children "0", "1", ... (no forward of its own)."""

    def init(self, modules):
        listed = [] if modules is None else checked_modules(modules, "ModuleList")
        ModuleCore.init(self)
        self._renumber(listed)

    def _renumber(self, list modules):
        """Register modules as the children "0", "1", ..., in place of the present ones."""
        children = self.__dict__["_modules"]
        children.clear()
        for index, module in enumerate(modules):
            children[str(index)] = module

    def _listed(self):
        return list(self.__dict__["_modules"].values())

    def c_len(self):
        return len(self.__dict__["_modules"])

    def c_iter(self):
        return iter(self._listed())

    def c_getitem(self, index):
        modules = self._listed()
        if isinstance(index, slice):
            return type(self)(modules[index])
        return modules[position(index, len(modules), "ModuleList")]

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

    def c_iadd(self, other):
        return self.c_extend(other)


class ModuleDictCore(ModuleCore):
    """Modules held in an ordered dict, registered as children under their keys."""

    def init(self, modules):
        ModuleCore.init(self)
        if modules is not None:
            self.c_update(modules)

    def _pairs(self, modules):
        """(key, module) of a mapping or an iterable of pairs, every one checked."""
        if isinstance(modules, collections.abc.Mapping) or isinstance(modules, ModuleDictCore):
            pairs = list(modules.items())
        elif isinstance(modules, collections.abc.Iterable) and not isinstance(modules, ModuleCore):
            pairs = []
            for index, pair in enumerate(modules):
                # PyTorch's messages for a sequence element that is not a pair
                if not isinstance(pair, collections.abc.Iterable):
                    raise TypeError(f"ModuleDict update sequence element #{index} should be "
                                    f"Iterable; is {type(pair).__name__}")
                pair = tuple(pair)
                if len(pair) != 2:
                    raise ValueError(f"ModuleDict update sequence element #{index} has length "
                                     f"{len(pair)}; 2 is required")
                pairs.append(pair)
        else:
            raise TypeError("ModuleDict.update should be called with an iterable of key/value "
                            f"pairs, but got {type(modules).__name__}")
        children = self.__dict__["_modules"]
        for key, module in pairs:
            if not isinstance(key, str):
                raise TypeError(f"ModuleDict keys must be str, got {errors.shown(key)}")
            if key == "" or "." in key:
                raise KeyError(f"module name can't be empty or contain \".\", got {key!r}")
            if hasattr(self, key) and key not in children:
                raise KeyError(f"attribute '{key}' already exists")
            checked_modules([module], f"ModuleDict[{key!r}]")
        return pairs

    def c_update(self, modules):
        children = self.__dict__["_modules"]
        for key, module in self._pairs(modules):
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
