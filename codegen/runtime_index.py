"""What runtime/ declares at C level, read from its .pxd (and .pyx for Python classes).

The runtime is a package of subpackages by concept (runtime/devices/stream.pyx is
tensorplay._runtime.devices.stream); the schema names a module by its file stem alone
(``stream.StreamCore``), so stems are unique across the runtime and the index records the
package each one lives in.

The schema's ``impl:`` entries name runtime symbols; validation checks them against this index
so a typo or a wrong parameter count fails in ``codegen validate`` with a location instead of
in the C compiler.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .load import read_text

_FUNCTION = re.compile(r"^(?:cdef|cpdef)\s+(?!class\b|extern\b|struct\b|enum\b)[^(=]*?\b(\w+)\s*\(")
_CDEF_CLASS = re.compile(r"^cdef\s+class\s+(\w+)\s*(?:\(\s*([\w.]+)\s*\))?\s*:")
_METHOD = re.compile(r"^\s+(?:cdef|cpdef)\s+[^(=]*?\b(\w+)\s*\(")
_PY_CLASS = re.compile(r"^class\s+(\w+)\s*(?:\(\s*(\w+)|:)")
_PY_METHOD = re.compile(r"^    def\s+(\w+)\s*\(")


@dataclass(frozen=True)
class Arity:
    """How many arguments a C declaration takes (self excluded): optional ones end in ``=*``."""

    required: int
    total: int

    def accepts(self, count: int) -> bool:
        return self.required <= count <= self.total

    def __str__(self) -> str:
        if self.required == self.total:
            return f"{self.total} argument{'s' if self.total != 1 else ''}"
        return f"{self.required} to {self.total} arguments"


@dataclass
class RuntimeModule:
    package: str = ""  # the dotted package it is imported from, e.g. tensorplay._runtime.devices
    functions: dict[str, Arity] = field(default_factory=dict)
    classes: dict[str, dict[str, Arity]] = field(default_factory=dict)
    class_bases: dict[str, str] = field(default_factory=dict)
    python_classes: set[str] = field(default_factory=set)
    python_methods: dict[str, dict[str, Arity]] = field(default_factory=dict)

    def source(self, stem: str, suffix: str = ".pxd") -> str:
        """The module's file as a message names it, e.g. runtime/devices/stream.pxd."""
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
    return Arity(len(names) - optional, len(names))


class RuntimeLayoutError(ValueError):
    """Two runtime modules share a file stem, so a schema's impl: could not say which."""


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
                    module.functions[function_match.group(1)] = _arity(
                        _parameter_list(lines, number, function_match.end() - 1), method=False)
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
