"""The closed type vocabulary of api.yaml.

Note [Closed type vocabulary]
A type in the schema is an expression over a fixed set of names: the builtins below, the
argument spellings below, and the classes the schema itself declares. Generic forms are
``Optional[T]``, ``list[T]``, ``set[T]``, ``tuple[T, ...]``, ``dict[K, V]`` and unions
``A | B``. Anything else is a schema error, so a typo cannot reach the stubs. Each name knows
its stub annotation and, where the wrapper must normalise the argument (device spellings),
the runtime call that does it.

Note [Parameter kinds]
Each kind of parameter is declared once, here: its stub annotation, the runtime function
through which the generated wrapper converts and checks every argument of that kind before it
calls the runtime, and the C type that conversion delivers, so that the runtime receives checked
values and a mistake is a TypeError or ValueError naming the argument, raised before anything
touches a device or a graph. The kinds:
- devices (Device, DeviceSelection: an int, the index; TensorDevice is parsed by the tensor
  runtime, which must tell None from "cpu"), streams (Stream, Optional[Stream]: a StreamCore,
  or None), pools (GraphPool: the checked object), paths (Path: a str);
- bool (a bint), float (a double) and str (a str): a C signature cannot enforce them;
- an int with a `range: [low, high]` in its parameter's declaration (bounded int: any C integer
  type that holds the range, or object where none does), a str with `choices: [...]` (a fixed
  set of strings, such as the capture modes, delivered as the index of the choice in the
  schema's list, so that the runtime keeps no table of the strings; the stubs keep `str`, as
  the API reference spells them), and a str with `path: true` (a file path the API reference
  types as str: a str, checked as Path checks a path's text). Plain ints are checked by the
  runtime, which knows their ranges where they depend on state (a device index against the
  visible devices).
- Every other parameter (a Tensor, a dtype, a union, Any) reaches the runtime as the object
  given, which the runtime checks itself: its C type is object (var_positional ones: a tuple).
Checks that need runtime state run in the runtime, after every argument check. `codegen
validate` holds each runtime declaration to the C types (model.py, Note [Schema rules]), and
each conversion's declared return type to its kind's, so the runtime never converts, casts or
checks again what the wrapper delivered (a str may be taken as object too: ALSO_AS_OBJECT).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .runtime_index import read_sentinels

# The one string that means "the settings given to the constructor" (Graph.capture_begin): a
# sentinel the runtime defines, read from the source of the runtime beside this package
# (runtime/base/sentinels.py), so that the defaults, the stubs and the runtime's checks agree.
UNSET = str(read_sentinels(Path(__file__).resolve().parent.parent / "runtime")["UNSET"])

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
    "Unset": (f"Literal[{UNSET!r}]", False),
}

# Argument spellings: the ways users may name a device, or a capture's memory pool. Where the
# wrapper normalises the argument, the conversion is "_module.function", a cdef function of
# runtime/module.pxd taking (value, argument name) that validate checks; the generated module
# cimports that runtime module. Tensor placement is parsed by the tensor runtime itself (it must
# tell None from "cpu").
ARGUMENT_SPELLINGS: dict[str, tuple[str, bool, Optional[str], str, str]] = {
    # name: (stub annotation, admits None, conversion, stub alias definition, C type)
    "Device": ("_DeviceLike", True, "_device.device_index_arg",
               "_DeviceLike: TypeAlias = device | str | int | None", "int"),
    # A device to make current, where -1 means "no change" (set_device_index).
    "DeviceSelection": ("_DeviceLike", True, "_device.device_selection_arg",
                        "_DeviceLike: TypeAlias = device | str | int | None", "int"),
    "TensorDevice": ("_TensorDeviceLike", True, None,
                     "_TensorDeviceLike: TypeAlias = device | str | int | None", "object"),
    # The memory pool a capture allocates from: None for a private one, the handle that
    # graph_pool_handle() and pool_id give, or a graph whose pool to share. The graph runtime
    # checks it where the capture settings are stored (runtime/graphs/graph.pyx, pool_arg).
    "GraphPool": ("_GraphPool", True, "_graph.pool_arg",
                  "_GraphPool: TypeAlias = tuple[int, int] | Graph | CUDAGraph | None",
                  "object"),
}

# Classes of the schema that are parameter kinds: their check when required and when optional,
# and the runtime core class the check delivers (None too where optional).
CLASS_CONVERSIONS: dict[str, tuple[str, str, str]] = {
    "Stream": ("_stream.required_stream_arg", "_stream.stream_arg", "StreamCore"),
}

# Builtins whose type a C-level runtime signature cannot enforce (Cython reads any object as a
# bint, and float() and str() of an object rarely fail): the wrapper checks them through these
# runtime functions, so that a mistake is a TypeError naming the argument, and passes on the C
# type each returns. int is left to the runtime functions, which check each int's range where
# they know it.
BUILTIN_CONVERSIONS: dict[str, tuple[str, str]] = {
    "bool": ("_errors.bool_arg", "bint"),
    "float": ("_errors.float_arg", "double"),
    "str": ("_errors.str_arg", "str"),
    "Path": ("_errors.path_arg", "str"),
}
# Parameters that declare a `range:`, `choices:` or `path: true` (model.py) convert through these
# instead, which take the bounds or the choices after (value, argument name). A choice arrives
# as its index in the schema's choices (an int: CHOICE_C_TYPE), a path as a str.
RANGE_CONVERSION = "_errors.int_arg"
CHOICE_CONVERSION = "_errors.choice_arg"
CHOICE_C_TYPE = "int"
PATH_TEXT_CONVERSION = "_errors.str_path_arg"
PATH_TEXT_C_TYPE = "str"
# Delivered types that are Python objects the runtime uses only through Python operations (a
# str): a declaration may take them as object too, which neither converts nor checks them. Every
# other C type must be declared as it is: taken as object, a bint, a double or an int would be
# converted again, and a StreamCore cast again to reach its C fields.
ALSO_AS_OBJECT = frozenset({"str"})
# The C integer types a bounded int may be declared as, with what they hold (LP64, as every
# platform the runtime builds for): the range must fit, or the declaration is object.
C_INTEGERS: dict[str, tuple[int, int]] = {
    "int": (-2 ** 31, 2 ** 31 - 1),
    "int32_t": (-2 ** 31, 2 ** 31 - 1),
    "unsigned int": (0, 2 ** 32 - 1),
    "uint32_t": (0, 2 ** 32 - 1),
    "long long": (-2 ** 63, 2 ** 63 - 1),
    "int64_t": (-2 ** 63, 2 ** 63 - 1),
    "Py_ssize_t": (-2 ** 63, 2 ** 63 - 1),
    "unsigned long long": (0, 2 ** 64 - 1),
    "uint64_t": (0, 2 ** 64 - 1),
    "size_t": (0, 2 ** 64 - 1),
}


def integer_c_types(low: int, high: int) -> tuple[str, ...]:
    """The C types a bounded int from low to high may be declared as: every C integer type
    that holds the range, or object where none does (a seed, -2**63 to 2**64 - 1)."""
    fitting = tuple(name for name, (least, most) in C_INTEGERS.items()
                    if least <= low and high <= most)
    return fitting or ("object",)

# ContextManager[T]: what a function returns to be used in a with statement, whose `as` gives T
# (cuda.graph() gives the graph it captures into); typing.ContextManager in the stubs.
GENERICS = {"Optional": 1, "list": 1, "set": 1, "tuple": None, "dict": 2, "ContextManager": 1}

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
            return BUILTIN_CONVERSIONS[self.name][0]
        if self.name in CLASS_CONVERSIONS:
            return CLASS_CONVERSIONS[self.name][0]
        if self.name == "Optional" and self.args[0].name in CLASS_CONVERSIONS:
            return CLASS_CONVERSIONS[self.args[0].name][1]
        if self.name == "|" and len(self.args) == 2 and self.args[1].name == "Unset":
            return self.args[0].conversion()  # GraphPool | Unset: the check lets UNSET pass
        spelling = ARGUMENT_SPELLINGS.get(self.name)
        return spelling[2] if spelling else None

    def c_type(self) -> str:
        """The C type an argument of this type reaches the runtime in: what its conversion
        returns, or object (the argument as given) where it has none."""
        if self.name in BUILTIN_CONVERSIONS:
            return BUILTIN_CONVERSIONS[self.name][1]
        if self.name in CLASS_CONVERSIONS:
            return CLASS_CONVERSIONS[self.name][2]
        if self.name == "Optional" and self.args[0].name in CLASS_CONVERSIONS:
            return CLASS_CONVERSIONS[self.args[0].name][2]
        if self.name == "|" and len(self.args) == 2 and self.args[1].name == "Unset":
            return self.args[0].c_type()
        spelling = ARGUMENT_SPELLINGS.get(self.name)
        return spelling[4] if spelling else "object"

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
