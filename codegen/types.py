"""The closed type vocabulary of api.yaml.

Note [Closed type vocabulary]
A type in the schema is an expression over a fixed set of names: the builtins below, the
argument spellings below, and the classes the schema itself declares. Generic forms are
``Optional[T]``, ``list[T]``, ``set[T]``, ``tuple[T, ...]``, ``dict[K, V]`` and unions
``A | B``. Anything else is a schema error, so a typo cannot reach the stubs. Each name knows
its stub annotation and, where the wrapper must normalise the argument (device spellings),
the runtime call that does it.

Note [Parameter kinds]
Each kind of parameter is declared once, here: its stub annotation, and the runtime function
through which the generated wrapper converts and checks every argument of that kind before it
calls the runtime, so that the runtime receives checked values and a mistake is a TypeError or
ValueError naming the argument, raised before anything touches a device or a graph. The kinds:
- devices (Device, DeviceSelection; TensorDevice is parsed by the tensor runtime, which must
  tell None from "cpu"), streams (Stream, Optional[Stream]), pools (GraphPool), paths (Path);
- bool, float and str (a C signature cannot enforce them);
- an int with a `range: [low, high]` in its parameter's declaration (bounded int), and a str
  with `choices: [...]` (a fixed set of strings, such as the capture modes; the stubs keep
  `str`, as the API reference spells them). Plain ints are checked by the runtime, which knows
  their ranges where they depend on state (a device index against the visible devices).
Checks that need runtime state run in the runtime, after every argument check.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

# Builtin names: stub spelling, and whether None is a member of the type.
BUILTINS: dict[str, tuple[str, bool]] = {
    "int": ("int", False),
    "float": ("float", False),
    "bool": ("bool", False),
    "str": ("str", False),
    "bytes": ("bytes", False),
    "None": ("None", True),
    "Any": ("Any", True),
    "object": ("object", True),
    "Path": ("str | os.PathLike[str]", False),
    "Callable": ("Callable[..., Any]", False),
    # The one string that means "the settings given to the constructor" (Graph.capture_begin).
    "Unset": ("Literal['__unset__']", False),
}
UNSET = "__unset__"

# Argument spellings: the ways users may name a device, or a capture's memory pool. Where the
# wrapper normalises the argument, the conversion is "_module.function", a cdef function of
# runtime/module.pxd taking (value, argument name) that validate checks; the generated module
# cimports that runtime module. Tensor placement is parsed by the tensor runtime itself (it must
# tell None from "cpu").
ARGUMENT_SPELLINGS: dict[str, tuple[str, bool, Optional[str], str]] = {
    # name: (stub annotation, admits None, conversion, stub alias definition)
    "Device": ("_DeviceLike", True, "_device.device_index_arg",
               "_DeviceLike: TypeAlias = device | str | int | None"),
    # A device to make current, where -1 means "no change" (set_device_index).
    "DeviceSelection": ("_DeviceLike", True, "_device.device_selection_arg",
                        "_DeviceLike: TypeAlias = device | str | int | None"),
    "TensorDevice": ("_TensorDeviceLike", True, None,
                     "_TensorDeviceLike: TypeAlias = device | str | int | None"),
    # The memory pool a capture allocates from: None for a private one, the handle that
    # graph_pool_handle() and pool_id give, or a graph whose pool to share. The graph runtime
    # checks it where the capture settings are stored (runtime/graphs/graph.pyx, _pool_arg).
    "GraphPool": ("_GraphPool", True, "_graph.pool_arg",
                  "_GraphPool: TypeAlias = tuple[int, int] | Graph | CUDAGraph | None"),
}

# Classes of the schema that are parameter kinds: their check when required and when optional.
CLASS_CONVERSIONS: dict[str, tuple[str, str]] = {
    "Stream": ("_stream.required_stream_arg", "_stream.stream_arg"),
}

# Builtins whose type a C-level runtime signature cannot enforce (Cython reads any object as a
# bint, and float() and str() of an object rarely fail): the wrapper checks them through these
# runtime functions, so that a mistake is a TypeError naming the argument. int is left to the
# runtime functions, which check each int's range where they know it.
BUILTIN_CONVERSIONS: dict[str, str] = {
    "bool": "_errors.bool_arg",
    "float": "_errors.float_arg",
    "str": "_errors.str_arg",
    "Path": "_errors.path_arg",
}
# Parameters that declare a `range:` or `choices:` (model.py) convert through these instead,
# which take the bounds or the choices after (value, argument name).
RANGE_CONVERSION = "_errors.int_arg"
CHOICE_CONVERSION = "_errors.choice_arg"

GENERICS = {"Optional": 1, "list": 1, "set": 1, "tuple": None, "dict": 2}

_TOKEN = re.compile(r"\s*(\.\.\.|[A-Za-z_][A-Za-z0-9_]*|[\[\],|])")


class TypeSyntaxError(ValueError):
    """A type expression that does not parse or names an unknown type."""


@dataclass(frozen=True)
class TypeExpr:
    """A parsed type expression: a name with optional arguments, or a union."""

    name: str
    args: tuple["TypeExpr", ...] = ()

    def names(self) -> set[str]:
        """Every type name used, generics excluded."""
        found = set() if self.name in GENERICS or self.name in ("|", "...") else {self.name}
        for arg in self.args:
            found |= arg.names()
        return found

    def admits_none(self, classes: frozenset[str] = frozenset()) -> bool:
        if self.name == "Optional":
            return True
        if self.name == "|":
            return any(arg.admits_none(classes) for arg in self.args)
        if self.name in BUILTINS:
            return BUILTINS[self.name][1]
        if self.name in ARGUMENT_SPELLINGS:
            return ARGUMENT_SPELLINGS[self.name][1]
        return False

    def admits(self, value: object) -> bool:
        """Whether a YAML default value fits this type."""
        if value is None:
            return self.admits_none()
        if self.name in ("Any", "object"):
            return True
        if self.name == "|" or self.name == "Optional":
            return any(arg.admits(value) for arg in self.args)
        if isinstance(value, bool):
            return self.name == "bool"
        if isinstance(value, int):
            return self.name in ("int", "float", "Device")
        if isinstance(value, float):
            return self.name == "float"
        if isinstance(value, str):
            return self.name in ("str", "Path", "Device", "TensorDevice") \
                or (self.name == "Unset" and value == UNSET)
        return False

    def conversion(self) -> Optional[str]:
        """The runtime call that normalises or checks an argument of this type, if any."""
        if self.name in BUILTIN_CONVERSIONS:
            return BUILTIN_CONVERSIONS[self.name]
        if self.name in CLASS_CONVERSIONS:
            return CLASS_CONVERSIONS[self.name][0]
        if self.name == "Optional" and self.args[0].name in CLASS_CONVERSIONS:
            return CLASS_CONVERSIONS[self.args[0].name][1]
        if self.name == "|" and len(self.args) == 2 and self.args[1].name == "Unset":
            return self.args[0].conversion()  # GraphPool | Unset: the check lets UNSET pass
        spelling = ARGUMENT_SPELLINGS.get(self.name)
        return spelling[2] if spelling else None

    def annotation(self, shadowed: frozenset[str] = frozenset()) -> str:
        """The stub spelling; builtins named in shadowed (a module constant such as
        tensorplay.bool hides the builtin) are spelled builtins.NAME."""
        if self.name == "|":
            return " | ".join(arg.annotation(shadowed) for arg in self.args)
        if self.name == "Optional":
            return f"{self.args[0].annotation(shadowed)} | None"
        if self.name in GENERICS:
            generic = f"builtins.{self.name}" if self.name in shadowed else self.name
            return f"{generic}[{', '.join(arg.annotation(shadowed) for arg in self.args)}]"
        if self.name in BUILTINS:
            spelling = BUILTINS[self.name][0]
            return f"builtins.{spelling}" if spelling in shadowed else spelling
        if self.name in ARGUMENT_SPELLINGS:
            return ARGUMENT_SPELLINGS[self.name][0]
        return self.name

    def display(self) -> str:
        """The spelling shown in reference pages: as written in the schema."""
        if self.name == "|":
            return " | ".join(arg.display() for arg in self.args)
        if self.args:
            return f"{self.name}[{', '.join(arg.display() for arg in self.args)}]"
        return self.name

    def qualified(self, class_home: dict[str, str]) -> str:
        """The display spelling with each schema class named by its module (class_home maps a
        class to the module declaring it), so that the docs site links it wherever it appears."""
        if self.name == "|":
            return " | ".join(arg.qualified(class_home) for arg in self.args)
        if self.args:
            return f"{self.name}[{', '.join(arg.qualified(class_home) for arg in self.args)}]"
        return f"{class_home[self.name]}.{self.name}" if self.name in class_home else self.name


def parse_type(text: str, known_classes: frozenset[str]) -> TypeExpr:
    """Parse a schema type; raise TypeSyntaxError naming the problem."""
    if not isinstance(text, str) or not text.strip():
        raise TypeSyntaxError(f"type must be a non-empty string, got {text!r}")
    tokens = _tokenize(text)
    position = 0

    def peek() -> Optional[str]:
        return tokens[position] if position < len(tokens) else None

    def take(expected: Optional[str] = None) -> str:
        nonlocal position
        token = peek()
        if token is None or (expected is not None and token != expected):
            raise TypeSyntaxError(f"malformed type {text!r}: expected {expected or 'a name'}")
        position += 1
        return token

    def union() -> TypeExpr:
        members = [single()]
        while peek() == "|":
            take("|")
            members.append(single())
        return members[0] if len(members) == 1 else TypeExpr("|", tuple(members))

    def single() -> TypeExpr:
        name = take()
        if name == "...":
            return TypeExpr("...")
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise TypeSyntaxError(f"malformed type {text!r}: unexpected {name!r}")
        if name not in BUILTINS and name not in ARGUMENT_SPELLINGS \
                and name not in GENERICS and name not in known_classes:
            vocabulary = sorted(set(BUILTINS) | set(ARGUMENT_SPELLINGS) | set(GENERICS))
            raise TypeSyntaxError(
                f"unknown type name '{name}' in {text!r}; expected one of "
                f"{', '.join(vocabulary)} or a class declared in the schema")
        if peek() != "[":
            if name in GENERICS:
                raise TypeSyntaxError(f"malformed type {text!r}: {name} needs arguments")
            return TypeExpr(name)
        if name not in GENERICS:
            raise TypeSyntaxError(f"malformed type {text!r}: {name} takes no arguments")
        take("[")
        args = [union()]
        while peek() == ",":
            take(",")
            args.append(union())
        take("]")
        arity = GENERICS[name]
        if arity is not None and len(args) != arity:
            raise TypeSyntaxError(
                f"malformed type {text!r}: {name} takes {arity} argument(s), got {len(args)}")
        return TypeExpr(name, tuple(args))

    result = union()
    if peek() is not None:
        raise TypeSyntaxError(f"malformed type {text!r}: unexpected {peek()!r}")
    return result


def _tokenize(text: str) -> list[str]:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match:
            if text[position:].strip() == "":
                break
            raise TypeSyntaxError(f"malformed type {text!r}: unexpected {text[position]!r}")
        tokens.append(match.group(1))
        position = match.end()
    return tokens
