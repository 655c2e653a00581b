"""What runtime/ declares at C level, read from its .pxd (and .pyx for Python classes); what
the Python layer (python/) defines; and the sentinels the runtime defines.

The runtime is a package of subpackages by concept (runtime/devices/stream.pyx is
tensorplay._runtime.devices.stream); the schema names a module by its file stem alone
(``stream.StreamCore``), so stems are unique across the runtime and the Python layer, and the
index records the package each one lives in. python/graphed_callables.py is
tensorplay._python.graphed_callables: a module function's ``impl:`` may name one of its
functions (``graphed_callables.make_graphed_callables``), which the wrapper imports.

The schema's ``impl:`` entries name runtime symbols; validation checks them against this index
so a typo, a wrong parameter count or a parameter declared in another C type than its kind
delivers (types.py, Note [Parameter kinds]) fails in ``codegen validate`` with a location
instead of in the C compiler or at run time.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from .load import read_text

_FUNCTION = re.compile(
    r"^(?:cdef|cpdef)\s+(?!class\b|extern\b|struct\b|enum\b)([^(=]*?)\b(\w+)\s*\(")
_CDEF_CLASS = re.compile(r"^cdef\s+class\s+(\w+)\s*(?:\(\s*([\w.]+)\s*\))?\s*:")
_METHOD = re.compile(r"^\s+(?:cdef|cpdef)\s+[^(=]*?\b(\w+)\s*\(")
_PY_CLASS = re.compile(r"^class\s+(\w+)\s*(?:\(\s*(\w+)|:)")
_PY_METHOD = re.compile(r"^    def\s+(\w+)\s*\(")
_PY_FUNCTION = re.compile(r"^def\s+(\w+)\s*\(")
# A declared parameter: its type (empty for an untyped one, which Cython reads as object) and
# its name, after any default ("=*", "= value") is cut off.
_DECLARED = re.compile(r"(.*?)\b(\w+)\s*")
PYTHON_PACKAGE = "tensorplay._python"


@dataclass(frozen=True)
class Arity:
    """How many arguments a declaration takes (self excluded): optional ones end in ``=*``
    (or ``= value`` in Python); and, for a C declaration, the C type of each, as written
    (normalised by c_type_of: "object" where no type is written)."""

    required: int
    total: int
    types: tuple[str, ...] = field(default=(), compare=False)

    def accepts(self, count: int) -> bool:
        return self.required <= count <= self.total

    def __str__(self) -> str:
        if self.required == self.total:
            return f"{self.total} argument{'s' if self.total != 1 else ''}"
        return f"{self.required} to {self.total} arguments"


@dataclass
class RuntimeModule:
    package: str = ""  # the dotted package it is imported from, e.g. tensorplay._runtime.devices
    # Module functions: cdef/cpdef functions of the .pxd, or (the Python layer) def functions.
    functions: dict[str, Arity] = field(default_factory=dict)
    returns: dict[str, str] = field(default_factory=dict)  # a cdef function's C return type
    classes: dict[str, dict[str, Arity]] = field(default_factory=dict)
    class_bases: dict[str, str] = field(default_factory=dict)
    python_classes: set[str] = field(default_factory=set)
    python_methods: dict[str, dict[str, Arity]] = field(default_factory=dict)

    @property
    def python_layer(self) -> bool:
        return self.package == PYTHON_PACKAGE

    def source(self, stem: str, suffix: str = ".pxd") -> str:
        """The module's file as a message names it, e.g. runtime/devices/stream.pxd, or
        python/graphed_callables.py."""
        if self.python_layer:
            return f"python/{stem}.py"
        folders = self.package.split(".")[2:]  # after tensorplay._runtime
        return "/".join(["runtime", *folders, stem + suffix])

    def methods_of(self, class_name: str) -> dict[str, Arity]:
        """Methods of a class including those of its bases in the same module."""
        methods: dict[str, Arity] = {}
        while class_name in self.classes:
            methods = self.classes[class_name] | methods  # the subclass's declaration wins
            class_name = self.class_bases.get(class_name, "")
        return methods


def _parameter_list(lines: list[str], start: int, column: int) -> str:
    """The text between the parenthesis opened at lines[start][column] and its match."""
    depth, text = 0, []
    for line in lines[start:]:
        for char in line[column:]:
            if char == "(":
                depth += 1
                if depth == 1:
                    continue
            elif char == ")":
                depth -= 1
                if depth == 0:
                    return "".join(text)
            text.append(char)
        text.append(" ")
        column = 0
    return "".join(text)


def c_spelling(written: str) -> str:
    """A C type in one spelling: spaces collapsed, a cimported module's prefix dropped
    (_stream.StreamCore is StreamCore), "object" where no type is written."""
    written = re.sub(r"\s*\*", "*", " ".join(written.split()))
    return re.sub(r"\b\w+\.(?=\w)", "", written) or "object"


def c_type_of(declared: str) -> str:
    """The C type a parameter declaration ("StreamCore stream", "bint keep=*") gives its
    parameter, in c_spelling's spelling."""
    text = declared.split("=")[0].strip()
    match = _DECLARED.fullmatch(text)
    return c_spelling(match.group(1) if match else text)


def _arity(parameters: str, method: bool) -> Arity:
    """Count the top-level comma-separated parameters (a function-pointer type holds commas)."""
    names, depth, current = [], 0, []
    for char in parameters + ",":
        if char == "," and depth == 0:
            names.append("".join(current).strip())
            current = []
            continue
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        current.append(char)
    names = [name for name in names if name and name != "void"]
    if method and names:
        names = names[1:]  # self
    # Cython's "=*" and Python's "= value" defaults are optional; *args takes any number more.
    if any(name.startswith("*") for name in names):
        required = [name for name in names if not name.startswith("*") and "=" not in name]
        return Arity(len(required), 1 << 30)
    optional = sum(1 for name in names if "=" in name)
    return Arity(len(names) - optional, len(names), tuple(c_type_of(name) for name in names))


class RuntimeLayoutError(ValueError):
    """Two modules (of the runtime or the Python layer) share a file stem, so a schema's impl:
    could not say which; or the runtime's sentinels cannot be read."""


def _package_of(path: Path, runtime_dir: Path) -> str:
    return ".".join(["tensorplay", "_runtime", *path.relative_to(runtime_dir).parent.parts])


def _sources(runtime_dir: Path, suffix: str) -> list[Path]:
    return sorted(path for path in runtime_dir.rglob(f"*{suffix}") if path.stem != "__init__")


def index_runtime(runtime_dir: Path) -> dict[str, RuntimeModule]:
    """Map runtime module name (file stem) to what it declares."""
    modules: dict[str, RuntimeModule] = {}
    homes: dict[str, Path] = {}
    for path in _sources(runtime_dir, ".pxd") + _sources(runtime_dir, ".pyx"):
        known = homes.setdefault(path.stem, path.parent)
        if known != path.parent:
            raise RuntimeLayoutError(
                f"runtime modules {known.relative_to(runtime_dir) / path.stem} and "
                f"{path.relative_to(runtime_dir).with_suffix('')} share the name {path.stem!r}; "
                "rename one: the schema names a runtime module by its file name alone")
    for pxd in _sources(runtime_dir, ".pxd"):
        module = modules.setdefault(pxd.stem, RuntimeModule(_package_of(pxd, runtime_dir)))
        current_class = None
        lines = read_text(pxd, pxd.relative_to(runtime_dir.parent).as_posix()).splitlines()
        for number, line in enumerate(lines):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            class_match = _CDEF_CLASS.match(line)
            if class_match:
                current_class = class_match.group(1)
                module.classes.setdefault(current_class, {})
                if class_match.group(2):
                    module.class_bases[current_class] = class_match.group(2).split(".")[-1]
                continue
            if not line[0].isspace():
                current_class = None
                function_match = _FUNCTION.match(line)
                if function_match:
                    name = function_match.group(2)
                    module.functions[name] = _arity(
                        _parameter_list(lines, number, function_match.end() - 1), method=False)
                    module.returns[name] = c_spelling(
                        re.sub(r"\b(?:inline|public|api)\b", "", function_match.group(1)))
                continue
            method_match = _METHOD.match(line)
            if current_class and method_match:
                module.classes[current_class][method_match.group(1)] = _arity(
                    _parameter_list(lines, number, method_match.end() - 1), method=True)
    for pyx in _sources(runtime_dir, ".pyx"):
        module = modules.setdefault(pyx.stem, RuntimeModule(_package_of(pyx, runtime_dir)))
        python_class = None
        python_bases: dict[str, str] = {}
        lines = read_text(pyx, pyx.relative_to(runtime_dir.parent).as_posix()).splitlines()
        for number, line in enumerate(lines):
            class_match = _PY_CLASS.match(line)
            if class_match:
                python_class = class_match.group(1)
                module.python_classes.add(python_class)
                module.python_methods.setdefault(python_class, {})
                if class_match.group(2):
                    python_bases[python_class] = class_match.group(2)
                continue
            if line and not line[0].isspace():
                python_class = None
            method_match = _PY_METHOD.match(line)
            if python_class and method_match:
                module.python_methods[python_class][method_match.group(1)] = _arity(
                    _parameter_list(lines, number, method_match.end() - 1), method=True)
        # A Python class has the methods of its bases in the same module too (the subclass's
        # own definition wins).
        for name in list(module.python_methods):
            base, seen = python_bases.get(name), {name}
            while base in module.python_methods and base not in seen:
                seen.add(base)
                module.python_methods[name] = module.python_methods[base] | \
                    module.python_methods[name]
                base = python_bases.get(base)
    return modules


def index_python(python_dir: Path, runtime: dict[str, RuntimeModule]) -> dict[str, RuntimeModule]:
    """Map each module of the Python layer (python/*.py, by file stem) to its top-level
    functions; a stem the runtime uses too is a RuntimeLayoutError."""
    modules: dict[str, RuntimeModule] = {}
    if not python_dir.is_dir():
        return modules
    for path in sorted(python_dir.glob("*.py")):
        if path.stem == "__init__":
            continue
        if path.stem in runtime:
            raise RuntimeLayoutError(
                f"python/{path.name} and {runtime[path.stem].source(path.stem, '')} share the "
                f"name {path.stem!r}; rename one: the schema names a module by its file name "
                "alone")
        module = modules.setdefault(path.stem, RuntimeModule(PYTHON_PACKAGE))
        lines = read_text(path, f"python/{path.name}").splitlines()
        for number, line in enumerate(lines):
            match = _PY_FUNCTION.match(line)
            if match:
                arity = _arity(_parameter_list(lines, number, match.end() - 1), method=False)
                module.functions[match.group(1)] = Arity(arity.required, arity.total)
    return modules


SENTINELS = Path("base") / "sentinels.py"


def read_sentinels(runtime_dir: Path) -> dict[str, object]:
    """The sentinels the runtime defines (runtime/base/sentinels.py): its top-level assignments
    of a literal, by name. The generator takes them from there, so that the wrappers, the stubs
    and the runtime's checks agree on them."""
    path = runtime_dir / SENTINELS
    try:
        tree = ast.parse(read_text(path, f"runtime/{SENTINELS.as_posix()}"))
    except (OSError, SyntaxError) as error:
        raise RuntimeLayoutError(f"runtime/{SENTINELS.as_posix()}: cannot read the runtime's "
                                 f"sentinels ({error})") from None
    found: dict[str, object] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = statement.value.value
    return found
