"""The validated, frozen model of api.yaml.

Note [Schema rules]
- Every list keeps declaration order; names are unique within their scope (a module's
  functions, classes, variables, re-exports and submodules; a class's methods and properties).
- Every mapping accepts only its known keys; every item and parameter needs a non-empty doc.
- Whatever validates renders to sources that parse and compile: names are identifiers that are
  neither Python keywords nor soft keywords (``type`` excepted, SOFT_KEYWORDS_ALLOWED) nor
  words Cython reads as its own where the name stands (cython_reserved.py); texts hold no
  control character but tab and newline (text_problem), and no string holds a lone surrogate
  (load.unencodable). Any other text is quoted by render.docstring / render.string_literal.
- Types come from the closed vocabulary (Note [Closed type vocabulary] in types.py).
- A default must fit its parameter's type; parameters follow Python's ordering rules.
- ``impl`` names a symbol that runtime/ declares (runtime_index.py) taking one argument per
  parameter, each declared in the C type its parameter's kind delivers (types.py, Note
  [Parameter kinds]): a Device as int, a Stream as StreamCore, a bool as bint, a choice as int.
  A module function's ``impl`` may instead name a function of the Python layer
  (``graphed_callables.make_graphed_callables`` is python/graphed_callables.py's), taking one
  argument per parameter; the wrapper imports it.
- A class may ``extends:`` a base from the top-level ``bases:`` list: a named set of methods and
  properties that several classes share (the two graph classes), over one runtime core class
  (the base's ``impl``, which the class takes unless it names the same one). The base is
  rendered once, as a generated class the extending classes derive from; the base's members
  come first; a member the class declares under an inherited name replaces it (an explicit
  override). A base may extend another; an unknown or circular base, a base no class extends,
  and a base member every extending class overrides are errors.
- A parameter several callables share is declared once, in the top-level ``params:`` list (its
  ``key``, by default its name, names it there), and a parameter list refers to it by that key
  alone (``- device``), or as ``{use: key}`` with the fields that differ for this callable
  (``default``, ``kind``, ``doc``). An unknown key, or a shared parameter nothing uses, is an
  error.
- Classes: ``kind: extension`` (the default) derives from a cdef class of runtime/**/*.pxd;
  ``kind: python`` from a Python class of runtime/*.pyx, so that users can subclass it and
  give instances attributes (nn.Module, autograd.Function); ``kind: exception`` likewise, for
  exceptions. A method with ``static: true`` is a static method whose ``impl`` is a module
  function (``module.symbol``). A method's or a property's ``impl`` may name a module function
  too (``module.symbol``, a cdef function of runtime/**/*.pxd taking the instance first, then
  one argument per parameter), so that an operation lives in a module of its own rather than
  on the core class. A property with ``setter: <core method>`` can be assigned,
  the value checked by the property's type like a parameter. ``decorator: true`` makes a
  context manager (it declares ``__enter__`` and ``__exit__``, and its constructor needs no
  argument) usable as a decorator too: each call of the decorated function runs inside a new
  instance, as PyTorch's no_grad. A ``kind: python`` class may also say ``subclass_of:
  <class>``, a class the schema declares before it (nn.Linear of nn.Module, nn.Parameter of
  Tensor): the generated class derives from its runtime class first and from that class second,
  so that it is one (isinstance) and has its members without declaring them again.
- Tensor classes (impl ``core.TensorCore``, and the classes that are ``subclass_of`` one) may
  mark a method or property ``metadata: true``: it reads or changes only the tensor's metadata
  (shape, strides, dtype, device, autograd fields, a view of the same memory), never its
  memory, so its wrapper checks nothing while a graph sleeps (render.py, Note [Awake checks]).
- Defaults say the common case once: a method's or property's ``impl`` is ``c_<name>`` unless
  given; a
  callable without ``returns`` returns None ("nothing."). A function that is another name for a
  function of its module (a deprecated spelling) says ``alias_of: <name>`` and takes that
  function's implementation, parameters, return and exceptions; it needs its own ``doc`` only to
  say something else, and with ``deprecated:`` its doc starts "(Deprecated)". A function that is
  a method of a class of its module with the instance first, as torch.add(input, other) is
  input.add(other), says ``method_of: <Class>.<method>`` and takes the method's parameters
  after ``input``, its return, exceptions and doc (its own ``doc`` may replace it); the wrapper
  checks that input is an instance and calls the method, which checks the rest.
- Docs fields: ``example:`` on a function, method or class is a doctest (``>>>`` lines, each
  a statement that compiles, with the output they print), a string for an example that runs on
  the CPU, ``{code: ..., needs: cuda}`` for one that needs a CUDA device, or ``{code: ...,
  needs: nccl}`` for one that also needs NVIDIA's nccl4py (the ``nccl`` extra); a CPU example
  that runs on one (a tensor placed there, tensorplay.cuda or tensorplay.accelerator,
  USES_CUDA) is an error. tests/tools/test_docs_examples.py runs them. ``groups:`` on a class
  or base is a list of ``{title, members}`` that orders the class's docs page: every member
  in exactly one group, each named once; a class's groups add to its base's (a title the base
  has takes the members into that group, a new title adds a group after them). A class without
  groups lists its methods, then its properties. Neither field changes the generated code or
  the schema hash.
All problems are collected and raised together as one SchemaError, each as file:line:col.
"""
from __future__ import annotations

import builtins
import difflib
import doctest
import hashlib
import json
import keyword
import math
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .load import (Diagnostic, LocatedList, LocatedMap, Location, SchemaError, load_schema,
                   shown)
from . import cython_reserved
from .runtime_index import Arity, RuntimeModule, c_type_of, index_python, index_runtime
from .types import (ALSO_AS_OBJECT, CHOICE_C_TYPE, CHOICE_CONVERSION, PATH_TEXT_C_TYPE,
                    PATH_TEXT_CONVERSION, RANGE_CONVERSION, UNSET, TypeExpr, TypeSyntaxError,
                    integer_c_types, parse_type)

SCHEMA_VERSION = 1
PARAM_KINDS = ("positional", "positional_only", "var_positional", "keyword_only", "var_keyword")
KIND_ORDER = {"positional_only": 0, "positional": 1, "var_positional": 2, "keyword_only": 3,
              "var_keyword": 4}
VARIADIC = ("var_positional", "var_keyword")
CLASS_KINDS = ("extension", "exception", "python")
EXAMPLE_NEEDS = ("cpu", "cuda", "nccl")
# What in an example runs on a CUDA device: a tensor placed there, tensorplay.cuda's functions,
# .cuda(). Naming a device, tensorplay.device("cuda:1"), needs none.
USES_CUDA = re.compile(r"""device\s*=\s*["']cuda|\bcuda\.\w|\.cuda\(|\baccelerator\.\w""")
# The runtime class of tensors: a schema class with this impl, and every class subclass_of one,
# is a tensor class, whose wrappers check that its memory is awake (render.py, Note [Awake
# checks]).
TENSOR_CORE = ("core", "TensorCore")


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True)
class Param:
    name: str
    type: TypeExpr
    kind: str
    doc: str
    default: Any = NO_DEFAULT
    # The limits of the parameter's kind (types.py, Note [Parameter kinds]): an int's `range:`,
    # a str's `choices:` or `path: true`.
    bounds: Optional[tuple[int, int]] = None
    choices: Optional[tuple[str, ...]] = None
    path: bool = False

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT

    @property
    def conversion(self) -> Optional[str]:
        if self.bounds is not None:
            return RANGE_CONVERSION
        if self.choices is not None:
            return CHOICE_CONVERSION
        if self.path:
            return PATH_TEXT_CONVERSION
        return self.type.conversion()

    def c_types(self) -> tuple[str, ...]:
        """The C types the runtime may declare this parameter as, the one its kind delivers
        first (types.py, Note [Parameter kinds]); for a bounded int any that holds the range."""
        if self.bounds is not None:
            return integer_c_types(*self.bounds)
        if self.choices is not None:
            delivered = CHOICE_C_TYPE
        elif self.path:
            delivered = PATH_TEXT_C_TYPE
        elif self.kind == "var_positional":
            delivered = "tuple"
        elif self.kind == "var_keyword":
            delivered = "dict"
        else:
            delivered = self.type.c_type()
        return (delivered, "object") if delivered in ALSO_AS_OBJECT else (delivered,)

    def conversion_call(self, variable: Optional[str] = None) -> str:
        """What the wrapper passes to the runtime for this parameter: the argument (held in
        variable, by default the parameter's name), converted and checked by its kind."""
        value = variable or self.name
        if not self.conversion:
            return value
        extra = ""
        if self.bounds is not None:
            extra = f", {self.bounds[0]}, {self.bounds[1]}"
        elif self.choices is not None:
            accepted = self.choices + ((UNSET,) if self.default == UNSET else ())
            extra = f", {accepted!r}"
        return f"{self.conversion}({value}, {self.name!r}{extra})"


@dataclass(frozen=True)
class Returns:
    type: TypeExpr
    doc: str


RETURNS_NOTHING = Returns(TypeExpr("None"), "nothing.")


@dataclass(frozen=True)
class Raises:
    type: str  # a builtin exception or an exception class the schema declares
    doc: str


@dataclass(frozen=True)
class Example:
    """A usage example of a function or class, in doctest form (>>> lines and their output),
    shown on its docs page and run by tests/tools/test_docs_examples.py: on the CPU in every run
    (needs "cpu"), only where a CUDA device is visible (needs "cuda", a gpu test), or only
    where NCCL also is usable (needs "nccl": a gpu test that skips without nccl4py)."""

    code: str
    needs: str
    line: int  # the schema line the example's text starts on


@dataclass(frozen=True)
class Group:
    """Members of a class listed together on its docs page, under a title (Capture, Replay)."""

    title: str
    members: tuple[str, ...]


@dataclass(frozen=True)
class Function:
    """A module function or a class method; a method's ``impl_module`` is empty when it calls a
    method of the core class, and names the module when it calls a module function (static, or
    taking the instance first)."""

    name: str
    impl_module: str
    impl_name: str
    doc: str
    params: tuple[Param, ...]
    returns: Optional[Returns]
    deprecated: Optional[str]
    since: Optional[str]
    raises: tuple[Raises, ...] = ()
    static: bool = False  # a static method: impl names a module function (module.symbol)
    python: bool = False  # impl names a function of the Python layer (python/), imported
    metadata: bool = False  # a tensor class's member that never touches the tensor's memory
    # Documentation only, outside the schema hash (normalise): the example and the schema line.
    example: Optional[Example] = None
    line: int = 0
    # A module function that is a method of a class of its module, the instance first as
    # `input` (method_of: Class.method): the class's name; impl_name is the method's.
    method_of: str = ""

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0]


@dataclass(frozen=True)
class Property:
    name: str
    impl_name: str
    type: TypeExpr
    doc: str
    setter: Optional[str] = None  # the core method that sets it (one argument), if settable
    impl_module: str = ""  # set when impl is a module function taking the instance
    metadata: bool = False  # a tensor class's property that never touches the tensor's memory


@dataclass(frozen=True)
class Class:
    name: str
    kind: str
    impl_module: str
    impl_name: str
    doc: str
    init: Optional[tuple[Param, ...]]
    methods: tuple[Function, ...]
    properties: tuple[Property, ...]
    extends: Optional[str] = None  # the base (schema 'bases:') its shared members come from
    decorator: bool = False  # a context manager that also decorates functions (no_grad)
    init_impl: str = "init"  # the core method the constructor calls
    # Members taken from the base unchanged: the generated base class defines them.
    inherited: frozenset[str] = frozenset()
    # The schema class this one also derives from (subclass_of): (its module, its name).
    subclass_of: Optional[tuple[str, str]] = None
    # Documentation only, outside the schema hash (normalise): the example, the member groups
    # of the docs page (every member in one, in the order the page lists them) and the line.
    example: Optional[Example] = None
    groups: tuple[Group, ...] = ()
    line: int = 0

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0]


@dataclass(frozen=True)
class Base:
    """A base rendered once, as the generated class its extending classes derive from."""
    name: str
    impl_module: str
    impl_name: str
    doc: str
    methods: tuple[Function, ...]
    properties: tuple[Property, ...]

    def runtime_modules(self) -> list[str]:
        """Runtime modules the base's wrappers cimport, sorted."""
        params = [p for m in self.methods for p in m.params]
        params += [Param("value", p.type, "positional", "") for p in self.properties if p.setter]
        members = [m.impl_module for m in self.methods + self.properties if m.impl_module]
        return sorted({self.impl_module, *members} | {p.conversion.split(".")[0].lstrip("_")
                                                      for p in params if p.conversion})


@dataclass(frozen=True)
class Variable:
    name: str
    type: TypeExpr
    impl_module: str
    impl_name: str
    doc: str


@dataclass(frozen=True)
class Reexport:
    name: str
    source: str


@dataclass(frozen=True)
class Module:
    name: str
    doc: str
    submodules: tuple[str, ...]
    functions: tuple[Function, ...]
    classes: tuple[Class, ...]
    variables: tuple[Variable, ...]
    reexports: tuple[Reexport, ...]

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    @property
    def is_package(self) -> bool:
        return bool(self.submodules)

    def public_names(self) -> list[str]:
        """``__all__``: declared items and re-exports in schema order, then submodules."""
        return ([f.name for f in self.functions] + [c.name for c in self.classes]
                + [v.name for v in self.variables] + [r.name for r in self.reexports]
                + [s.rsplit(".", 1)[-1] for s in self.submodules])

    def runtime_modules(self) -> list[str]:
        """Runtime modules this module's wrappers cimport, sorted."""
        used = {f.impl_module for f in self.functions if not f.python and not f.method_of}
        # Python classes (and exceptions) are imported instead (python_runtime_modules).
        used |= {c.impl_module for c in self.classes if c.kind == "extension"}
        used |= {m.impl_module for c in self.classes for m in c.methods if m.impl_module}
        used |= {p.impl_module for c in self.classes for p in c.properties if p.impl_module}
        used |= {v.impl_module for v in self.variables}
        # A conversion is "_module.function" of the runtime module it lives in; property
        # setters convert their value the same way.
        params = self.all_params() + [Param("value", p.type, "positional", "")
                                      for c in self.classes for p in c.properties if p.setter]
        used |= {p.conversion.split(".")[0].lstrip("_") for p in params if p.conversion}
        # Generated classes register with the runtime (runtime/base/public.pyx), except those that
        # extend a base: they share its core class, which the runtime never creates itself.
        if any(not c.extends for c in self.classes):
            used.add("public")
        return sorted(used)

    def python_modules(self) -> list[str]:
        """Modules of the Python layer this module's wrappers import, sorted."""
        return sorted({f.impl_module for f in self.functions if f.python})

    def all_params(self) -> list[Param]:
        params = [p for f in self.functions for p in f.params]
        for cls in self.classes:
            params += list(cls.init or ())
            # Inherited methods are the generated base class's (templates/package/_bases.*).
            params += [p for m in cls.methods if m.name not in cls.inherited for p in m.params]
        return params


@dataclass(frozen=True)
class Api:
    modules: tuple[Module, ...]
    bases: tuple[Base, ...]
    schema_hash: str
    normalised: dict
    runtime_packages: dict  # runtime module stem -> the package it is imported from
    tensor_classes: frozenset = frozenset()  # names of the tensor classes (TENSOR_CORE)

    def module(self, name: str) -> Module:
        return next(m for m in self.modules if m.name == name)

    def find(self, module_name: str, item_name: str) -> Any:
        """The function or class ``item_name`` of a module, following re-exports."""
        module = self.module(module_name)
        for item in module.functions + module.classes:
            if item.name == item_name:
                return item
        for reexport in module.reexports:
            if reexport.name == item_name:
                return self.find(reexport.source, item_name)
        raise KeyError(f"{module_name}.{item_name}")


# --------------------------------------------------------------------------------------------
# Building and validating

# Names the generated modules use for themselves, which a module-level item of the schema would
# shadow: the stubs' imports, the wrappers' imports and the builtins they call; every name that
# starts with an underscore is the generated code's too (runtime module aliases, stub aliases).
MODULE_RESERVED = frozenset({"os", "builtins", "Any", "Callable", "ContextManager", "Literal",
                             "TypeAlias",
                             "warnings", "globals", "type"})
# A parameter may not be called self (methods take it first) nor warnings (a deprecated
# function's wrapper calls warnings.warn, which such a parameter would shadow).
PARAM_RESERVED = frozenset({"self", "warnings"})


def default_problem(value: Any) -> Optional[str]:
    """Why a YAML value cannot be a default the wrappers render, or None."""
    if value is not None and type(value) not in (bool, int, float, str):
        return (f"must be null, a bool, an int, a float or a string; YAML read "
                f"{type(value).__name__} {shown(value)}")
    if type(value) is float and not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    if type(value) is int and not -(1 << 63) <= value < 1 << 64:
        return "must fit in 64 bits (-2**63 to 2**64 - 1)"
    if type(value) is str and len(value) > 1000:
        return f"is {len(value)} characters long; a default is at most 1000"
    return None


# Python's soft keywords (keyword.softkwlist; "type" since Python 3.12) are identifiers, but a
# name that reads as a statement is refused like a keyword, whichever Python runs codegen.
SOFT_KEYWORDS = frozenset(keyword.softkwlist) | {"_", "case", "match", "type"}
# The exception: PyTorch's API names a parameter and a property "type" (device(type, index),
# device.type), which tensorplay mirrors; a def parameter or method named type compiles in
# Python and Cython alike (Python 3.12 makes it a keyword only at the start of a statement).
SOFT_KEYWORDS_ALLOWED = frozenset({"type"})

# Where a name stands in the generated code decides which of Cython's words it may not be
# (cython_reserved.py): "parameter" and "class" (C declarations could start there), "item" (a
# function, method or property), "variable" (only ever written as a string in the wrappers)
# and "module" (a segment of a module's dotted name).
POSITIONS = ("parameter", "class", "item", "variable", "module")


def identifier_problem(name: str, reserved: frozenset[str] = frozenset(),
                       position: str = "item") -> Optional[str]:
    """Why name cannot be a Python identifier of the generated code, or None. With reserved
    names given (module level, parameters), a single leading underscore is refused too."""
    if not name.isidentifier():
        return f"{name!r} is not a Python identifier"
    if keyword.iskeyword(name):
        return f"'{name}' is a Python keyword; the generated code could not define or call it"
    if name in SOFT_KEYWORDS and name not in SOFT_KEYWORDS_ALLOWED:
        return (f"'{name}' is a Python soft keyword (keyword.softkwlist), which the schema "
                "refuses like a keyword; choose another")
    if name in cython_reserved.RESERVED:
        return (f"'{name}' is a Cython reserved word (Cython/Compiler/Scanning.py), so Cython "
                "could not compile the wrapper; choose another")
    if name in cython_reserved.EXPRESSIONS and position != "variable":
        return (f"'{name}' is a Cython operator or constant (Cython/Compiler/Parsing.py), so "
                "Cython could not compile the wrapper; choose another")
    if name in cython_reserved.DECLARATIONS and position in ("parameter", "class"):
        return (f"'{name}' starts a C type in Cython (Cython/Compiler/Parsing.py), so Cython "
                f"would read the {position} as a C declaration; choose another")
    normal = unicodedata.normalize("NFKC", name)
    if normal != name:
        return (f"{name!r} is not in the form Python reads it in (NFKC: {normal!r}); write "
                f"{normal!r}, which is the same identifier to Python")
    if name in reserved:
        return f"'{name}' is a name the generated code uses itself; choose another"
    if name.startswith("_") and not (name.startswith("__") and name.endswith("__")) \
            and reserved:
        return (f"'{name}' starts with an underscore, which the generated code keeps for its "
                "own names; choose another")
    return None


# Characters a schema text may not hold: control characters other than tab and newline. NUL
# cannot stand in Python or Cython source at all, and the others would be written raw into the
# generated sources and pages (a carriage return, an escape sequence), where no doc needs them.
# Lone surrogates, which UTF-8 cannot encode, are refused for every string as it is loaded
# (load.py).
def text_problem(value: str) -> Optional[str]:
    """Why value cannot be a doc or other text of the schema, or None."""
    for index, char in enumerate(value):
        if unicodedata.category(char) == "Cc" and char not in "\t\n":
            name = "NUL" if char == "\0" else unicodedata.name(char, "a control character")
            return (f"holds U+{ord(char):04X} ({name}) at character {index + 1}, which the "
                    "generated sources cannot hold as written; remove it")
    return None


def with_default(entry: LocatedMap, key: str, value: Any, located_at: str) -> LocatedMap:
    """entry with key set to value, located where entry's located_at key is written."""
    copy = LocatedMap(entry)
    copy[key] = value
    copy.location = entry.location
    copy.key_locations = {**entry.key_locations, key: entry.key_locations[located_at]}
    copy.value_locations = {**entry.value_locations, key: entry.value_locations[located_at]}
    return copy


def delivery(param: Param) -> str:
    """How an argument of param reaches the runtime, as a message says it."""
    limits = " with a range" if param.bounds is not None else \
        " with choices (passed as the choice's index)" if param.choices is not None else \
        " with path: true" if param.path else ""
    if param.conversion:
        return (f"type '{param.type.display()}'{limits} converts through "
                f"{param.conversion.lstrip('_')}()")
    if param.kind == "var_positional":
        return "a var_positional parameter is passed as the tuple of its arguments"
    if param.kind == "var_keyword":
        return "a var_keyword parameter is passed as the dict of its arguments"
    return f"type '{param.type.display()}' is passed as given, for the runtime to check"


class _Builder:
    def source(self, module: str, suffix: str = ".pxd") -> str:
        """The runtime file (or Python layer file) that declares module, as messages name it."""
        known = self.runtime.get(module) or self.python.get(module)
        return known.source(module, suffix) if known else f"runtime/**/{module}{suffix}"

    def __init__(self, runtime: dict[str, RuntimeModule],
                 python: Optional[dict[str, RuntimeModule]] = None):
        self.runtime = runtime
        self.python = python or {}  # the Python layer's modules (python/*.py)
        self.diagnostics: list[Diagnostic] = []
        self.classes: frozenset[str] = frozenset()
        self.exceptions: frozenset[str] = frozenset()
        self.bases: dict[str, LocatedMap] = {}
        self.extended: set[str] = set()
        # Per base: its member entries (its own base's first), and the members as the extending
        # classes built them (name -> member), from which the generated base class is made.
        self.base_entries: dict[str, list[LocatedMap]] = {}
        self.base_docs: dict[str, str] = {}
        self.base_members: dict[str, dict[str, Function | Property]] = {}
        self.built_bases: tuple[Base, ...] = ()
        self.shared_params: dict[str, LocatedMap] = {}
        self.used_params: set[str] = set()
        # Classes built so far (name -> module), in schema order, for subclass_of.
        self.declared_classes: dict[str, str] = {}
        self.tensor_classes: set[str] = set()  # classes built so far that are tensor classes

    def error(self, location: Location, message: str) -> None:
        self.diagnostics.append(Diagnostic(location, message))

    # -- generic field access -----------------------------------------------------------------

    def check_keys(self, entry: LocatedMap, what: str, required: tuple[str, ...],
                   optional: tuple[str, ...]) -> None:
        for key in entry:
            if key not in required and key not in optional:
                allowed = ", ".join(required + optional)
                self.error(entry.key_locations[key],
                           f"unknown key '{key}' in {what}; allowed keys: {allowed}")
        for key in required:
            if key not in entry:
                self.error(entry.location, f"{what} is missing required key '{key}'")

    def mapping(self, value: Any, location: Location, what: str) -> Optional[LocatedMap]:
        if isinstance(value, LocatedMap):
            return value
        self.error(location, f"{what} must be a mapping, got {type(value).__name__}")
        return None

    def items(self, entry: LocatedMap, key: str, what: str) -> list[tuple[Any, Location]]:
        value = entry.get(key)
        if value is None:
            return []
        if not isinstance(value, LocatedList):
            self.error(entry.value_locations[key], f"'{key}' of {what} must be a list")
            return []
        return list(zip(value, value.item_locations))

    def text(self, entry: LocatedMap, key: str, what: str, required: bool = True) -> str:
        value = entry.get(key)
        location = entry.value_locations.get(key, entry.location)
        if value is None:
            if required and key in entry:
                self.error(location, f"'{key}' of {what} must not be empty")
            return ""
        if not isinstance(value, str) or not value.strip():
            self.error(location, f"'{key}' of {what} must be a non-empty string, got {value!r}")
            return ""
        problem = text_problem(value.strip())
        if problem:
            self.error(location, f"'{key}' of {what} {problem}")
        return value.strip()

    def doc(self, entry: LocatedMap, what: str) -> str:
        if "doc" not in entry:
            self.error(entry.location, f"{what} has no doc; every public item needs one")
            return ""
        return self.text(entry, "doc", what)

    def type_of(self, entry: LocatedMap, key: str, what: str) -> TypeExpr:
        if key not in entry:
            return TypeExpr("Any")
        try:
            return parse_type(entry[key], self.classes)
        except TypeSyntaxError as problem:
            self.error(entry.value_locations[key], f"{what}: {problem}")
            return TypeExpr("Any")

    def unique(self, named: list[tuple[str, Location]], scope: str) -> None:
        seen: dict[str, Location] = {}
        for name, location in named:
            if name in seen:
                self.error(location, f"duplicate name '{name}' in {scope} "
                                     f"(first declared at line {seen[name].line})")
            else:
                seen[name] = location

    def name(self, entry: LocatedMap, what: str, reserved: frozenset[str] = frozenset(),
             position: str = "item") -> str:
        """An item's name: an identifier that is not a Python keyword or soft keyword (it
        becomes a def), nor a word Cython reads as its own where the name stands (position,
        one of POSITIONS), in the NFKC form Python reads it in, and none of the names the
        generated code itself uses where the item is defined (reserved)."""
        value = self.text(entry, "name", what)
        if value:
            problem = identifier_problem(value, reserved, position)
            if problem:
                self.error(entry.value_locations["name"], f"{what} name {problem}")
        return value

    def impl(self, entry: LocatedMap, what: str, python: bool = False) -> tuple[str, str]:
        """Split ``module.symbol`` and check that the runtime module exists (or, for python,
        a module of the Python layer)."""
        value = self.text(entry, "impl", what)
        if not value:
            return "", ""
        module, _, symbol = value.rpartition(".")
        location = entry.value_locations["impl"]
        if not module or not symbol:
            self.error(location, f"impl of {what} must be 'runtime_module.symbol', got {value!r}")
            return "", ""
        if module not in self.runtime and not (python and module in self.python):
            # The nearest names, not all of them: the runtime has dozens of modules.
            near = difflib.get_close_matches(module, sorted(self.runtime), 3, 0.6)
            message = (f"impl of {what}: no runtime module '{module}' (no "
                       f"runtime/**/{module}.pxd)")
            if python:
                message += f" nor Python module (no python/{module}.py)"
            message += f"; nearest runtime modules: {', '.join(near) or 'none'}"
            if python:
                message += f"; Python modules: {', '.join(sorted(self.python)) or 'none'}"
            self.error(location, message)
        return module, symbol

    # -- schema items -------------------------------------------------------------------------

    def params(self, entry: LocatedMap, what: str) -> tuple[Param, ...]:
        params: list[Param] = []
        seen_default = False
        seen_kinds: list[str] = []
        for raw, location in self.items(entry, "params", what):
            param_entry = self.param_entry(raw, location, what)
            if param_entry is None:
                continue
            self.check_keys(param_entry, f"parameter of {what}", ("name", "type"),
                            ("doc", "default", "kind", "range", "choices", "path"))
            name = self.name(param_entry, f"parameter of {what}", PARAM_RESERVED, "parameter")
            param_what = f"parameter '{name}' of {what}"
            kind = param_entry.get("kind", "positional")
            if kind not in PARAM_KINDS:
                self.error(param_entry.value_locations.get("kind", param_entry.location),
                           f"kind of {param_what} must be one of {', '.join(PARAM_KINDS)}, "
                           f"got {kind!r}")
                kind = "positional"
            param_type = self.type_of(param_entry, "type", param_what)
            doc = self.doc(param_entry, param_what)
            default = param_entry.get("default", NO_DEFAULT) if "default" in param_entry \
                else NO_DEFAULT
            problem = default_problem(default) if default is not NO_DEFAULT else None
            if problem:
                self.error(param_entry.value_locations["default"],
                           f"default of {param_what} {problem}")
                default = NO_DEFAULT
            if default is not NO_DEFAULT and not param_type.admits(default):
                self.error(param_entry.value_locations["default"],
                           f"default {default!r} of {param_what} does not fit its type "
                           f"'{param_type.display()}'")
            bounds, choices, path = self.kind_limits(param_entry, param_what, param_type,
                                                     default)
            self.conversion(param_entry, param_what,
                            Param(name, param_type, kind, doc, default, bounds, choices, path))
            if kind in VARIADIC and default is not NO_DEFAULT:
                self.error(param_entry.value_locations["default"],
                           f"{param_what} is {kind} and cannot have a default")
            if kind in VARIADIC and kind in seen_kinds:
                self.error(param_entry.location, f"{param_what}: only one {kind} "
                                                 "parameter is allowed")
            if kind not in ("keyword_only",) + VARIADIC:
                if seen_default and default is NO_DEFAULT:
                    self.error(param_entry.location, f"{param_what} has no default but "
                                                     "follows a parameter with one")
                seen_default = seen_default or default is not NO_DEFAULT
            # Python's order: positional-only, then positional-or-keyword, then keyword-only.
            if seen_kinds and KIND_ORDER[seen_kinds[-1]] > KIND_ORDER[kind]:
                self.error(param_entry.location,
                           f"{param_what} is {kind} but follows a {seen_kinds[-1]} parameter")
            seen_kinds.append(kind)
            params.append(Param(name, param_type, kind, doc, default, bounds, choices, path))
        self.unique([(p.name, l) for p, (_, l) in zip(params, self.items(entry, "params", what))],
                    f"the parameters of {what}")
        return tuple(params)

    def param_entry(self, raw: Any, location: Location, what: str) -> Optional[LocatedMap]:
        """A parameter as written, or a shared one of the schema's params: list, by its key
        alone or as {use: key} with the fields that differ here."""
        if isinstance(raw, str):
            return self.shared_param(raw, location, what)
        entry = self.mapping(raw, location, f"a parameter of {what}")
        if entry is None or "use" not in entry:
            return entry
        self.check_keys(entry, f"parameter of {what}", ("use",), ("default", "kind", "doc"))
        shared = self.shared_param(entry["use"], entry.value_locations["use"], what)
        if shared is None:
            return None
        merged = LocatedMap({key: value for key, value in shared.items() if key != "key"})
        merged.location = entry.location
        merged.key_locations = dict(shared.key_locations)
        merged.value_locations = dict(shared.value_locations)
        for key in entry:
            if key != "use":
                merged[key] = entry[key]
                merged.key_locations[key] = entry.key_locations[key]
                merged.value_locations[key] = entry.value_locations[key]
        return merged

    def shared_param(self, key: Any, location: Location, what: str) -> Optional[LocatedMap]:
        shared = self.shared_params.get(key) if isinstance(key, str) else None
        if shared is None:
            known = ", ".join(sorted(self.shared_params)) or "none"
            self.error(location, f"a parameter of {what} refers to {key!r}, which the schema's "
                                 f"params: list does not declare; declared: {known}")
            return None
        self.used_params.add(key)
        if "key" not in shared:
            return shared
        plain = LocatedMap({k: v for k, v in shared.items() if k != "key"})
        plain.location = shared.location
        plain.key_locations = shared.key_locations
        plain.value_locations = shared.value_locations
        return plain

    def collect_shared_params(self, root: LocatedMap) -> None:
        """The top-level params: list, by key; checked where used, and each must be used."""
        declared: list[tuple[str, Location]] = []
        for raw, location in self.items(root, "params", "the schema"):
            entry = self.mapping(raw, location, "a shared parameter")
            if entry is None:
                continue
            self.check_keys(entry, "a shared parameter", ("name", "type"),
                            ("key", "doc", "default", "kind", "range", "choices", "path"))
            key = entry.get("key", entry.get("name"))
            if not isinstance(key, str) or not key.isidentifier():
                self.error(entry.location, f"shared parameter key {key!r} is not an identifier")
                continue
            declared.append((key, entry.location))
            self.shared_params.setdefault(key, entry)
        self.unique(declared, "the schema's params")

    def kind_limits(self, entry: LocatedMap, what: str, param_type: TypeExpr, default: Any) \
            -> tuple[Optional[tuple[int, int]], Optional[tuple[str, ...]], bool]:
        """A bounded int's `range: [low, high]`, a str's `choices: [...]` or `path: true`,
        checked."""
        bounds = choices = None
        path = False
        if "path" in entry:
            location = entry.value_locations["path"]
            if param_type != TypeExpr("str"):
                self.error(location, f"{what}: path applies to type 'str' only, not "
                                     f"'{param_type.display()}' (type Path takes os.PathLike too)")
            elif entry["path"] is not True:
                self.error(location, f"{what}: path must be true (a str that names a file), got "
                                     f"{shown(entry['path'])}; leave it out for any other str")
            elif "choices" in entry:
                self.error(location, f"{what} has both choices and path")
            else:
                path = True
        if "range" in entry:
            value = entry["range"]
            location = entry.value_locations["range"]
            if param_type != TypeExpr("int"):
                self.error(location, f"{what}: range applies to type 'int' only, not "
                                     f"'{param_type.display()}'")
            elif not (isinstance(value, list) and len(value) == 2 and all(
                    type(bound) is int for bound in value) and value[0] <= value[1]):
                self.error(location, f"{what}: range must be [low, high], two ints with low <= "
                                     f"high, got {shown(value)}")
            else:
                bounds = (value[0], value[1])
                if type(default) is int and not bounds[0] <= default <= bounds[1]:
                    self.error(entry.value_locations["default"],
                               f"default {shown(default)} of {what} is outside its range {value!r}")
        if "choices" in entry:
            value = entry["choices"]
            location = entry.value_locations["choices"]
            if param_type != TypeExpr("str"):
                self.error(location, f"{what}: choices apply to type 'str' only, not "
                                     f"'{param_type.display()}'")
            elif not (isinstance(value, list) and value and all(
                    isinstance(choice, str) for choice in value) and len(set(value)) == len(value)):
                self.error(location, f"{what}: choices must be a non-empty list of distinct "
                                     f"strings, got {shown(value)}")
            else:
                choices = tuple(value)
                if isinstance(default, str) and default not in choices and default != UNSET:
                    self.error(entry.value_locations["default"],
                               f"default {shown(default)} of {what} is not one of its choices")
        if bounds is not None and choices is not None:
            self.error(entry.location, f"{what} has both range and choices")
        return bounds, choices, path

    def conversion(self, entry: LocatedMap, what: str, param: Param) -> None:
        """The runtime function a parameter's kind converts through (types.py) must exist and
        take (value, name) and the kind's extra arguments."""
        param_type = param.type
        conversion = param.conversion
        if not conversion:
            return
        count = 4 if param.bounds is not None else 3 if param.choices is not None else 2
        module, _, function = conversion.lstrip("_").partition(".")
        runtime = self.runtime.get(module, RuntimeModule())
        declared = runtime.functions.get(function)
        location = entry.value_locations.get("type", entry.location)
        if declared is None:
            self.error(location, f"{what}: type '{param_type.display()}' converts through "
                                 f"{module}.{function}(), which {self.source(module)} does not "
                                 "declare")
        elif not declared.accepts(count):
            self.error(location, f"{what}: type '{param_type.display()}' converts through "
                                 f"{module}.{function}(), declared with {declared}, but the "
                                 f"wrapper passes {count} (the value, the parameter name and "
                                 "the kind's limits)")
        elif runtime.returns[function] != self.delivered(param):
            self.error(location, f"{what}: type '{param_type.display()}' converts through "
                                 f"{module}.{function}(), which {self.source(module)} declares "
                                 f"returning {runtime.returns[function]}, but the kind "
                                 f"delivers {self.delivered(param)} (codegen/types.py, Note "
                                 "[Parameter kinds])")

    @staticmethod
    def delivered(param: Param) -> str:
        """What param's conversion returns: the C type its kind delivers; int_arg returns the int
        itself, which the runtime's declaration takes in a C integer type holding the range."""
        return "object" if param.bounds is not None else param.c_types()[0]

    def returns(self, entry: LocatedMap, what: str) -> Optional[Returns]:
        if "returns" not in entry:
            return RETURNS_NOTHING
        returns = self.mapping(entry["returns"], entry.value_locations["returns"],
                               f"'returns' of {what}")
        if returns is None:
            return None
        self.check_keys(returns, f"'returns' of {what}", ("type",), ("doc",))
        return Returns(self.type_of(returns, "type", f"return type of {what}"),
                       self.doc(returns, f"return value of {what}"))

    def raises(self, entry: LocatedMap, what: str) -> tuple[Raises, ...]:
        """The exceptions a function documents: builtins or exception classes of the schema."""
        found = []
        for raw, location in self.items(entry, "raises", what):
            item = self.mapping(raw, location, f"an entry of 'raises' of {what}")
            if item is None:
                continue
            self.check_keys(item, f"'raises' of {what}", ("type", "doc"), ())
            name = self.text(item, "type", f"'raises' of {what}")
            builtin = getattr(builtins, name, None)
            if name and name not in self.exceptions and not (
                    isinstance(builtin, type) and issubclass(builtin, BaseException)):
                self.error(item.value_locations["type"],
                           f"'raises' of {what}: {name!r} is neither a builtin exception nor "
                           "an exception class declared in the schema")
            found.append(Raises(name, self.doc(item, f"'raises' {name} of {what}")))
        return tuple(found)

    def function(self, entry: LocatedMap, scope: str, core: Optional[tuple[str, str]],
                 tensor: bool = False) -> Function:
        """A module function (core None) or a method of the runtime class ``core``, of a
        tensor class when tensor is set."""
        reserved = MODULE_RESERVED if core is None else frozenset()
        name = self.name(entry, f"item of {scope}", reserved)
        what = f"'{scope}.{name}'"
        optional = ("doc", "params", "returns", "raises", "deprecated", "since", "example")
        static = core is not None and entry.get("static") is True
        if core is not None and "static" in entry and not isinstance(entry["static"], bool):
            self.error(entry.value_locations["static"], f"static of {what} must be true or false")
        if core is not None:
            optional += ("metadata",)
        if core is None or static:
            self.check_keys(entry, what, ("name", "impl"), optional + (("static",) if core else ()))
        else:  # a method's impl may be left to its default
            self.check_keys(entry, what, ("name",), ("impl", "static") + optional)
        metadata = self.metadata(entry, what, tensor)
        if core is not None and not static and "impl" not in entry and name:
            entry = with_default(entry, "impl", f"c_{name}", "name")  # methods: c_<name>
        problems = len(self.diagnostics)
        params = self.params(entry, what)
        # A count from a broken parameter list would only repeat its errors.
        params_valid = len(self.diagnostics) == problems
        python = False
        if core is None or static:
            # Only a module function may be the Python layer's: the wrapper imports it.
            module, symbol = self.impl(entry, what, python=core is None)
            python = core is None and module not in self.runtime and module in self.python
            layer = self.python if python else self.runtime
            declares = "defines" if python else "declares"
            if module in layer and symbol and symbol not in layer[module].functions:
                self.error(entry.value_locations["impl"],
                           f"impl of {what}: {self.source(module)} {declares} no "
                           f"{'function' if python else 'cdef function'} '{symbol}'")
            elif module in layer and symbol and params_valid:
                declared = f"{self.source(module)} {declares} {symbol}()"
                self.arity(entry, what, declared, layer[module].functions[symbol], len(params))
                if not python:  # Python functions declare no C types
                    self.contract(entry, what, declared, layer[module].functions[symbol],
                                  params)
        elif "." in str(entry.get("impl", "")):  # a module function, the instance first
            module, symbol = self.module_function(entry, what, params_valid, params)
        else:
            module, symbol = "", self.text(entry, "impl", what)
            core_module, core_class = core
            runtime = self.runtime.get(core_module)
            if runtime and symbol and core_class in runtime.classes | runtime.python_methods:
                methods = runtime.methods_of(core_class) if core_class in runtime.classes \
                    else runtime.python_methods[core_class]
                if symbol not in methods:
                    self.error(entry.value_locations["impl"],
                               f"impl of {what}: runtime class {core_module}.{core_class} "
                               f"declares no cdef method '{symbol}'")
                elif params_valid:
                    declared = f"runtime class {core_module}.{core_class} declares {symbol}()"
                    self.arity(entry, what, declared, methods[symbol], len(params))
                    if core_class in runtime.classes:  # a Python class's methods are def
                        self.contract(entry, what, declared, methods[symbol], params)
        deprecated = self.text(entry, "deprecated", what, required=False) or None
        since = str(entry["since"]) if entry.get("since") is not None else None
        return Function(name, module, symbol, self.doc(entry, what), params,
                        self.returns(entry, what), deprecated, since, self.raises(entry, what),
                        static, python, metadata, self.example(entry, what),
                        entry.location.line)

    def metadata(self, entry: LocatedMap, what: str, tensor: bool) -> bool:
        """A member's `metadata:` mark (Note [Schema rules]), False where it is left out."""
        if "metadata" not in entry:
            return False
        value = entry["metadata"]
        if not isinstance(value, bool):
            self.error(entry.value_locations["metadata"],
                       f"metadata of {what} must be true or false, got {shown(value)}")
            return False
        if not tensor:
            self.error(entry.key_locations["metadata"],
                       f"metadata of {what}: only the members of a tensor class (impl "
                       f"{'.'.join(TENSOR_CORE)}, or subclass_of one) touch tensor memory that "
                       "a sleeping graph released, so only they may be marked metadata")
            return False
        return value

    def alias(self, entry: LocatedMap, scope: str, originals: dict[str, LocatedMap]) -> Function:
        """Another name for a function of the same module (alias_of), usually deprecated."""
        name = self.name(entry, f"item of {scope}", MODULE_RESERVED)
        what = f"'{scope}.{name}'"
        self.check_keys(entry, what, ("name", "alias_of"),
                        ("doc", "deprecated", "since", "example"))
        target_name = entry["alias_of"]
        target = originals.get(target_name) if isinstance(target_name, str) else None
        if target is None:
            self.error(entry.value_locations["alias_of"],
                       f"{what} is an alias of {target_name!r}, which module '{scope}' does not "
                       "declare as a function")
            return Function(name, "", "", "", (), RETURNS_NOTHING, None, None)
        problems = len(self.diagnostics)
        original = self.function(target, scope, None)
        del self.diagnostics[problems:]  # reported where the target is declared
        deprecated = self.text(entry, "deprecated", what, required=False) or None
        doc = self.text(entry, "doc", what) if "doc" in entry else original.doc
        if deprecated and not doc.startswith("(Deprecated)"):
            doc = f"(Deprecated) {doc}"
        since = str(entry["since"]) if entry.get("since") is not None else original.since
        example = self.example(entry, what) if "example" in entry else original.example
        return Function(name, original.impl_module, original.impl_name, doc, original.params,
                        original.returns, deprecated, since, original.raises,
                        python=original.python, example=example, line=entry.location.line)

    def mirror(self, entry: LocatedMap, scope: str, classes: dict[str, Class]) -> Function:
        """A function that is a method of a class of the same module, the instance first as
        `input` (method_of: Class.method), as torch.add is Tensor.add: it takes the method's
        parameters, return, exceptions and doc (unless it says its own), and needs an example
        of its own like any function."""
        name = self.name(entry, f"item of {scope}", MODULE_RESERVED)
        what = f"'{scope}.{name}'"
        self.check_keys(entry, what, ("name", "method_of"), ("doc", "since", "example"))
        target = entry["method_of"]
        class_name, _, method_name = target.partition(".") if isinstance(target, str) else \
            ("", "", "")
        cls = classes.get(class_name)
        method = next((m for m in cls.methods if m.name == method_name), None) if cls else None
        if method is None or method.static or any(p.name == "input" for p in method.params):
            self.error(entry.value_locations["method_of"],
                       f"{what} is method_of {target!r}, which must be 'Class.method': a method "
                       f"(not static, with no parameter named input) of a class that module "
                       f"'{scope}' declares")
            return Function(name, "", "", "", (), RETURNS_NOTHING, None, None)
        instance = Param("input", parse_type(class_name, self.classes), "positional",
                         f"a {class_name}: {name}(input, ...) is input.{method_name}(...).")
        doc = self.text(entry, "doc", what) if "doc" in entry else method.doc
        since = str(entry["since"]) if entry.get("since") is not None else method.since
        return Function(name, "", method_name, doc, (instance,) + method.params, method.returns,
                        None, since, method.raises, example=self.example(entry, what),
                        line=entry.location.line, method_of=class_name)

    def module_function(self, entry: LocatedMap, what: str, params_valid: bool,
                        params: tuple[Param, ...]) -> tuple[str, str]:
        """A member's impl naming a module function that takes the instance first, checked."""
        module, symbol = self.impl(entry, what)
        if module in self.runtime and symbol and symbol not in self.runtime[module].functions:
            self.error(entry.value_locations["impl"],
                       f"impl of {what}: {self.source(module)} declares no cdef function "
                       f"'{symbol}'")
        elif module in self.runtime and symbol and params_valid:
            declared = f"{self.source(module)} declares {symbol}()"
            arity = self.runtime[module].functions[symbol]
            self.arity(entry, what, declared, arity, len(params) + 1,
                       passes="the instance, then one per parameter")
            if arity.total >= 1:  # the parameters after the instance, in their kinds' C types
                self.contract(entry, what, declared, Arity(max(arity.required - 1, 0),
                                                           arity.total - 1, arity.types[1:]),
                              params)
        return module, symbol

    def arity(self, entry: LocatedMap, what: str, declared: str, arity: Arity,
              count: int, key: str = "impl", passes: str = "one per parameter") -> None:
        """The wrapper passes one argument per schema parameter; the C declaration must agree."""
        if not arity.accepts(count):
            self.error(entry.value_locations.get(key, entry.location),
                       f"impl of {what}: {declared} with {arity}, but the wrapper passes {count} "
                       f"({passes})")

    def contract(self, entry: LocatedMap, what: str, declared: str, arity: Arity,
                 params: tuple[Param, ...], key: str = "impl") -> None:
        """Each argument reaches the runtime in the C type its parameter's kind delivers
        (types.py, Note [Parameter kinds]); the C declaration must take it in that type, so
        that the runtime neither converts nor checks it again."""
        if not arity.accepts(len(params)):
            return  # the arity error says it
        for param, written in zip(params, arity.types):
            accepted = param.c_types()
            if written in accepted:
                continue
            expected = accepted[0] if len(accepted) == 1 else \
                f"one of {', '.join(accepted[:-1])} or {accepted[-1]}"
            self.error(entry.value_locations.get(key, entry.location),
                       f"impl of {what}: {declared} taking '{param.name}' as {written}, but the "
                       f"wrapper passes it as {expected} ({delivery(param)})")

    def example(self, entry: LocatedMap, what: str) -> Optional[Example]:
        """The 'example' of an item (Note [Schema rules], docs fields), checked: a doctest whose
        statements compile, declared for the CPU (a string) or for CUDA ({code, needs})."""
        if "example" not in entry:
            return None
        raw, location, needs = entry["example"], entry.value_locations["example"], "cpu"
        if isinstance(raw, LocatedMap):
            self.check_keys(raw, f"'example' of {what}", ("code", "needs"), ())
            needs = raw.get("needs", "cuda")
            if needs not in EXAMPLE_NEEDS:
                self.error(raw.value_locations.get("needs", raw.location),
                           f"'needs' of the example of {what} must be one of "
                           f"{', '.join(EXAMPLE_NEEDS)}, got {needs!r}")
            code = self.text(raw, "code", f"the example of {what}")
            location = raw.value_locations.get("code", raw.location)
        else:
            code = self.text(entry, "example", what)
        if not code:
            return None
        try:
            examples = doctest.DocTestParser().get_examples(code)
        except ValueError as problem:  # a malformed prompt (">>>x"), an indented output
            self.error(location, f"'example' of {what} is not a doctest: {problem}")
            return None
        if not examples:
            self.error(location, f"'example' of {what} holds no '>>> ' statement")
        for example in examples:
            try:
                compile(example.source, "<example>", "single")
            except SyntaxError as problem:
                self.error(location, f"'example' of {what}, its statement at line "
                                     f"{example.lineno + 1} of the example, does not compile: "
                                     f"{problem.msg}")
        if needs == "cpu" and USES_CUDA.search(code):
            self.error(location, f"'example' of {what} uses CUDA: declare it as "
                                 "{code: ..., needs: cuda}, so that it runs only on a GPU")
        # A text of several lines is a block scalar (|), which starts after its indicator's line.
        start = location.line + (1 if "\n" in code else 0)
        return Example(code, needs, start)

    def groups(self, entry: LocatedMap, what: str, members: list[str]) -> tuple[Group, ...]:
        """The member groups of a class's docs page: its base's (following 'extends'), then its
        own added to them, each member of the class in exactly one."""
        declared: list[tuple[LocatedMap, Location]] = []
        chain, base = [entry], entry.get("extends")
        while isinstance(base, str) and base in self.bases and self.bases[base] not in chain:
            chain.append(self.bases[base])
            base = self.bases[base].get("extends")
        for owner in reversed(chain):  # the farthest base first
            for raw, location in self.items(owner, "groups", what):
                group = self.mapping(raw, location, f"an entry of 'groups' of {what}")
                if group is not None:
                    self.check_keys(group, f"a group of {what}", ("title", "members"), ())
                    declared.append((group, location))
        if not declared:
            return ()
        titles: dict[str, list[str]] = {}
        placed: dict[str, str] = {}
        for group, location in declared:
            title = self.text(group, "title", f"a group of {what}")
            listed = titles.setdefault(title, [])
            for name, name_location in self.items(group, "members", f"group '{title}' of {what}"):
                if name not in members:
                    self.error(name_location, f"group '{title}' of {what} names {name!r}, which "
                                              f"is not a member of {what}")
                elif name in placed:
                    self.error(name_location, f"group '{title}' of {what} names {name!r}, which "
                                              f"group '{placed[name]}' already lists")
                else:
                    placed[name] = title
                    listed.append(name)
        missing = [name for name in members if name not in placed]
        if missing:
            self.error(declared[-1][1], f"the groups of {what} leave out {', '.join(missing)}; "
                                        "list every member in one group")
        return tuple(Group(title, tuple(names)) for title, names in titles.items() if names)

    def members(self, entry: LocatedMap, what: str,
                chain: tuple[str, ...] = ()) -> tuple[list[LocatedMap], list[LocatedMap]]:
        """The method and property entries of a class or base, following 'extends'.

        The base's members come first, in its order; a member declared here with the name of
        an inherited one replaces it in place (an explicit override); new members follow.
        ``chain`` holds the bases being resolved, to report a cycle instead of recursing.
        """
        methods: list[LocatedMap] = []
        properties: list[LocatedMap] = []
        if "extends" in entry:
            base = entry["extends"]
            location = entry.value_locations["extends"]
            if not isinstance(base, str) or base not in self.bases:
                known = ", ".join(sorted(self.bases)) or "none"
                self.error(location, f"{what} extends unknown base {base!r}; the schema's "
                                     f"bases: {known}")
            elif base in chain:
                self.error(location, f"{what} extends '{base}', which is circular: "
                                     f"{' -> '.join(chain + (base,))}")
            else:
                self.extended.add(base)
                methods, properties = self.members(self.bases[base], f"base '{base}'",
                                                   chain + (base,))
        declared: list[tuple[str, Location]] = []
        for key, found in (("methods", methods), ("properties", properties)):
            for raw, location in self.items(entry, key, what):
                member = self.mapping(raw, location, f"an entry of '{key}' of {what}")
                if member is None:
                    continue
                name = member.get("name")
                if isinstance(name, str):
                    declared.append((name, member.location))
                inherited = [i for i, m in enumerate(found) if m.get("name") == name]
                if inherited:
                    found[inherited[0]] = member
                else:
                    found.append(member)
        self.unique(declared, what)
        return methods, properties

    def base(self, entry: LocatedMap) -> None:
        """A named set of members that classes share through 'extends:'; not a public class."""
        name = self.name(entry, "base", position="class")
        what = f"base '{name}'"
        self.check_keys(entry, what, ("name", "impl"),
                        ("doc", "extends", "methods", "properties", "groups"))
        self.base_docs[name] = self.doc(entry, what)
        module, symbol = self.impl(entry, what)
        if module in self.runtime and symbol and symbol not in self.runtime[module].classes:
            self.error(entry.value_locations["impl"],
                       f"impl of {what}: {self.source(module)} declares no class '{symbol}'")
        methods, properties = self.members(entry, what, (name,))
        self.base_entries[name] = methods + properties

    def klass(self, entry: LocatedMap, scope: str) -> Class:
        name = self.name(entry, f"class of {scope}", MODULE_RESERVED, "class")
        what = f"'{scope}.{name}'"
        base = entry.get("extends") if isinstance(entry.get("extends"), str) else None
        base_entry = self.bases.get(base)
        if base_entry is not None and isinstance(base_entry.get("impl"), str):
            # The class derives from the base's generated class, so from its core class too.
            if "impl" not in entry:
                entry = with_default(entry, "impl", base_entry["impl"], "extends")
            elif entry["impl"] != base_entry["impl"]:
                self.error(entry.value_locations["impl"],
                           f"impl of {what} must be the impl of its base '{base}' "
                           f"({base_entry['impl']}), from which it derives; leave it out")
                entry = with_default(entry, "impl", base_entry["impl"], "impl")  # no more errors
        # A class that extends a base takes its impl (an unknown base is reported by itself).
        self.check_keys(entry, what, ("name",) if "extends" in entry else ("name", "impl"),
                        ("doc", "kind", "extends", "init", "methods", "properties", "decorator",
                         "impl", "subclass_of", "example", "groups"))
        kind = entry.get("kind", "extension")
        if kind not in CLASS_KINDS:
            self.error(entry.value_locations.get("kind", entry.location),
                       f"kind of {what} must be one of {', '.join(CLASS_KINDS)}, got {kind!r}")
        subclass_of = None
        if "subclass_of" in entry:
            parent = self.text(entry, "subclass_of", what)
            location = entry.value_locations["subclass_of"]
            if kind != "python":
                # An extension class has exactly one base, its core class.
                self.error(location, f"subclass_of of {what} needs kind: python, got {kind!r}")
            elif parent and parent not in self.declared_classes:
                # The generated module imports it, so it must exist when the module runs.
                self.error(location, f"subclass_of of {what} must name a class the schema "
                                     f"declares before it, got {parent!r}")
            elif parent:
                subclass_of = (self.declared_classes[parent], parent)
        module, symbol = self.impl(entry, what)
        runtime = self.runtime.get(module)
        python = kind in ("exception", "python")
        if runtime and symbol:
            declared = runtime.python_classes if python else runtime.classes
            if symbol not in declared:
                where = self.source(module, ".pyx" if python else ".pxd")
                self.error(entry.value_locations["impl"],
                           f"impl of {what}: {where} declares no class '{symbol}'")
        core_methods = {}
        if runtime and symbol:
            core_methods = runtime.python_methods.get(symbol, {}) if python \
                else runtime.methods_of(symbol)
        init = None
        init_impl = "init"
        if "init" in entry:
            init_entry = self.mapping(entry["init"], entry.value_locations["init"],
                                      f"'init' of {what}")
            if init_entry is not None:
                self.check_keys(init_entry, f"'init' of {what}", (), ("params", "impl"))
                if "impl" in init_entry:
                    init_impl = self.text(init_entry, "impl", f"'init' of {what}") or "init"
                if runtime and (symbol in runtime.classes or python) \
                        and init_impl not in core_methods:
                    self.error(init_entry.value_locations.get("impl", entry.key_locations["init"]),
                               f"{what} declares 'init' but runtime class {module}.{symbol} has "
                               f"no cdef method '{init_impl}'")
                problems = len(self.diagnostics)
                init = self.params(init_entry, f"{what} constructor")
                if init_impl in core_methods and len(self.diagnostics) == problems:
                    declared = f"runtime class {module}.{symbol} declares {init_impl}()"
                    self.arity(entry, f"{what} constructor", declared, core_methods[init_impl],
                               len(init), key="init")
                    if not python:
                        self.contract(entry, f"{what} constructor", declared,
                                      core_methods[init_impl], init, key="init")
        tensor = (module, symbol) == TENSOR_CORE or (
            subclass_of is not None and subclass_of[1] in self.tensor_classes)
        if tensor:
            self.tensor_classes.add(name)
        method_entries, property_entries = self.members(entry, what)
        methods = [(self.function(method, f"{scope}.{name}", (module, symbol), tensor),
                    method.location) for method in method_entries]
        properties = []
        for prop in property_entries:
            prop_name = self.name(prop, f"property of {what}")
            prop_what = f"property '{prop_name}' of {what}"
            self.check_keys(prop, prop_what, ("name", "type"),
                            ("impl", "doc", "setter", "metadata"))
            if "impl" not in prop and prop_name:
                prop = with_default(prop, "impl", f"c_{prop_name}", "name")
            impl_module, impl_name = "", self.text(prop, "impl", prop_what)
            if "." in impl_name:  # a module function of the instance
                impl_module, impl_name = self.module_function(prop, prop_what, True, ())
            setter = self.text(prop, "setter", prop_what) if "setter" in prop else None
            for key, method, count in (("impl", impl_name, 0), ("setter", setter, 1)):
                if key == "impl" and impl_module:
                    continue
                if not (method and runtime and (symbol in runtime.classes or python)):
                    continue
                if method not in core_methods:
                    self.error(prop.value_locations[key],
                               f"{key} of {prop_what}: runtime class {module}.{symbol} declares "
                               f"no {'method' if python else 'cdef method'} '{method}'")
                else:
                    self.arity(prop, prop_what, f"runtime class {module}.{symbol} declares "
                               f"{method}()", core_methods[method], count, key=key)
            problems = len(self.diagnostics)
            prop_type = self.type_of(prop, "type", prop_what)
            if setter and runtime and symbol in runtime.classes and setter in core_methods \
                    and len(self.diagnostics) == problems:
                # The value, converted by the property's type like a parameter.
                self.contract(prop, prop_what, f"runtime class {module}.{symbol} declares "
                              f"{setter}()", core_methods[setter],
                              (Param("value", prop_type, "positional", ""),), key="setter")
            properties.append((Property(prop_name, impl_name, prop_type,
                                        self.doc(prop, prop_what), setter, impl_module,
                                        self.metadata(prop, prop_what, tensor)),
                               prop.location))
        self.unique([(m.name, l) for m, l in methods] + [(p.name, l) for p, l in properties],
                    f"class {what}")
        # The generated class derives from the core class: a def method named like the cdef
        # method it calls would override it (Cython warns; calls become ambiguous). A module
        # function is no attribute of the class, so it may share a public name.
        public_names = {m.name for m, _ in methods} | {p.name for p, _ in properties}
        for member, location in methods + properties:
            if member.impl_name in public_names and not member.impl_module:
                self.error(location, f"impl '{member.impl_name}' of {what}.{member.name} is also "
                                     "a public name of the class; give the core method its own "
                                     f"name (for example c_{member.impl_name})")
        extends = base if base_entry is not None else None
        inherited: frozenset[str] = frozenset()
        if extends is not None:
            shared_entries = self.base_entries.get(base, [])
            inherited = frozenset(member["name"] for member in method_entries + property_entries
                                  if isinstance(member.get("name"), str)
                                  and any(member is shared for shared in shared_entries))
            built = self.base_members.setdefault(base, {})
            for member, _ in methods + properties:
                if member.name in inherited:
                    built[member.name] = member
        decorator = entry.get("decorator", False)
        if not isinstance(decorator, bool):
            self.error(entry.value_locations["decorator"], f"decorator of {what} must be true or "
                                                           "false")
            decorator = False
        if decorator:
            missing = {"__enter__", "__exit__"} - {m.name for m, _ in methods}
            if missing:
                self.error(entry.value_locations["decorator"],
                           f"{what} is a decorator, so it must declare "
                           f"{' and '.join(sorted(missing))} (a context manager)")
            if init and any(not p.has_default for p in init):
                self.error(entry.value_locations["decorator"],
                           f"{what} is a decorator, which makes a new instance for each call, so "
                           "its constructor must need no argument")
        self.declared_classes[name] = scope
        groups = self.groups(entry, what, [m.name for m, _ in methods + properties])
        return Class(name, kind, module, symbol, self.doc(entry, what), init,
                     tuple(m for m, _ in methods), tuple(p for p, _ in properties), extends,
                     decorator, init_impl, inherited, subclass_of, self.example(entry, what),
                     groups, entry.location.line)

    def variable(self, entry: LocatedMap, scope: str) -> Variable:
        name = self.name(entry, f"variable of {scope}", MODULE_RESERVED, "variable")
        what = f"'{scope}.{name}'"
        self.check_keys(entry, what, ("name", "type", "impl"), ("doc",))
        module, symbol = self.impl(entry, what)
        if module in self.runtime and symbol and symbol not in self.runtime[module].functions:
            self.error(entry.value_locations["impl"],
                       f"impl of {what}: {self.source(module)} declares no cdef function "
                       f"'{symbol}'")
        elif module in self.runtime and symbol:  # called with the variable's name
            self.arity(entry, what, f"{self.source(module)} declares {symbol}()",
                       self.runtime[module].functions[symbol], 1)
        return Variable(name, self.type_of(entry, "type", what), module, symbol,
                        self.doc(entry, what))

    def module(self, entry: LocatedMap) -> tuple[Module, dict[str, Location]]:
        name = self.text(entry, "name", "a module")
        what = f"module '{name}'"
        # Each segment becomes a folder or file under --out: identifiers only, so that no name
        # can reach outside it (an absolute path, "..").
        for segment in name.split(".") if name else ():
            problem = identifier_problem(segment, position="module")
            if problem:
                self.error(entry.value_locations["name"],
                           f"module name {name!r} must be dotted Python identifiers: {problem}")
                name = ""
                break
        self.check_keys(entry, what, ("name",),
                        ("doc", "submodules", "functions", "classes", "variables", "reexports"))
        locations: dict[str, Location] = {}
        named: list[tuple[str, Location]] = []

        def collect(key: str, build) -> list:
            built = []
            for raw, location in self.items(entry, key, what):
                item = self.mapping(raw, location, f"an entry of '{key}' in {what}")
                if item is not None:
                    value = build(item)
                    built.append(value)
                    named.append((value.name, item.location))
                    locations[value.name] = item.location
            return built

        # Aliases take their target's declaration, so the targets are built first.
        originals = {item["name"]: item for item, _ in self.items(entry, "functions", what)
                     if isinstance(item, LocatedMap) and isinstance(item.get("name"), str)
                     and "alias_of" not in item and "method_of" not in item}
        # Classes first: a function may be one of their methods (method_of).
        classes = collect("classes", lambda e: self.klass(e, name))
        by_name = {c.name: c for c in classes}

        def function(e: LocatedMap) -> Function:
            if "alias_of" in e:
                return self.alias(e, name, originals)
            if "method_of" in e:
                return self.mirror(e, name, by_name)
            return self.function(e, name, None)

        functions = collect("functions", function)
        variables = collect("variables", lambda e: self.variable(e, name))

        def reexport(item: LocatedMap) -> Reexport:
            self.check_keys(item, f"re-export in {what}", ("name", "from"), ())
            return Reexport(self.name(item, f"re-export in {what}", MODULE_RESERVED),
                            self.text(item, "from", f"re-export in {what}"))

        reexports = collect("reexports", reexport)
        submodules = []
        for raw, location in self.items(entry, "submodules", what):
            if not isinstance(raw, str) or not raw.startswith(name + ".") \
                    or "." in raw[len(name) + 1:]:
                self.error(location, f"submodule {raw!r} of {what} must be a direct child, "
                                     f"'{name}.<name>'")
                continue
            submodules.append(raw)
            named.append((raw.rsplit(".", 1)[-1], location))
            locations["submodule:" + raw] = location
        self.unique(named, what)
        return Module(name, self.doc(entry, what), tuple(submodules), tuple(functions),
                      tuple(classes), tuple(variables), tuple(reexports)), locations

    def api(self, root: LocatedMap) -> tuple[Module, ...]:
        self.check_keys(root, "the schema", ("schema_version", "modules"), ("bases", "params"))
        if "schema_version" in root and root["schema_version"] != SCHEMA_VERSION:
            self.error(root.value_locations["schema_version"],
                       f"schema_version must be {SCHEMA_VERSION}, got {root['schema_version']!r}")
        raw_modules = self.items(root, "modules", "the schema")
        # Class names are types everywhere, so collect them before reading any type.
        self.classes = frozenset(
            c.get("name") for m, _ in raw_modules if isinstance(m, LocatedMap)
            for c in (m.get("classes") or []) if isinstance(c, LocatedMap)
            and isinstance(c.get("name"), str))
        self.exceptions = frozenset(
            c.get("name") for m, _ in raw_modules if isinstance(m, LocatedMap)
            for c in (m.get("classes") or []) if isinstance(c, LocatedMap)
            and c.get("kind") == "exception" and isinstance(c.get("name"), str))
        self.collect_shared_params(root)
        base_locations: list[tuple[str, Location]] = []
        for raw, location in self.items(root, "bases", "the schema"):
            entry = self.mapping(raw, location, "a base")
            if entry is not None and isinstance(entry.get("name"), str):
                self.bases.setdefault(entry["name"], entry)
                base_locations.append((entry["name"], entry.location))
        self.unique(base_locations, "the schema's bases")
        for entry in self.bases.values():
            self.base(entry)
        self.extended.clear()  # count only what classes extend, not bases checking each other
        # Each module's own entry and item locations, in order: a duplicate name must not hide
        # the first module's locations (its errors are reported as well).
        modules, module_locations, item_locations = [], {}, []
        for raw, location in raw_modules:
            entry = self.mapping(raw, location, "a module")
            if entry is None:
                continue
            module, locations = self.module(entry)
            modules.append(module)
            item_locations.append((entry, locations))
            if module.name in module_locations:
                self.error(entry.location, f"duplicate module '{module.name}' (first declared "
                                           f"at line {module_locations[module.name].line})")
            module_locations[module.name] = entry.location
        for key, entry in self.shared_params.items():
            if key not in self.used_params:
                self.error(entry.location, f"shared parameter '{key}' is used by no parameter "
                                           "list; remove it or refer to it")
        bases = []
        for base, entry in self.bases.items():
            if base not in self.extended:
                self.error(entry.location, f"base '{base}' is extended by no class; remove it "
                                           "or extend it")
                continue
            built = self.base_members.get(base, {})
            named = [m for m in self.base_entries.get(base, []) if isinstance(m.get("name"), str)]
            for member in named:
                if member["name"] not in built:
                    self.error(member.location, f"member '{member.get('name')}' of base '{base}' "
                                                "is overridden by every class that extends it; "
                                                "move it into those classes")
            module, _, symbol = str(entry.get("impl", "")).rpartition(".")
            members = [built[m["name"]] for m in named if m["name"] in built]
            bases.append(Base(base, module, symbol, self.base_docs.get(base, ""),
                              tuple(m for m in members if isinstance(m, Function)),
                              tuple(m for m in members if isinstance(m, Property))))
        self.built_bases = tuple(bases)
        by_name = {m.name: m for m in modules}
        for module, (entry, locations) in zip(modules, item_locations):
            for submodule in module.submodules:
                if submodule not in by_name:
                    self.error(locations["submodule:" + submodule],
                               f"submodule '{submodule}' of module '{module.name}' is not "
                               "declared in the schema")
            for reexport in module.reexports:
                source = by_name.get(reexport.source)
                if source is None:
                    self.error(locations[reexport.name], f"re-export '{reexport.name}' comes "
                               f"from undeclared module '{reexport.source}'")
                elif reexport.name not in [i.name for i in source.functions + source.classes]:
                    self.error(locations[reexport.name], f"module '{reexport.source}' declares "
                               f"no function or class '{reexport.name}' to re-export")
            parent = module.name.rpartition(".")[0]
            if parent and (parent not in by_name or module.name not in by_name[parent].submodules):
                self.error(entry.location, f"module '{module.name}' must be listed in the "
                                           f"submodules of '{parent}'")
        return tuple(modules)


def normalise(modules: tuple[Module, ...], bases: tuple[Base, ...] = ()) -> dict:
    """The schema as plain JSON-able data: the docs pipeline's input and the hash's input."""

    def param(p: Param) -> dict:
        out = {"name": p.name, "type": p.type.display(), "kind": p.kind, "doc": p.doc}
        if p.has_default:
            out["default"] = p.default
        if p.bounds is not None:
            out["range"] = list(p.bounds)
        if p.choices is not None:
            out["choices"] = list(p.choices)
        if p.path:
            out["path"] = True
        return out

    def function(f: Function) -> dict:
        return {"name": f.name, "impl": f"{f.impl_module}.{f.impl_name}".lstrip("."),
                "doc": f.doc, "params": [param(p) for p in f.params],
                "returns": {"type": f.returns.type.display(), "doc": f.returns.doc}
                if f.returns else None, "raises": [{"type": r.type, "doc": r.doc} for r in f.raises],
                "deprecated": f.deprecated, "since": f.since,
                **({"static": True} if f.static else {}),
                **({"metadata": True} if f.metadata else {}),
                **({"method_of": f.method_of} if f.method_of else {})}

    def prop(p: Property) -> dict:
        return {"name": p.name, "impl": p.impl_name, "type": p.type.display(), "doc": p.doc,
                **({"setter": p.setter} if p.setter else {}),
                **({"metadata": True} if p.metadata else {})}

    def klass(c: Class) -> dict:
        return {"name": c.name, "kind": c.kind, "impl": f"{c.impl_module}.{c.impl_name}",
                "extends": c.extends, "doc": c.doc,
                "init": [param(p) for p in c.init] if c.init is not None else None,
                **({"init_impl": c.init_impl} if c.init_impl != "init" else {}),
                "methods": [function(m) for m in c.methods],
                "properties": [prop(p) for p in c.properties],
                **({"inherited": sorted(c.inherited)} if c.inherited else {}),
                **({"decorator": True} if c.decorator else {}),
                **({"subclass_of": ".".join(c.subclass_of)} if c.subclass_of else {})}

    return {"schema_version": SCHEMA_VERSION, "bases": [
        {"name": b.name, "impl": f"{b.impl_module}.{b.impl_name}", "doc": b.doc,
         "methods": [function(m) for m in b.methods],
         "properties": [prop(p) for p in b.properties]} for b in bases], "modules": [
        {"name": m.name, "doc": m.doc, "submodules": list(m.submodules),
         "functions": [function(f) for f in m.functions],
         "classes": [klass(c) for c in m.classes],
         "variables": [{"name": v.name, "type": v.type.display(),
                        "impl": f"{v.impl_module}.{v.impl_name}", "doc": v.doc}
                       for v in m.variables],
         "reexports": [{"name": r.name, "from": r.source} for r in m.reexports]}
        for m in modules]}


def build_api(text: str, runtime_dir: Path, file: str = "api.yaml") -> Api:
    """Load, validate and freeze a schema; raise SchemaError listing every problem."""
    deferred: list[Diagnostic] = []  # strings UTF-8 cannot encode, reported with the rest
    root = load_schema(text, file, deferred)
    runtime = index_runtime(runtime_dir)
    # The Python layer stands beside the runtime (python/ next to runtime/).
    python = index_python(runtime_dir.parent / "python", runtime)
    builder = _Builder(runtime, python)
    modules = builder.api(root)
    if builder.diagnostics or deferred:
        raise SchemaError(builder.diagnostics + deferred)
    normalised = normalise(modules, builder.built_bases)
    canonical = json.dumps(normalised, sort_keys=True, ensure_ascii=False).encode()
    return Api(modules, builder.built_bases, hashlib.sha256(canonical).hexdigest()[:16],
               normalised, {name: module.package for name, module in (runtime | python).items()},
               frozenset(builder.tensor_classes))


def load_api(schema: Path, runtime_dir: Path) -> Api:
    return build_api(schema.read_text(encoding="utf-8"), runtime_dir, schema.name)
